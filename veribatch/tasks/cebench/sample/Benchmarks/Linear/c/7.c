int main() {
  // variable declarations
  int t;
  // pre-conditions
  (t = 7);
  // loop body
  while ((t > 0)) {
    (t  = (t - 1));
  }
  // post-condition
  assert( (t == 0) );
}
