extern void abort(void);
extern void __assert_fail(const char *, const char *, unsigned int, const char *) __attribute__ ((__nothrow__ , __leaf__)) __attribute__ ((__noreturn__));
void reach_error() { __assert_fail("0", "count_up.c", 3, "reach_error"); }
extern int __VERIFIER_nondet_int(void);
void __VERIFIER_assert(int cond) {
  if (!(cond)) {
    ERROR: {reach_error(); abort();}
  }
  return;
}
int main() {
  int n = __VERIFIER_nondet_int();
  if (n < 0 || n > 1000) return 0;
  int x = 0;
  int y = 0;
  while (x < n) {
    x = x + 1;
    y = y + 2;
  }
  __VERIFIER_assert(y == 2 * n);
  return 0;
}
