function Sum(n: nat): nat
{
  if n == 0 then 0 else n + Sum(n - 1)
}

method Double(x: int) returns (r: int)
  requires x >= 0
  ensures r == 2 * x
{
  r := x + x;
}

method SumTo(n: nat) returns (s: nat)
  ensures s == Sum(n)
{
  s := 0;
  var i := 0;
  while i < n
    invariant 0 <= i <= n
    invariant s == Sum(i)
  {
    i := i + 1;
    s := s + i;
  }
}

method Chain(n: nat) returns (r: int)
  ensures r == 2 * Sum(n)
{
  var s := SumTo(n);
  r := Double(s);
}
