import sys

text = sys.stdin.read()
assert text.endswith("\n") and text.count("\n") == 1, "expected one line"
s = text[:-1]
assert 1 <= len(s) <= 2 * 10**5, "length out of range"
assert all("a" <= c <= "z" for c in s), "not lowercase letters"
