// veribatch sample program (written for this project, Apache-2.0): fill a fresh array with
// v, then add its elements up with a recursive function (frames: modifies, reads).

method Fill(a: array<int>, v: int)
  modifies a
  ensures forall k :: 0 <= k < a.Length ==> a[k] == v
{
  var i := 0;
  while i < a.Length
    invariant 0 <= i <= a.Length
    invariant forall k :: 0 <= k < i ==> a[k] == v
  {
    a[i] := v;
    i := i + 1;
  }
}

function SumFrom(a: array<int>, i: int): int
  requires 0 <= i <= a.Length
  requires forall k :: i <= k < a.Length ==> a[k] >= 0
  reads a
  ensures SumFrom(a, i) >= 0
  decreases a.Length - i
{
  if i == a.Length then 0 else a[i] + SumFrom(a, i + 1)
}

method main_2node(n: int, v: int) returns (total: int)
  requires 0 <= n <= 100 && 0 <= v <= 100
  ensures total >= 0
{
  var a := new int[n];
  Fill(a, v);
  total := SumFrom(a, 0);
}
