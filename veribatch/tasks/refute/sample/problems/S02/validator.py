import sys

lines = sys.stdin.read().split("\n")
assert lines[-1] == "", "missing final newline"
lines.pop()
t = int(lines[0])
assert 1 <= t <= 10**4, "t out of range"
assert len(lines) == 1 + 2 * t, "wrong number of lines"
total = 0
for k in range(t):
    n = int(lines[1 + 2 * k])
    assert 1 <= n <= 2 * 10**5, "n out of range"
    a = list(map(int, lines[2 + 2 * k].split(" ")))
    assert len(a) == n and all(1 <= x <= 10**9 for x in a), "bad array"
    total += n
assert total <= 2 * 10**5, "sum of n too large"
