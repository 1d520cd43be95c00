import sys

lines = sys.stdin.read().split("\n")
assert lines[-1] == "", "missing final newline"
lines.pop()
t = int(lines[0])
assert 1 <= t <= 100, "t out of range"
assert len(lines) == 1 + 2 * t, "wrong number of lines"
total = 0
for k in range(t):
    n = int(lines[1 + 2 * k])
    assert 1 <= n <= 100, "n out of range"
    p = list(map(int, lines[2 + 2 * k].split(" ")))
    assert sorted(p) == list(range(1, n + 1)), "not a permutation"
    total += n
assert total <= 100, "sum of n too large"
