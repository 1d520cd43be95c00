import random

t = random.randint(1, 4)
print(t)
for _ in range(t):
    n = random.randint(1, 6)
    p = list(range(1, n + 1))
    random.shuffle(p)
    print(n)
    print(*p)
