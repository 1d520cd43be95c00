// veribatch sample program (written for this project, Apache-2.0): |x|, tripled by
// repeated addition, capped at 500.

function Abs(x: int): int
  ensures Abs(x) >= 0
{
  if x < 0 then -x else x
}

lemma AbsNonNegative(x: int)
  ensures Abs(x) >= 0
{
}

method Triple(x: int) returns (y: int)
  requires x >= 0
  ensures y == 3 * x
{
  y := 0;
  var i := 0;
  while i < x
    invariant 0 <= i <= x
    invariant y == 3 * i
  {
    y := y + 3;
    i := i + 1;
  }
}

method Cap(x: int, limit: int) returns (y: int)
  requires x >= 0 && limit >= 0
  ensures 0 <= y <= limit
  ensures x <= limit ==> y == x
{
  if x > limit {
    y := limit;
  } else {
    y := x;
  }
}

method main_3node(x: int) returns (r: int)
  requires -1000 <= x <= 1000
  ensures 0 <= r <= 500
{
  AbsNonNegative(x);
  var a := Abs(x);
  var t := Triple(a);
  r := Cap(t, 500);
}
