/* veribatch InvBench sample: two sequential loops, the second undoing the first (safe)
   Written for veribatch (Apache-2.0); SV-COMP style, property: reach_error() unreachable. */
extern void abort(void);
extern void __assert_fail(const char *, const char *, unsigned int, const char *);
void reach_error(void) { __assert_fail("0", "two_phase.c", 5, "reach_error"); }
extern int __VERIFIER_nondet_int(void);
void assume_abort_if_not(int cond) { if (!cond) { abort(); } }
void __VERIFIER_assert(int cond) { if (!(cond)) { ERROR: { reach_error(); } } return; }

int main(void) {
    int n = __VERIFIER_nondet_int();
    int i = 0;
    int a = 0;
    assume_abort_if_not(n >= 0 && n <= 10000);
    while (i < n) {
        a = a + 2;
        i = i + 1;
    }
    while (i > 0) {
        a = a - 2;
        i = i - 1;
    }
    __VERIFIER_assert(a == 0);
    return 0;
}
