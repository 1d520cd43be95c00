// veribatch sample program (written for this project, Apache-2.0): the smallest chain.

method Inc(x: int) returns (y: int)
  ensures y == x + 1
{
  y := x + 1;
}

method main_2node(x: int) returns (r: int)
  ensures r == x + 2
{
  var a := Inc(x);
  r := Inc(a);
}
