int main() {
  // variable declarations
  int i;
  int j;
  // pre-conditions
  (i = 0);
  (j = 0);
  // loop body
  while ((i < 5)) {
    (i  = (i + 1));
  }
  while ((j < i)) {
    (j  = (j + 1));
  }
  // post-condition
  assert( (j == 5) );
}
