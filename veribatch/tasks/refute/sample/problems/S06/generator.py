import random

n = random.randint(1, 10)
print(n)
print(*[random.randint(1, 3) for _ in range(n)])
