"""Reading LaM4Inv's benchmark programs and execution logs (its repository's own layout).

Layout (github.com/SoftWiser-group/LaM4Inv, and `tasks/cebench/sample/`)::

    Benchmarks/Linear/c/<N>.c           the program (Code2Inv style, see `program`)
    Result/GPT4TurboFull/<N>.txt        LaM4Inv's log of the run with GPT-4-Turbo

A log is a sequence of lines; the ones CE-Bench reads::

    Begin_process:   Benchmarks/Linear/c/1.c
    GPT Answer: ['assert(x >= y);', 'assert(y >= 0);', ...]     (a Python list literal)
    Candidate: assert(x >= y);                                   (one LaM4Inv checked)
    The answer is :  assert((x >= y) && (y >= 0));               (the verified invariant)
    Time cost is :  19.77
    The proposal times is :  2

Each ``GPT Answer`` repeats the earlier answers and appends the new ones (LaM4Inv feeds
them back), so the *raw candidates* (§3.1.1) are the distinct items of those lists and of
the ``Candidate`` lines, in order of first appearance, each with the log line that first
gave it.  LaM4Inv's own combined candidate (``CombineCandidate``), its BMC-filtered set
(``AnsSet``) and its counterexamples (``i(...)``, ``p{...}``, ``n{...}``) are not used: the
paper re-checks the raw candidates with its own solver, and so do we.

Anything the parser cannot read becomes a `Skip` naming the file and line — a counted,
named loss in the dataset card, never an exception.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROGRAMS_DIR = "Benchmarks/Linear/c"
LOGS_DIR = "Result/GPT4TurboFull"

_ASSERT = re.compile(r"^\s*assert\s*\((?P<e>.*)\)\s*;?\s*$", re.DOTALL)
_KEYS = {
    "begin": re.compile(r"^Begin_process:\s*(?P<v>.*?)\s*$"),
    "answers": re.compile(r"^GPT Answer:\s*(?P<v>.*?)\s*$"),
    "candidate": re.compile(r"^Candidate:\s*(?P<v>.*?)\s*$"),
    "final": re.compile(r"^The answer is\s*:\s*(?P<v>.*?)\s*$"),
    "time": re.compile(r"^Time cost is\s*:\s*(?P<v>.*?)\s*$"),
    "proposals": re.compile(r"^The proposal times is\s*:\s*(?P<v>.*?)\s*$"),
}


@dataclass(frozen=True)
class Skip:
    """Something the loader could not use, and where: counted in the card, never a crash."""

    file: str
    line: int | None
    reason: str
    kind: str = "log_unparsable"  # a short class for the card's counts (see the card's skips)

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "kind": self.kind, "reason": self.reason}


@dataclass(frozen=True)
class Candidate:
    expr: str      # the C expression inside assert(...)
    line: int      # the log line that first gave it


@dataclass
class Log:
    file: str
    program: str | None = None          # the Begin_process path
    candidates: list[Candidate] = field(default_factory=list)
    final_invariant: str | None = None  # None: LaM4Inv found no invariant
    final_line: int | None = None
    time_s: float | None = None
    proposals: int | None = None
    skips: list[Skip] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file, "program": self.program,
            "candidates": [{"expr": c.expr, "line": c.line} for c in self.candidates],
            "final_invariant": self.final_invariant, "final_line": self.final_line,
            "time_s": self.time_s, "proposals": self.proposals,
            "skips": [s.to_json() for s in self.skips],
        }


def unwrap_assert(text: str) -> str | None:
    """``assert(e);`` → ``e``; None when `text` is not one assert statement."""
    m = _ASSERT.match(text)
    if not m or not m.group("e").strip():
        return None
    inner = m.group("e").strip()
    depth = 0
    for ch in inner:  # `assert(a) && (b)` is not one assert
        depth += (ch == "(") - (ch == ")")
        if depth < 0:
            return None
    return inner if depth == 0 else None


def parse_log(text: str, file: str) -> Log:
    log = Log(file=file)
    seen: set[str] = set()

    def add(raw: str, lineno: int) -> None:
        expr = unwrap_assert(raw)
        if expr is None:
            log.skips.append(Skip(file, lineno, f"candidate is not one assert(...) statement: {raw[:120]!r}",
                                  "candidate_not_assert"))
            return
        if expr not in seen:
            seen.add(expr)
            log.candidates.append(Candidate(expr, lineno))

    for lineno, line in enumerate(text.splitlines(), start=1):
        for key, rx in _KEYS.items():
            m = rx.match(line)
            if not m:
                continue
            value = m.group("v")
            if key == "begin":
                log.program = value
            elif key == "answers":
                try:
                    items = ast.literal_eval(value)
                except (ValueError, SyntaxError, MemoryError, RecursionError) as e:
                    log.skips.append(Skip(file, lineno, f"GPT Answer is not a Python list literal ({type(e).__name__})",
                                         "log_unparsable"))
                    break
                if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
                    log.skips.append(Skip(file, lineno, "GPT Answer is not a list of strings", "log_unparsable"))
                    break
                for raw in items:
                    add(raw, lineno)
            elif key == "candidate":
                add(value, lineno)
            elif key == "final":
                expr = unwrap_assert(value)
                if expr is None:
                    log.skips.append(Skip(file, lineno, f"final invariant is not one assert(...): {value[:120]!r}",
                                          "log_unparsable"))
                else:
                    log.final_invariant, log.final_line = expr, lineno
            elif key == "time":
                log.time_s = _number(value, float)
            elif key == "proposals":
                log.proposals = _number(value, int)
            break
    if log.program is None:
        log.skips.append(Skip(file, None, "no Begin_process line: not a LaM4Inv log", "log_unparsable"))
    return log


def _number(text: str, kind: type) -> Any:
    try:
        return kind(text)
    except ValueError:
        return None


def program_files(root: Path) -> list[Path]:
    """The programs of a LaM4Inv tree, in their numeric order (``test.c`` and other names last)."""
    folder = root / PROGRAMS_DIR
    return sorted(folder.glob("*.c"), key=lambda p: (not p.stem.isdigit(), int(p.stem) if p.stem.isdigit() else 0, p.name))


def log_for(root: Path, program: Path) -> Path:
    return root / LOGS_DIR / f"{program.stem}.txt"


def is_lam4inv_root(path: Path) -> bool:
    return (path / PROGRAMS_DIR).is_dir() and (path / LOGS_DIR).is_dir()
