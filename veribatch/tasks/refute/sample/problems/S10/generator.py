import random

n = random.randint(1, 8)
print("".join(random.choice("ab") for _ in range(n)))
