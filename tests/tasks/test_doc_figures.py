"""The figures the docs take from the code or the shipped data — sample sizes, defaults, limits,
token budgets — and the "Tables …" they say a command produces, read from the pages and
compared with what the code has.  A figure that drifts (a sample grows from 8 to 12
programs, a default changes) or a claimed table the code never builds fails here, naming
the page and the sentence.  Figures measured on some machine (times, decided counts) are not
checked: they are dated in the pages instead."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from veribatch.tasks.base import get_task
from veribatch.tasks.cebench.prompt import MAX_TOKENS as CEBENCH_MAX_TOKENS
from veribatch.tasks.dafnycomp.stages import MAX_TOKENS as DAFNYCOMP_MAX_TOKENS
from veribatch.tasks.invbench.stages import MAX_TOKENS as INVBENCH_MAX_TOKENS
from veribatch.tasks.refute.search import GIVE_UP_AFTER, STALL_AFTER
from veribatch.tasks.refute.stages import MAX_TOKENS as REFUTE_MAX_TOKENS

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "veribatch" / "tasks"


def _files(folder: Path, pattern: str) -> int:
    return len(list(folder.glob(pattern)))


def _verdicts(verdict: str) -> int:
    ref = json.loads((TASKS / "invbench" / "sample" / "reference.json").read_text())
    return sum(p["verdict"] == verdict for p in ref["programs"].values())


def _option(task: str, key: str) -> Any:
    return get_task(task).default_options()[key]


# (page, regex with one group per figure, what the figures must be)
FIGURES: list[tuple[str, str, Callable[[], tuple[Any, ...]]]] = [
    ("docs/invbench.md", r"`sample` \(default\): (\d+) SV-COMP-style programs",
     lambda: (_files(TASKS / "invbench" / "sample", "*.c"),)),
    ("docs/invbench.md", r"(\d+) safe, (\d+) unsafe", lambda: (_verdicts("TRUE"), _verdicts("FALSE"))),
    ("docs/invbench.md", r"the shipped sample \((\d+) programs\)",
     lambda: (_files(TASKS / "invbench" / "sample", "*.c"),)),
    ("docs/invbench.md", r"`max_tokens`\s+(\d+)", lambda: (INVBENCH_MAX_TOKENS,)),
    ("docs/invbench.md", r"## Options[^\n]*\n`budget_s` \((\d+);", lambda: (int(_option("invbench", "budget_s")),)),
    ("docs/cebench.md", r"`sample` \(default\): (\d+) Code2Inv-style programs and (\d+) logs",
     lambda: (_files(TASKS / "cebench" / "sample" / "Benchmarks" / "Linear" / "c", "*.c"),
              _files(TASKS / "cebench" / "sample" / "Result" / "GPT4TurboFull", "*.txt"))),
    ("docs/cebench.md", r"the shipped sample \((\d+) programs\)",
     lambda: (_files(TASKS / "cebench" / "sample" / "Benchmarks" / "Linear" / "c", "*.c"),)),
    ("docs/cebench.md", r"`max_tokens` (\d+) \(cot: (\d+)\)",
     lambda: (CEBENCH_MAX_TOKENS["zero-shot"], CEBENCH_MAX_TOKENS["cot"])),
    ("docs/cebench.md", r"\| labelling budget \| 100 s per instance \| (\d+) s wall",
     lambda: (int(_option("cebench", "budget_s")),)),
    ("docs/refute.md", r"\| `sample` \(default\) \| (\d+) problems",
     lambda: (len((TASKS / "refute" / "sample" / "train.jsonl").read_text().splitlines()),)),
    ("docs/refute.md", r"the shipped sample \((\d+) problems\)",
     lambda: (len((TASKS / "refute" / "sample" / "train.jsonl").read_text().splitlines()),)),
    ("docs/refute.md", r"but (\d+) draws in a row without a new", lambda: (STALL_AFTER,)),
    ("docs/refute.md", r"after (\d+) draws in a row with no new input", lambda: (STALL_AFTER,)),
    ("docs/refute.md", r"(\d+) consecutive generator or brute-force failures", lambda: (GIVE_UP_AFTER,)),
    ("docs/refute.md", r"chat models get (\d+) tokens", lambda: (REFUTE_MAX_TOKENS,)),
    ("docs/refute.md", r"`memory_mb` \((\d+)\) protects", lambda: (_option("refute", "memory_mb"),)),
    ("docs/dafnycomp.md", r"\| `sample` \(default\) \| (\d+) small multi-function programs",
     lambda: (_files(TASKS / "dafnycomp" / "sample", "*.dfy"),)),
    ("docs/dafnycomp.md", r"the shipped sample \((\d+) programs\)",
     lambda: (_files(TASKS / "dafnycomp" / "sample", "*.dfy"),)),
    ("docs/dafnycomp.md", r"`max_tokens` (\d+) \(`--max-tokens N`\)", lambda: (DAFNYCOMP_MAX_TOKENS,)),
    ("docs/dafnycomp.md", r"`obligation_time_limit_s` \((\d+),", lambda: (_option("dafnycomp", "obligation_time_limit_s"),)),
    ("docs/dafnycomp.md", r"`budget_s` \((\d+): wall limit", lambda: (int(_option("dafnycomp", "budget_s")),)),
    ("docs/dafnycomp.md", r"\| `--cores:(\d+)` per program", lambda: (_option("dafnycomp", "cores"),)),
]


@pytest.mark.parametrize(("page", "pattern", "expected"), FIGURES, ids=[f"{p}:{r[:40]}" for p, r, _ in FIGURES])
def test_doc_figure_matches_the_code(page: str, pattern: str, expected: Callable[[], tuple[Any, ...]]) -> None:
    text = (ROOT / page).read_text()
    found = list(re.finditer(pattern, text))
    assert found, f"{page}: no sentence matches {pattern!r} (reworded? then update this test)"
    want = tuple(str(v) for v in expected())
    for m in found:
        assert m.groups() == want, f"{page}: {m.group(0)!r} says {m.groups()}, the code has {want}"


def test_dafnycomp_doc_counts_the_shared_programs(shared_data: Path) -> None:
    n = len(list((shared_data / "dafnycomp").glob("main_*node_*/dafny_code.dfy")))
    text = (ROOT / "docs" / "dafnycomp.md").read_text()
    claims = re.findall(r"shared copy of (\d+) programs|on all (\d+) programs|all (\d+) shared programs"
                        r"|\| \d+ / (\d+) |/ (\d+) `", text)
    figures = {c for groups in claims for c in groups if c}
    assert len(claims) >= 10 and figures == {str(n)}, (figures, n)


# ---------------------------------------------------------------- "Tables …" claims

def _numbers(span: str) -> set[int]:
    """`2/3, 4 and 6/7` → {2, 3, 4, 6, 7}; `2–7` → 2..7."""
    out: set[int] = set()
    for a, b in re.findall(r"(\d+)\s*[–-]\s*(\d+)", span):
        out.update(range(int(a), int(b) + 1))
    out.update(int(n) for n in re.findall(r"\d+", re.sub(r"\d+\s*[–-]\s*\d+", "", span)))
    return out


def claimed(line: str) -> set[int]:
    return {n for m in re.finditer(r"\bTables? (\d+(?:\s*(?:[–/-]|,|and)\s*\d+)*)", line)
            for n in _numbers(m.group(1))}


def produced(task: str) -> set[int]:
    """Paper table numbers in the titles the task's tables module gives its tables (string parts
    of every `title=` argument, and the split → table names an f-string title reads)."""
    tree = ast.parse((TASKS / task / "tables.py").read_text())
    texts: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "title":
            texts += [c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SPLIT_TABLE" for t in node.targets):
            texts += [c.value for c in ast.walk(node.value) if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    return {int(n) for t in texts for n in re.findall(r"^Table (\d+)", t.strip())}


def _claims() -> list[tuple[str, str, str]]:
    """(task, where, line): README's benchmark rows and the command lines atop each page."""
    rows = []
    for line in (ROOT / "README.md").read_text().splitlines():
        if m := re.match(r"\| \*\*[^*]+\*\* \(`launch (\w+)", line):
            rows.append((m.group(1), "README.md", line))
    for task in ("invbench", "cebench", "refute", "dafnycomp"):
        text = (ROOT / "docs" / f"{task}.md").read_text()
        block = text.split("```", 2)[1]
        rows += [(task, f"docs/{task}.md", ln) for ln in block.splitlines() if "#" in ln]
    return rows


@pytest.mark.parametrize(("task", "where", "line"), _claims(), ids=lambda v: str(v)[:50])
def test_tables_claimed_are_tables_the_code_produces(task: str, where: str, line: str) -> None:
    extra = claimed(line) - produced(task)
    assert not extra, f"{where}: {line.strip()!r} claims Table(s) {sorted(extra)}; {task} produces {sorted(produced(task))}"


def test_the_claims_check_sees_a_table_the_code_lacks() -> None:
    """The parser reads ranges and lists, and the invented Table 5 is caught."""
    assert claimed("scored by speedup (Tables 2–7)") == {2, 3, 4, 5, 6, 7}
    assert claimed("# Tables 2/3 and 4/5") == {2, 3, 4, 5}
    assert claimed("(Tables 2/3, 4 and 6/7; Table 6 needs …)") == {2, 3, 4, 6, 7}
    assert produced("invbench") == {2, 3, 4, 6, 7} and 5 not in produced("invbench")
    assert produced("dafnycomp") == {1, 2}
