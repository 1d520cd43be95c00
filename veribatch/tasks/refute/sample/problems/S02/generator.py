import random

t = random.randint(1, 5)
print(t)
for _ in range(t):
    n = random.randint(1, 6)
    print(n)
    print(*[random.randint(1, 10) for _ in range(n)])
