int main() {
  // variable declarations
  int i;
  int s;
  // pre-conditions
  (i = 0);
  (s = 0);
  // loop body
  while ((i < 10)) {
    {
    (s  = (s + i));
    (i  = (i + 1));
    }

  }
  // post-condition
  assert( (s >= 0) );
}
