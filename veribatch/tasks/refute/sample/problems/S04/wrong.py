n = int(input())
p = list(map(int, input().split()))
children = [[] for _ in range(n + 1)]
for i, par in enumerate(p, start=2):
    children[par].append(i)


def depth(v):
    best = 0
    for c in children[v]:
        best = max(best, depth(c) + 1)
    return best


print(depth(1))
