/* veribatch InvBench sample: a for loop splitting even and odd steps (safe)
   Written for veribatch (Apache-2.0); SV-COMP style, property: reach_error() unreachable. */
extern void abort(void);
extern void __assert_fail(const char *, const char *, unsigned int, const char *);
void reach_error(void) { __assert_fail("0", "parity_split.c", 5, "reach_error"); }
extern int __VERIFIER_nondet_int(void);
void assume_abort_if_not(int cond) { if (!cond) { abort(); } }
void __VERIFIER_assert(int cond) { if (!(cond)) { ERROR: { reach_error(); } } return; }

int main(void) {
    int i;
    int e = 0;
    int o = 0;
    for (i = 0; i < 100; i++) {
        if (i % 2 == 0) {
            e = e + 1;
        } else {
            o = o + 1;
        }
    }
    __VERIFIER_assert(e + o == 100);
    return 0;
}
