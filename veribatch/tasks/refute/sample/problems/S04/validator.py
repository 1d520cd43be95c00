import sys

lines = sys.stdin.read().split("\n")
assert lines[-1] == "" and len(lines) == 3, "expected two lines"
n = int(lines[0])
assert 2 <= n <= 10**5, "n out of range"
p = list(map(int, lines[1].split(" ")))
assert len(p) == n - 1, "wrong count"
assert all(1 <= x < i for i, x in enumerate(p, start=2)), "p_i must be below i"
