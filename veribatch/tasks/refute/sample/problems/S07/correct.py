n = int(input())
a = sorted(set(map(int, input().split())))
print(a[-2] if len(a) > 1 else -1)
