int main() {
  // variable declarations
  int a;
  int b;
  // pre-conditions
  (a = 1);
  (b = 1);
  // loop body
  while ((a < 30)) {
    {
    (a  = (a + b));
    (b  = (b + 1));
    }

  }
  // post-condition
  assert( (a >= b) );
}
