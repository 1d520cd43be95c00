n = int(input())
a = sorted(map(int, input().split()))
if a[0] == a[-1]:
    print(-1)
else:
    print(a[-2])
