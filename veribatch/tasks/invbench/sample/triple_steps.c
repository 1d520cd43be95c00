/* veribatch InvBench sample: x grows three times as fast as y (safe)
   Written for veribatch (Apache-2.0); SV-COMP style, property: reach_error() unreachable. */
extern void abort(void);
extern void __assert_fail(const char *, const char *, unsigned int, const char *);
void reach_error(void) { __assert_fail("0", "triple_steps.c", 5, "reach_error"); }
extern int __VERIFIER_nondet_int(void);
void assume_abort_if_not(int cond) { if (!cond) { abort(); } }
void __VERIFIER_assert(int cond) { if (!(cond)) { ERROR: { reach_error(); } } return; }

int main(void) {
    int x = 0;
    int y = 0;
    while (__VERIFIER_nondet_int()) {
        assume_abort_if_not(y < 100000);
        x = x + 3;
        y = y + 1;
    }
    __VERIFIER_assert(x == 3 * y);
    return 0;
}
