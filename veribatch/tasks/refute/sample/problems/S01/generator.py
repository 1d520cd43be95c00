import random

n = random.randint(2, 10)
print(n)
print(*[random.randint(-10**9, 10**9) for _ in range(n)])
