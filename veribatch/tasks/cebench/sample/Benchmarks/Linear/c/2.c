int main() {
  // variable declarations
  int n;
  int x;
  int y;
  // pre-conditions
  assume((n >= 0));
  assume((n <= 50));
  (x = 0);
  (y = 0);
  // loop body
  while ((x < n)) {
    {
    (x  = (x + 1));
    (y  = (y + 2));
    }

  }
  // post-condition
  assert( (y == (2 * n)) );
}
