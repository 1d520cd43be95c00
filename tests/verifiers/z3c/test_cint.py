"""The integer semantics (division, remainder, conversions, shifts) against gcc itself."""

from __future__ import annotations

import itertools
import subprocess

import pytest
import z3

from veribatch.verifiers.z3c import cint

PAIRS = [(a, b) for a, b in itertools.product([-9, -7, -2, -1, 0, 1, 2, 7, 9, 2147483647],
                                               [-4, -3, -1, 1, 3, 4])]
VALUES = [-70000, -129, -128, -1, 0, 1, 127, 128, 255, 256, 300, 65535, 65536, 2147483647,
          4294967295, 4294967296, -2147483648]
TYPES = ["_Bool", "char", "unsigned char", "short", "unsigned short", "int", "unsigned int",
         "long long", "unsigned long long"]


def _val(e: z3.ExprRef) -> int:
    return z3.simplify(e).as_long()


@pytest.fixture(scope="module")
def gcc_results(tmp_path_factory) -> list[int]:
    """The same operations computed by a gcc-compiled program."""
    lines = ["#include <stdio.h>", "int main(void) {"]
    for a, b in PAIRS:
        lines.append(f'printf("%lld %lld\\n", (long long)({a}LL / {b}LL), (long long)({a}LL % {b}LL));')
    for v, t in itertools.product(VALUES, TYPES):
        lines.append(f'printf("%lld\\n", (long long)({t})({v}LL));')
    for v in (-9, -8, -1, 0, 1, 9):
        lines.append(f'printf("%d %d\\n", {v} >> 1, {v} & 3);')
    lines.append("return 0; }")
    d = tmp_path_factory.mktemp("cint")
    (d / "t.c").write_text("\n".join(lines))
    subprocess.run(["gcc", "-O0", "-w", str(d / "t.c"), "-o", str(d / "t")], check=True)
    out = subprocess.run([str(d / "t")], capture_output=True, text=True, check=True).stdout
    return [int(x) for x in out.split()]


def test_division_and_remainder_truncate_like_gcc(gcc_results):
    got = []
    for a, b in PAIRS:
        got += [_val(cint.c_div(z3.IntVal(a), z3.IntVal(b))),
                _val(cint.c_rem(z3.IntVal(a), z3.IntVal(b)))]
        # the same with the divisor as a variable (the non-constant encoding)
        x = z3.Int("x")
        q = z3.substitute(cint.c_div(z3.IntVal(a), x), (x, z3.IntVal(b)))
        assert _val(q) == got[-2]
        assert cint.c_div_py(a, b) == got[-2] and cint.c_rem_py(a, b) == got[-1]
    assert got == gcc_results[: 2 * len(PAIRS)]


def test_conversions_wrap_like_gcc(gcc_results):
    expected = gcc_results[2 * len(PAIRS): 2 * len(PAIRS) + len(VALUES) * len(TYPES)]
    wide = cint.CType("wide", 200, True, 9)
    got = []
    for v, t in itertools.product(VALUES, TYPES):
        dst = cint.type_named(t)
        got.append(_val(cint.convert(z3.IntVal(v), wide, dst)))
        assert cint.convert_py(v, dst) == got[-1]
    # printed through %lld: read unsigned long long results back modulo 2^64
    expected = [e % (1 << 64) if t == "unsigned long long" else e
                for e, (_, t) in zip(expected, itertools.product(VALUES, TYPES), strict=True)]
    assert got == expected


def test_shift_and_mask_like_gcc(gcc_results):
    expected = gcc_results[-12:]
    got = []
    for v in (-9, -8, -1, 0, 1, 9):
        got += [_val(z3.IntVal(v) / 2), _val(z3.IntVal(v) % 4)]  # the encoder's >> 1 and & 3
    assert got == expected


def test_usual_arithmetic_conversions():
    t = cint.type_named
    assert cint.common_type(t("int"), t("unsigned int"), "ILP32") == t("unsigned int")
    assert cint.common_type(t("long"), t("unsigned int"), "ILP32") == t("unsigned long")
    assert cint.common_type(t("long", "LP64"), t("unsigned int", "LP64"), "LP64") == t("long", "LP64")
    assert cint.common_type(t("long long"), t("unsigned int"), "ILP32") == t("long long")
    assert cint.common_type(t("unsigned short"), t("char"), "ILP32") == t("int")
    assert cint.from_specifiers(["unsigned", "long", "long", "int"], "ILP32") == t("unsigned long long")
    assert cint.from_specifiers(["float"], "ILP32") is None
