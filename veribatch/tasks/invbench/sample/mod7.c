/* veribatch InvBench sample: the example of InvBench Figure 1: x stays 3 mod 7 (safe)
   Written for veribatch (Apache-2.0); SV-COMP style, property: reach_error() unreachable. */
extern void abort(void);
extern void __assert_fail(const char *, const char *, unsigned int, const char *);
void reach_error(void) { __assert_fail("0", "mod7.c", 5, "reach_error"); }
extern int __VERIFIER_nondet_int(void);
void assume_abort_if_not(int cond) { if (!cond) { abort(); } }
void __VERIFIER_assert(int cond) { if (!(cond)) { ERROR: { reach_error(); } } return; }

int main(void) {
    int x = 3;
    while (__VERIFIER_nondet_int()) {
        assume_abort_if_not(x < 1000000);
        x = x + 7;
    }
    __VERIFIER_assert(x != 145);
    return 0;
}
