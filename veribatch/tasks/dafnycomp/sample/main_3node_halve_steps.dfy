// veribatch sample program (written for this project, Apache-2.0): halve x, count the
// halvings down to zero, clamp the count below 100.

predicate Small(x: int)
{
  0 <= x < 100
}

method Halve(x: int) returns (y: int)
  requires x >= 0
  ensures 0 <= y <= x
  ensures x > 0 ==> y < x
{
  y := x / 2;
}

method StepsToZero(x: int) returns (steps: int)
  requires x >= 0
  ensures 0 <= steps <= x
{
  var v := x;
  steps := 0;
  while v > 0
    invariant 0 <= v <= x
    invariant 0 <= steps && steps + v <= x
    decreases v
  {
    v := Halve(v);
    steps := steps + 1;
  }
}

method ClampSmall(x: int) returns (y: int)
  requires x >= 0
  ensures Small(y)
{
  y := if x < 100 then x else 99;
}

method main_3node(x: int) returns (r: int)
  requires 0 <= x <= 10000
  ensures Small(r)
{
  var h := Halve(x);
  var s := StepsToZero(h);
  r := ClampSmall(s);
}
