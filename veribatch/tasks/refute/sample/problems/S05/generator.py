import random

n = random.randint(1, 6)
g = random.randint(1, 1000)
print(n)
print(*[g * random.randint(1, 10**6) for _ in range(n)])
