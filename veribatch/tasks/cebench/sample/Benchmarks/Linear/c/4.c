int main() {
  // variable declarations
  unsigned int k;
  unsigned int m;
  // pre-conditions
  (k = 0);
  (m = 20);
  // loop body
  while ((k < m)) {
    {
    (k  = (k + 4));
    }

  }
  // post-condition
  assert( (k == 20) );
}
