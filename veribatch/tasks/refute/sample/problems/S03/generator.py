import random

n = random.randint(1, 8)
print(n)
print(*[random.randint(-10**4, 10**4) for _ in range(n)])
