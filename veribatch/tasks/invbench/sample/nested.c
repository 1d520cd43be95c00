/* veribatch InvBench sample: nested loops counting steps (safe)
   Written for veribatch (Apache-2.0); SV-COMP style, property: reach_error() unreachable. */
extern void abort(void);
extern void __assert_fail(const char *, const char *, unsigned int, const char *);
void reach_error(void) { __assert_fail("0", "nested.c", 5, "reach_error"); }
extern int __VERIFIER_nondet_int(void);
void assume_abort_if_not(int cond) { if (!cond) { abort(); } }
void __VERIFIER_assert(int cond) { if (!(cond)) { ERROR: { reach_error(); } } return; }

int main(void) {
    int n = __VERIFIER_nondet_int();
    int m = __VERIFIER_nondet_int();
    int i, j;
    int c = 0;
    assume_abort_if_not(n >= 0 && n <= 100 && m >= 0 && m <= 100);
    for (i = 0; i < n; i++) {
        for (j = 0; j < m; j++) {
            c = c + 1;
        }
    }
    __VERIFIER_assert(c >= 0);
    return 0;
}
