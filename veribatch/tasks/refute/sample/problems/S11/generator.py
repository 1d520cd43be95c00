import random

n = random.randint(1, 10**5)
print(n)
print(*[random.randint(1, 10**9) for _ in range(n)])
