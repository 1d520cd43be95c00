"""One reading of an input: the validator (Python) and the solutions (C++) must see the same
numbers, or the validator has checked another instance than the one the solutions ran on.

REFUTE's validators parse with Python (``int(tok)``, ``str.split()``) and its solutions
with C++ stream extraction (``cin >> x``) or hand-written ``getchar`` readers.  They agree
on plain decimal text and disagree elsewhere: Python's ``int`` accepts ``0_5`` (5), Unicode
digits (``５``, ``٥``), surrounding Unicode whitespace, and ``str.split`` splits on
``\\x1c``–``\\x1f``, ``\\x85`` and the no-break space, where ``cin`` stops and leaves 0; a
leading ``+``, ``inf``/``nan``, ``.5`` or ``5.`` are read by one side and not by another
(``cin >> double`` refuses ``nan``; a ``getchar`` reader skips ``+`` as a non-digit).

So an input is judged only in the one form every reader agrees on: printable ASCII,
spaces and ``\\n`` only, and every token that Python would read as a number written as
``-?digits``, optionally ``.digits`` and an exponent.  Anything else is an
``invalid_input`` with the token named — a validator that accepts ``0_5`` has not shown
the input valid for a solution that reads 0.
"""

from __future__ import annotations

import re

_CANONICAL = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE]-?[0-9]+)?")
_ALLOWED = frozenset(range(0x20, 0x7F)) | {0x0A}
_NAMES = {0x09: "tab", 0x0B: "vertical tab", 0x0C: "form feed", 0x0D: "carriage return",
          0x00: "NUL"}


def two_readings(data: bytes) -> str | None:
    """Why C++ extraction and Python's ``int``/``float``/``split`` may read `data`
    differently (the first offending byte or token, with its line), or None."""
    for i, b in enumerate(data):
        if b not in _ALLOWED:
            line = data.count(b"\n", 0, i) + 1
            what = _NAMES.get(b, "a non-ASCII byte" if b >= 0x80 else "a control character")
            return (f"line {line}: {what} (0x{b:02x}) at byte {i}: only printable ASCII, "
                    "spaces and newlines are read alike by Python and C++")
    for n, line in enumerate(data.decode("ascii").split("\n"), 1):
        for tok in line.split(" "):
            if tok and _numeric_to_python(tok) and not _CANONICAL.fullmatch(tok):
                return (f"line {n}: token {tok[:40]!r} is a number to Python's int/float but "
                        "not in the plain form C++ extraction reads the same way "
                        "(-digits[.digits][e-digits]: no '+', '_', inf, nan, '.5', '5.')")
    return None


def _numeric_to_python(tok: str) -> bool:
    for parse in (int, float):
        try:
            parse(tok)
            return True
        except ValueError:
            continue
    return False


def float_reads(validator_source: str) -> list[int]:
    """Lines where a Python validator reads through ``float`` (a call, or ``float`` passed on
    as in ``map(float, ...)``): ``float`` takes ``1e5``, ``5.0`` and ``1e400`` (inf) for
    numbers a C++ solution reading an integer sees as 1, 5 and 1 — the validator would check
    another instance than the one the solutions run.  Empty for a validator that parses
    integers with ``int`` only; a source that does not parse is reported at line 0."""
    import ast

    try:
        tree = ast.parse(validator_source)
    except SyntaxError:
        return [0]
    return sorted({node.lineno for node in ast.walk(tree)
                   if isinstance(node, ast.Name) and node.id == "float"
                   and isinstance(node.ctx, ast.Load)})
