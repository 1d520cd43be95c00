/* veribatch InvBench sample: an off-by-one loop bound (unsafe)
   Written for veribatch (Apache-2.0); SV-COMP style, property: reach_error() unreachable. */
extern void abort(void);
extern void __assert_fail(const char *, const char *, unsigned int, const char *);
void reach_error(void) { __assert_fail("0", "off_by_one.c", 5, "reach_error"); }
extern int __VERIFIER_nondet_int(void);
void assume_abort_if_not(int cond) { if (!cond) { abort(); } }
void __VERIFIER_assert(int cond) { if (!(cond)) { ERROR: { reach_error(); } } return; }

int main(void) {
    int n = __VERIFIER_nondet_int();
    int i = 0;
    int s = 0;
    assume_abort_if_not(n >= 0 && n <= 1000);
    while (i <= n) {
        s = s + 1;
        i = i + 1;
    }
    __VERIFIER_assert(s == n);
    return 0;
}
