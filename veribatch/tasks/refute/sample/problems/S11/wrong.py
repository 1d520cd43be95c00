n = int(input())
a = list(map(int, input().split()))
inv = 0
for i in range(n):
    ai = a[i]
    for j in range(i + 1, n):
        if ai > a[j]:
            inv += 1
print(inv)
