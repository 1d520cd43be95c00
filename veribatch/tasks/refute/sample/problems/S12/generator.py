import random

print(random.randint(1, 10**18))
