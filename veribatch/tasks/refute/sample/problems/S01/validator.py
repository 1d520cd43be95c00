import sys

lines = sys.stdin.read().split("\n")
assert lines[-1] == "" and all(line.strip() == line for line in lines), "whitespace"
n = int(lines[0])
assert 2 <= n <= 2 * 10**5, "n out of range"
a = list(map(int, lines[1].split(" ")))
assert len(a) == n, "wrong count"
assert all(-10**9 <= x <= 10**9 for x in a), "a_i out of range"
assert all(line == "" for line in lines[2:]), "trailing lines"
