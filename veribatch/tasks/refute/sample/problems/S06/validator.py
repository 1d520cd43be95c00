import sys

lines = sys.stdin.read().split("\n")
assert lines[-1] == "" and len(lines) == 3, "expected two lines"
n = int(lines[0])
assert 1 <= n <= 2 * 10**5, "n out of range"
a = list(map(int, lines[1].split(" ")))
assert len(a) == n and all(1 <= x <= 10**9 for x in a), "bad array"
