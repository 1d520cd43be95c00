"""Small C programs with known verdicts, one (or a safe/unsafe pair) per construct.

Each unsafe twin differs from its safe program by one detail (off-by-one bound,
flipped comparison, wrong C-semantics assumption) and its error really is
reachable: the verifier must confirm it by running the compiled program.
"""

from __future__ import annotations

HEADER = """
extern void abort(void);
extern void __assert_fail(const char *, const char *, unsigned int, const char *);
void reach_error() { __assert_fail("0", "t.c", 3, "reach_error"); }
extern int __VERIFIER_nondet_int(void);
extern unsigned int __VERIFIER_nondet_uint(void);
extern unsigned short __VERIFIER_nondet_ushort(void);
extern char __VERIFIER_nondet_char(void);
extern _Bool __VERIFIER_nondet_bool(void);
void assume_abort_if_not(int cond) { if (!cond) { abort(); } }
void __VERIFIER_assert(int cond) { if (!(cond)) { ERROR: { reach_error(); abort(); } } }
"""


def prog(body: str) -> str:
    return HEADER + body


# (name, expected verdict, program text)
CASES: list[tuple[str, str, str]] = []


def pair(name: str, safe: str, unsafe: str) -> None:
    CASES.append((f"{name}-safe", "TRUE", prog(safe)))
    CASES.append((f"{name}-unsafe", "FALSE", prog(unsafe)))


pair(
    "while-counter",
    """int main() { int i = 0; int n = __VERIFIER_nondet_int();
       assume_abort_if_not(n >= 0 && n <= 1000);
       while (i < n) { i++; } __VERIFIER_assert(i == n); return 0; }""",
    """int main() { int i = 0; int n = __VERIFIER_nondet_int();
       assume_abort_if_not(n >= 0 && n <= 1000);
       while (i <= n) { i++; } __VERIFIER_assert(i == n); return 0; }""",
)
pair(
    "c-division-negative",  # C truncates toward zero: -7 / 2 == -3, -7 % 2 == -1
    """int main() { int x = __VERIFIER_nondet_int(); assume_abort_if_not(x > -100 && x < 0);
       int q = x / 2; int r = x % 2;
       __VERIFIER_assert(q * 2 + r == x && r <= 0 && r > -2); return 0; }""",
    """int main() { int x = __VERIFIER_nondet_int(); assume_abort_if_not(x > -100 && x < 0);
       int r = x % 2; __VERIFIER_assert(r >= 0); return 0; }""",
)
pair(
    "c-division-by-negative",  # 7 / -2 == -3 and 7 % -2 == 1 in C
    """int main() { int d = __VERIFIER_nondet_int(); assume_abort_if_not(d == -2);
       int q = 7 / d; int r = 7 % d; __VERIFIER_assert(q == -3 && r == 1); return 0; }""",
    """int main() { int d = __VERIFIER_nondet_int(); assume_abort_if_not(d == -2);
       int q = 7 / d; __VERIFIER_assert(q == -4); return 0; }""",
)
pair(
    "unsigned-wraparound",
    """int main() { unsigned int x = __VERIFIER_nondet_uint(); assume_abort_if_not(x == 0);
       x = x - 1; __VERIFIER_assert(x == 4294967295U); __VERIFIER_assert(x > 0); return 0; }""",
    """int main() { unsigned int x = __VERIFIER_nondet_uint();
       unsigned int y = x + 1; __VERIFIER_assert(y > x); return 0; }""",
)
pair(
    "unsigned-loop-wrap",
    """int main() { unsigned int i = 10; int n = 0;
       while (i > 0) { i--; n++; } __VERIFIER_assert(n == 10); return 0; }""",
    """int main() { unsigned int i = 3; int n = 0;
       while (i != 5) { i = i - 1; n++; if (n > 7) break; }
       __VERIFIER_assert(i == 5); return 0; }""",
)
pair(
    "signed-unsigned-compare",  # -1 < 1u is false in C: -1 converts to UINT_MAX
    """int main() { int m = __VERIFIER_nondet_int(); assume_abort_if_not(m == -1);
       unsigned int u = 1; __VERIFIER_assert(!(m < u)); return 0; }""",
    """int main() { int m = __VERIFIER_nondet_int(); assume_abort_if_not(m == -1);
       unsigned int u = 1; __VERIFIER_assert(m < u); return 0; }""",
)
pair(
    "narrowing-conversion",  # gcc wraps conversions to narrower signed types
    """int main() { unsigned short a = __VERIFIER_nondet_ushort(); short s = a;
       __VERIFIER_assert(s >= -32768 && s <= 32767); int x = 300; char c = x;
       __VERIFIER_assert(c == 44); return 0; }""",
    """int main() { unsigned short a = __VERIFIER_nondet_ushort(); short s = a;
       __VERIFIER_assert(s >= 0); return 0; }""",
)
pair(
    "break-continue",
    """int main() { int i = 0; int evens = 0;
       while (1) { i++; if (i > 20) break; if (i % 2) continue; evens++; }
       __VERIFIER_assert(evens == 10); return 0; }""",
    """int main() { int i = 0; int evens = 0;
       while (1) { i++; if (i > 20) break; if (i % 2) continue; evens++; }
       __VERIFIER_assert(evens == 11); return 0; }""",
)
pair(
    "do-while",
    """int main() { int x = 0; int n = __VERIFIER_nondet_int(); assume_abort_if_not(n >= 0 && n < 50);
       do { x++; } while (x < n); __VERIFIER_assert(x >= 1 && (x == n || n == 0)); return 0; }""",
    """int main() { int x = 0; int n = __VERIFIER_nondet_int(); assume_abort_if_not(n >= 0 && n < 50);
       do { x++; } while (x < n); __VERIFIER_assert(x == n); return 0; }""",
)
pair(
    "nested-loops",
    """int main() { int i, j, c = 0; for (i = 0; i < 4; i++) { for (j = 0; j < 3; j++) { c++; } }
       __VERIFIER_assert(c == 12); return 0; }""",
    """int main() { int i, j, c = 0; for (i = 0; i < 4; i++) { for (j = 0; j <= 3; j++) { c++; } }
       __VERIFIER_assert(c == 12); return 0; }""",
)
pair(
    "sequential-loops",
    """int main() { int n = __VERIFIER_nondet_int(); assume_abort_if_not(n >= 0 && n < 100);
       int x = 0; while (x < n) x++; int y = x; while (y > 0) y--; __VERIFIER_assert(y == 0);
       return 0; }""",
    """int main() { int n = __VERIFIER_nondet_int(); assume_abort_if_not(n >= 0 && n < 100);
       int x = 0; while (x < n) x++; int y = x; while (y > 0) y--; __VERIFIER_assert(x != n || n == 0);
       return 0; }""",
)
pair(
    "inlined-calls",
    """int twice(int v) { return v + v; }
       int clamp(int v, int hi) { if (v > hi) return hi; return v; }
       int main() { int a = __VERIFIER_nondet_int(); assume_abort_if_not(a >= 0 && a < 1000);
       int b = clamp(twice(a), 100); __VERIFIER_assert(b <= 100 && b >= 0); return 0; }""",
    """int twice(int v) { return v + v; }
       int clamp(int v, int hi) { if (v > hi) return hi; return v; }
       int main() { int a = __VERIFIER_nondet_int(); assume_abort_if_not(a >= 0 && a < 1000);
       int b = clamp(twice(a), 100); __VERIFIER_assert(b < 100); return 0; }""",
)
pair(
    "globals",
    """int g = 5; int counter;
       void bump(void) { counter++; g = g + 2; }
       int main() { bump(); bump(); __VERIFIER_assert(counter == 2 && g == 9); return 0; }""",
    """int g = 5; int counter;
       void bump(void) { counter++; g = g + 2; }
       int main() { bump(); bump(); __VERIFIER_assert(g == 7); return 0; }""",
)
pair(
    "side-effect-condition",  # the cohencu pattern: counter++ in the loop condition
    """int counter = 0;
       int main() { int x = 0; while (counter++ < 5) { x += 2; } __VERIFIER_assert(x == 10 && counter == 6);
       return 0; }""",
    """int counter = 0;
       int main() { int x = 0; while (counter++ < 5) { x += 2; } __VERIFIER_assert(counter == 5);
       return 0; }""",
)
pair(
    "short-circuit",
    """int main() { int a = __VERIFIER_nondet_int(); int k = 0;
       if (a > 0 && (k = 1)) { __VERIFIER_assert(k == 1); } else { __VERIFIER_assert(k == 0 || a > 0); }
       return 0; }""",
    """int main() { int a = __VERIFIER_nondet_int(); int k = 0;
       if (a > 0 || (k = 1)) { __VERIFIER_assert(k == 0); } return 0; }""",
)
pair(
    "bool-char-ternary",
    """int main() { _Bool b = __VERIFIER_nondet_bool(); int x = b ? 10 : 20; _Bool c = x;
       __VERIFIER_assert(c == 1 && (x == 10 || x == 20)); char ch = __VERIFIER_nondet_char();
       __VERIFIER_assert(ch >= -128 && ch <= 127); return 0; }""",
    """int main() { _Bool b = __VERIFIER_nondet_bool(); int x = b ? 10 : 20;
       __VERIFIER_assert(x == 10); return 0; }""",
)
pair(
    "bitwise-mask-shift",
    """int main() { int x = __VERIFIER_nondet_int(); assume_abort_if_not(x >= -1000 && x <= 1000);
       int lo = x & 1; int h = x >> 1; __VERIFIER_assert(h * 2 + lo == x); return 0; }""",
    """int main() { int x = __VERIFIER_nondet_int(); assume_abort_if_not(x >= -1000 && x <= 1000);
       int h = x >> 1; __VERIFIER_assert(h == x / 2); return 0; }""",
)
pair(
    "bitwise-and-or-xor",  # C's & | ^ on two's complement, promoted char, negative int
    """extern unsigned char __VERIFIER_nondet_uchar(void);
       int main() { unsigned char x = __VERIFIER_nondet_uchar();
       int a = __VERIFIER_nondet_int(); assume_abort_if_not(a >= -8 && a <= 8);
       __VERIFIER_assert((x & 0x0f) + (x & 0xf0) == x); __VERIFIER_assert((x | 0x80) >= 128 && (x ^ x) == 0);
       __VERIFIER_assert((a | 3) != -5 || (a >= -8 && a <= -5)); return 0; }""",
    """extern unsigned char __VERIFIER_nondet_uchar(void);
       int main() { unsigned char x = __VERIFIER_nondet_uchar();
       int a = __VERIFIER_nondet_int(); assume_abort_if_not(a >= -8 && a <= 8);
       __VERIFIER_assert((x & 0x0f) + (x & 0xf0) == x); __VERIFIER_assert((x | 0x80) >= 128 && (x ^ x) == 0);
       __VERIFIER_assert((a | 3) != -5 || a >= -7); return 0; }""",
)
pair(
    "bitwise-power-of-two",  # `b - 1` wraps (unsigned): its bits must not cost a `mod`
    """int main() { unsigned int b = 1; while (__VERIFIER_nondet_int()) { b *= 2; if (b > 1000) break; }
       if (b <= 1000) { __VERIFIER_assert((b & (b - 1)) == 0); } return 0; }""",
    """int main() { unsigned int b = 1; while (__VERIFIER_nondet_int()) { b *= 2; if (b > 1000) break; }
       if (b <= 1000) { __VERIFIER_assert((b & (b - 1)) == 0 && b != 64); } return 0; }""",
)
pair(
    "recursion-bounded",  # inlined like a loop is unrolled; n <= 5 makes the unrolling complete
    """int sum(int n) { if (n <= 0) return 0; return n + sum(n - 1); }
       int main() { int n = __VERIFIER_nondet_int(); assume_abort_if_not(n >= 0 && n <= 5);
       __VERIFIER_assert(sum(n) != 7); return 0; }""",
    """int sum(int n) { if (n <= 0) return 0; return n + sum(n - 1); }
       int main() { int n = __VERIFIER_nondet_int(); assume_abort_if_not(n >= 0 && n <= 5);
       __VERIFIER_assert(sum(n) != 6); return 0; }""",
)
pair(
    "for-decl-shadowing",
    """int main() { int i = 7; int s = 0; for (int i = 0; i < 3; i++) { s += i; }
       __VERIFIER_assert(i == 7 && s == 3); return 0; }""",
    """int main() { int i = 7; int s = 0; for (int i = 0; i < 3; i++) { s += i; }
       __VERIFIER_assert(i == 3); return 0; }""",
)
pair(
    "plain-assert",  # wonda variants call assert() directly
    """int main() { int a = __VERIFIER_nondet_int(); assume_abort_if_not(a > 3); assert(a > 2); return 0; }""",
    """int main() { int a = __VERIFIER_nondet_int(); assume_abort_if_not(a > 3); assert(a > 4); return 0; }""",
)
pair(
    "deep-counterexample",
    """int main() { int i = 0; while (i < 300) { i++; } __VERIFIER_assert(i == 300); return 0; }""",
    """int main() { int i = 0; while (i < 300) { i++; if (i == 100) reach_error(); } return 0; }""",
)

# Outside the subset: UNKNOWN, with the construct named in the reason.
UNSUPPORTED: list[tuple[str, str, str]] = [
    ("union", "unions", prog("int main() { union u { int f; } v; v.f = 1; __VERIFIER_assert(v.f == 1); return 0; }")),
    ("address-taken-parameter", "address of a variable",
     prog("int f(int x) { int *p = &x; *p = 2; return x; }\n"
          "int main() { __VERIFIER_assert(f(1) == 2); return 0; }")),
    ("long-double", "long double", prog("int main() { long double d = 1.5; __VERIFIER_assert(d > 1); return 0; }")),
    ("goto", "goto", prog("int main() { int x = 0; l: x++; if (x < 3) goto l; __VERIFIER_assert(x == 3); return 0; }")),
    ("undefined-call", "undefined function foo", prog("int foo(int); int main() { __VERIFIER_assert(foo(1) == 1); return 0; }")),
]
pair(
    "address-taken-scalars",  # `&x`: x lives in memory; writes through the pointer are x's
    """void inc(int *p) { (*p)++; } int total;
       int main() { int n = __VERIFIER_nondet_int(); int i, x = 1; int *p = &x; *p = 2;
       if (n < 0 || n > 1000) return 0;
       for (i = 0; i < n; i++) { inc(&x); inc(&total); }
       __VERIFIER_assert(x == n + 2 && total == n && *p == x); return 0; }""",
    """void inc(int *p) { (*p)++; } int total;
       int main() { int n = __VERIFIER_nondet_int(); int i, x = 1; int *p = &x; *p = 2;
       if (n < 0 || n > 1000) return 0;
       for (i = 0; i < n; i++) { inc(&x); inc(&total); }
       __VERIFIER_assert(x != 5 || total != 3); return 0; }""",
)
pair(
    "loop-in-branch-join",  # states from inside and outside a loop meet after the if
    """int main() { int c = __VERIFIER_nondet_int(); int x = 0;
       if (c > 0) { while (x < 10) { x += 2; } } else { x = 10; }
       __VERIFIER_assert(x == 10); return 0; }""",
    """int main() { int c = __VERIFIER_nondet_int(); int x = 0;
       if (c > 0) { while (x < 10) { x += 3; } } else { x = 10; }
       __VERIFIER_assert(x == 10); return 0; }""",
)
pair(
    "loop-in-function-called-twice",
    """int sum_to(int n) { int s = 0; int i = 0; while (i < n) { i++; s += i; if (s > 1000) return -1; } return s; }
       int main() { int a = sum_to(3); int b = sum_to(4); __VERIFIER_assert(a == 6 && b == 10); return 0; }""",
    """int sum_to(int n) { int s = 0; int i = 0; while (i < n) { i++; s += i; if (s > 7) return -1; } return s; }
       int main() { int a = sum_to(3); int b = sum_to(4); __VERIFIER_assert(a == 6 && b == 10); return 0; }""",
)
pair(
    "continue-in-do-while-and-for",
    """int main() { int i = 0; int n = 0; do { i++; if (i % 3 == 0) continue; n++; } while (i < 9);
       int k; int m = 0; for (k = 0; k < 6; k++) { if (k & 1) continue; m++; }
       __VERIFIER_assert(n == 6 && m == 3 && k == 6); return 0; }""",
    """int main() { int i = 0; int n = 0; do { i++; if (i % 3 == 0) continue; n++; } while (i < 9);
       __VERIFIER_assert(n == 7); return 0; }""",
)
pair(
    "switch-fallthrough",
    """int main() { int k = __VERIFIER_nondet_int(); int r = 0;
       switch (k) { case 1: r = 10; break; case 2: r = 20; case 3: r += 1; break; default: r = -1; }
       __VERIFIER_assert(r == 10 || r == 21 || r == 1 || r == -1);
       __VERIFIER_assert(k != 2 || r == 21); __VERIFIER_assert(k != 3 || r == 1); return 0; }""",
    """int main() { int k = __VERIFIER_nondet_int(); int r = 0;
       switch (k) { case 1: r = 10; break; case 2: r = 20; case 3: r += 1; break; default: r = -1; }
       __VERIFIER_assert(k != 2 || r == 20); return 0; }""",
)
pair(
    "shift-by-a-variable",  # 1 << k for k in 0..7; the twin's bound is off by one power
    """int main() { unsigned int k = __VERIFIER_nondet_uint() % 8; unsigned int x = 1u << k;
       int n = __VERIFIER_nondet_int(); if (n < 0 || n > 30) return 0; int y = 1073741824 >> n;
       __VERIFIER_assert(x >= 1 && x <= 128 && y >= 1); return 0; }""",
    """int main() { unsigned int k = __VERIFIER_nondet_uint() % 8; unsigned int x = 1u << k;
       __VERIFIER_assert(x <= 64); return 0; }""",
)
pair(
    "cil-forward-goto",  # CIL's loop shape: goto while_break, plus a goto out of the loop
    """int main() { int x = 0; int n = __VERIFIER_nondet_int(); if (n > 100) return 0;
       while (1) { while_continue: ; if (!(x < n)) { goto while_break; } x++; if (x == 50) goto out; }
       while_break: ;
       __VERIFIER_assert(n <= 0 || x == n); return 0;
       out: __VERIFIER_assert(x == 50 && n >= 50); return 1; }""",
    """int main() { int x = 0; int n = __VERIFIER_nondet_int(); if (n > 100) return 0;
       while (1) { while_continue: ; if (!(x < n)) { goto while_break; } x++; if (x == 50) goto out; }
       while_break: ;
       __VERIFIER_assert(n <= 0 || x == n); return 0;
       out: __VERIFIER_assert(x == 50 && n > 50); return 1; }""",
)
CASES.append(("goto-over-a-declaration-safe", "TRUE", prog(
    "int main() { int c = __VERIFIER_nondet_int(); if (c) goto L; int y = 5;\n"
    "  L: __VERIFIER_assert(c || y == 5); return 0; }")))



def assert_memory_certificate(res, name: str, expected: str) -> None:  # noqa: ANN001
    """The verdict of a memory program and its certificate: a FALSE replayed by gcc, a
    Spacer TRUE re-checked and naming the heap model it assumes, else a complete unrolling."""
    from veribatch.verifiers.result import Status
    from veribatch.verifiers.z3c.engines import HEAP_ASSUMPTION

    assert str(res.status) == expected, (name, res.status, res.reason)
    if res.status is Status.FALSE:
        assert res.extras["counterexample"]["replay"] == "reach_error reached by the compiled program"
    elif res.extras["proof"] == "spacer":
        assert res.extras["proof_checked"] is True and res.extras["assumes"] == HEAP_ASSUMPTION
    else:
        assert res.extras["proof"] == "complete-unrolling"


def assert_never_true(text: str, label: str) -> None:
    """An unsafe program whose Horn clauses over-approximate it (bit-wise `x & y`, opaque
    doubles): the abstraction may admit spurious error paths, never hide a real one, so
    Spacer must not call the clauses safe and the portfolio answers FALSE (gcc replays the
    trace), UNKNOWN or TIMEOUT — never TRUE."""
    from veribatch.verifiers.z3c import api, chc
    from veribatch.verifiers.z3c.encode import encode
    from veribatch.verifiers.z3c.engines import parsed

    ans = chc.solve(encode(parsed(text), mode="chc"), timeout_ms=30_000)
    assert ans.status != "safe", label
    res = api.verify(text, 20, in_process=True)
    assert res.status.value in ("FALSE", "UNKNOWN", "TIMEOUT"), (label, res.status, res.reason)
