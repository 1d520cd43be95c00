// veribatch sample program (written for this project, Apache-2.0): count the even numbers
// below n, then clamp the count into [1, 10].

method CountEven(n: int) returns (c: int)
  requires 0 <= n
  ensures 0 <= c <= n
{
  c := 0;
  var i := 0;
  while i < n
    invariant 0 <= i <= n
    invariant 0 <= c <= i
  {
    if i % 2 == 0 {
      c := c + 1;
    }
    i := i + 1;
  }
}

method Clamp(x: int, hi: int) returns (y: int)
  requires 0 <= x && 1 <= hi
  ensures 1 <= y <= hi
  ensures 1 <= x <= hi ==> y == x
{
  y := x;
  if y < 1 {
    y := 1;
  }
  if y > hi {
    y := hi;
  }
}

method main_2node(n: int) returns (r: int)
  requires 0 <= n <= 100
  ensures 1 <= r <= 10
{
  var c := CountEven(n);
  r := Clamp(c, 10);
}
