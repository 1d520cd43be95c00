import random

n = random.randint(2, 2000)
print(n)
print(*[random.randint(1, i - 1) for i in range(2, n + 1)])
