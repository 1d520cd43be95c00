int main() {
  // variable declarations
  int c;
  int d;
  // pre-conditions
  (c = 0);
  (d = 3);
  // loop body
  while (unknown()) {
    {
      if ( unknown() ) {
        if ( (c < 3) )
        {
        (c  = (c + 1));
        (d  = (d - 1));
        }
      } else {
        (c  = 0);
        (d  = 3);
      }

    }

  }
  // post-condition
  assert( ((c + d) == 3) );
}
