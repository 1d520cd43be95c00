/* veribatch InvBench sample: a loop condition with a side effect and a continue (safe)
   Written for veribatch (Apache-2.0); SV-COMP style, property: reach_error() unreachable. */
extern void abort(void);
extern void __assert_fail(const char *, const char *, unsigned int, const char *);
void reach_error(void) { __assert_fail("0", "counter_cond.c", 5, "reach_error"); }
extern int __VERIFIER_nondet_int(void);
void assume_abort_if_not(int cond) { if (!cond) { abort(); } }
void __VERIFIER_assert(int cond) { if (!(cond)) { ERROR: { reach_error(); } } return; }

int counter = 0;
int main(void) {
    int x = 0;
    while (counter++ < 20) {
        if (counter % 2 == 1) {
            continue;
        }
        x = x + 2;
    }
    __VERIFIER_assert(x <= 20);
    return 0;
}
