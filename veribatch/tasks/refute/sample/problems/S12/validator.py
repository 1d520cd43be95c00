import sys

text = sys.stdin.read()
assert text.endswith("\n") and text.count("\n") == 1, "expected one line"
n = int(text)
assert str(n) + "\n" == text, "not a canonical integer"
assert 1 <= n <= 10**18, "n out of range"
