t = int(input())
for _ in range(t):
    n = int(input())
    p = [0] + list(map(int, input().split()))
    seen = [False] * (n + 1)
    cycles = 0
    for i in range(1, n + 1):
        if not seen[i]:
            cycles += 1
            j = i
            while not seen[j]:
                seen[j] = True
                j = p[j]
    print(n - cycles)
