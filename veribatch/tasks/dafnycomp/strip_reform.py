"""Stripping as ReForm's own data scripts strip (`-o strip=reform`), beside §3.3's contract-only
stripping (`strip.py`, the default).

DafnyComp's authors build their model inputs with line-based scripts in their ReForm
repository (``LLaMA-Factory/dafny_process/src/build_sft_data_from_json.py`` with
``utils/process.py`` at commit 7c161f997f114cd8bc9acb1c9f7c3910177bf07f): comments removed,
``include`` lines removed, empty lines removed, then every line whose first word is one of
``requires ensures invariant assert modifies assume reads decreases`` — wherever it stands,
loop invariants and body asserts included — together with its continuation.  Those scripts
are not part of this repository; this module implements the same rules, so a run can show
what handing the model a program without its invariants and asserts does to the rates:

1. Comments: ``//`` to the end of the line (the newline kept) and ``/* */`` (nested), outside
   string literals, where — as in the scripts — both ``"`` and ``'`` open a literal that the
   same character closes unless the character before it is a backslash (so a primed name
   ``x'`` opens one: kept as the scripts do, it is their behaviour being reproduced).
2. Lines starting with ``include `` (after indentation) dropped, runs of newlines collapsed,
   the text stripped; then blank lines dropped.
3. A line whose first word (after indentation) is a keyword above is dropped with its
   continuation: if it holds ``{`` or the word ``by``, the following lines until its braces
   balance; else, if it holds ``(``, the following lines until its parentheses balance; else
   the following lines indented deeper (spaces only) than it.  Blank lines dropped again.

`strip_reform` returns the same `StripResult` as `strip_specs`: ``removed`` counts the
dropped lines per keyword (continuation lines go with their first line) and ``comment`` the
comments removed.
"""

from __future__ import annotations

import re
from collections import Counter

from veribatch.tasks.dafnycomp.strip import StripResult
from veribatch.tasks.dafnycomp.syntax import DafnySyntaxError, declarations

REFORM_STRIP_VERSION = "dafnycomp-strip-reform-v1"
REFORM_KEYWORDS = ("requires", "ensures", "invariant", "assert", "modifies", "assume", "reads", "decreases")
REFORM_COMMIT = "7c161f997f114cd8bc9acb1c9f7c3910177bf07f"
_SPEC_LINE = re.compile(r"^\s*(" + "|".join(REFORM_KEYWORDS) + r")\b")


def _without_comments(code: str) -> tuple[str, int]:
    out: list[str] = []
    quote: str | None = None
    depth = 0          # /* */ nesting
    line_comment = False
    n = 0
    i = 0
    while i < len(code):
        c, pair = code[i], code[i:i + 2]
        if line_comment:
            if c == "\n":
                line_comment = False
                out.append(c)
            i += 1
            continue
        if depth == 0 and quote is None and c in "\"'":
            quote = c
            out.append(c)
        elif quote is not None:
            if c == quote and code[i - 1] != "\\":
                quote = None
            out.append(c)
        elif pair == "//" and depth == 0:
            line_comment, n = True, n + 1
            i += 2
            continue
        elif pair == "/*":
            n += depth == 0
            depth += 1
            i += 2
            continue
        elif pair == "*/" and depth > 0:
            depth -= 1
            i += 2
            continue
        elif depth == 0:
            out.append(c)
        i += 1
    return "".join(out), n


def _drop_blank(code: str) -> str:
    return "\n".join(ln for ln in code.split("\n") if ln.strip())


def _drop_specs(code: str) -> tuple[str, Counter[str]]:
    lines = code.split("\n")
    keep: list[str] = []
    removed: Counter[str] = Counter()
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _SPEC_LINE.match(line)
        if not m:
            keep.append(line)
            i += 1
            continue
        removed[m.group(1)] += 1
        i += 1
        if "{" in line or re.search(r"\bby\b", line):
            balance = line.count("{") - line.count("}")
            while i < len(lines) and balance > 0:
                balance += lines[i].count("{") - lines[i].count("}")
                i += 1
        elif "(" in line:
            balance = line.count("(") - line.count(")")
            while i < len(lines) and balance > 0:
                balance += lines[i].count("(") - lines[i].count(")")
                i += 1
        else:
            indent = len(line) - len(line.lstrip(" "))
            while i < len(lines) and len(lines[i]) - len(lines[i].lstrip(" ")) > indent:
                i += 1
    return "\n".join(keep), removed


def strip_reform(program: str) -> StripResult:
    """The program as ReForm's scripts hand it to a model (see the module docstring)."""
    text, comments = _without_comments(program)
    text = "\n".join(ln for ln in text.split("\n") if not ln.strip().startswith("include "))
    text = _drop_blank(re.sub(r"\n{2,}", "\n", text.strip()))
    text, removed = _drop_specs(text)
    text = _drop_blank(text)
    if comments:
        removed["comment"] = comments
    try:
        decls = declarations(program)
    except DafnySyntaxError:
        decls = []
    return StripResult(text, len(decls), removed, Counter(d.kind for d in decls))
