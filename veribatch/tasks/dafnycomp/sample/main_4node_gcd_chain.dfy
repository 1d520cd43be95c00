// veribatch sample program (written for this project, Apache-2.0): Euclid's gcd, at least
// one, the sum of the numbers below it, capped at 1000.

function Gcd(a: nat, b: nat): nat
  decreases b
{
  if b == 0 then a else Gcd(b, a % b)
}

method GcdLoop(a: nat, b: nat) returns (g: nat)
  ensures g == Gcd(a, b)
{
  var x, y := a, b;
  while y != 0
    invariant Gcd(x, y) == Gcd(a, b)
    decreases y
  {
    x, y := y, x % y;
  }
  g := x;
}

method AtLeastOne(x: int) returns (y: int)
  ensures y >= 1
  ensures x >= 1 ==> y == x
{
  y := if x < 1 then 1 else x;
}

method SumBelow(n: int) returns (s: int)
  requires n >= 1
  ensures s >= 0
{
  s := 0;
  var i := 0;
  while i < n
    invariant 0 <= i <= n
    invariant s >= 0
  {
    s := s + i;
    i := i + 1;
  }
}

method Cap(x: int, limit: int) returns (y: int)
  requires x >= 0 && limit >= 0
  ensures 0 <= y <= limit
{
  y := if x > limit then limit else x;
}

method main_4node(a: nat, b: nat) returns (r: int)
  ensures 0 <= r <= 1000
{
  var g := GcdLoop(a, b);
  var p := AtLeastOne(g);
  var s := SumBelow(p);
  r := Cap(s, 1000);
}
