"""Model answers for the per-task fuzz tests (issue 37): what a model could write, including
what made a parser stall or a checker recurse before — long runs of punctuation after a
verdict word, thousands of fences or ``<think>`` tags, deep conjunctions and parentheses,
casts with expressions in their types — mixed with the task's own well-formed pieces.

`Timed` runs one answer through a task's real path and keeps the counts and the longest
time any answer took, so a test can assert the bound and print the figures."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# Small example counts and no per-example deadline (a loaded 2-core CI box): each test
# asserts its own, wider bound on the slowest answer and reports it.
FUZZ_SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                         suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

_RUNS = ("-", " ", "*", "`", "~", "(", ")", "=", ":", "\t", "#", "<", ">", "&&", "!", "_")


def _repeated(piece: str, n: int) -> str:
    return piece * n


def pathological(words: Sequence[str]) -> st.SearchStrategy[str]:
    """One line built to make a backtracking parser work: a key word, then a long run of one
    or two characters, then maybe a word again."""
    run = st.builds(_repeated, st.sampled_from(_RUNS) | st.sampled_from(_RUNS).map(lambda s: s + " "),
                    st.integers(1, 40_000))
    return st.builds(lambda a, r, b: a + r + b, st.sampled_from(["", *words]), run,
                     st.sampled_from(["", "x", "`", *words]))


def conjunction(atoms: Sequence[str]) -> st.SearchStrategy[str]:
    """A chain of conjuncts (up to 400), or an atom under up to 400 parentheses."""
    chain = st.builds(lambda a, n: " && ".join([a] * n), st.sampled_from(atoms), st.integers(1, 400))
    nested = st.builds(lambda a, n: "(" * n + a + ")" * n, st.sampled_from(atoms), st.integers(1, 400))
    return chain | nested


def answers(lines: st.SearchStrategy[str], *, max_lines: int = 12) -> st.SearchStrategy[str]:
    """A whole answer: lines drawn from `lines`, plus random text, joined by newlines; or a
    block of many repeated short lines (fences, tags)."""
    line = lines | st.text(max_size=80)
    many = st.builds(_repeated, st.sampled_from(["```\n", "~~~\nx\n", "<think>", "</think>\n",
                                                 "```c\nx\n```\n", "<thoughts>", "answer:\n"]),
                     st.integers(1, 8_000))
    return st.lists(line | many, min_size=1, max_size=max_lines).map("\n".join)


@dataclass
class Timed:
    """Counts and the slowest time of answers run through one task's path."""

    task: str
    bound_s: float
    count: int = 0
    slowest_s: float = 0.0
    slowest_chars: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)

    def run(self, text: str, path: Callable[[str], str]) -> str:
        """`path` maps an answer to the status its record would carry; it must not raise."""
        start = time.perf_counter()
        status = path(text)
        took = time.perf_counter() - start
        self.count += 1
        self.outcomes[status] = self.outcomes.get(status, 0) + 1
        if took > self.slowest_s:
            self.slowest_s, self.slowest_chars = took, len(text)
        assert took <= self.bound_s, f"{self.task}: an answer of {len(text)} chars took {took:.2f} s ({status})"
        assert isinstance(status, str) and status
        return status

    def report(self) -> str:
        return (f"{self.task}: {self.count} answers, slowest {self.slowest_s:.3f} s "
                f"({self.slowest_chars} chars), outcomes {dict(sorted(self.outcomes.items()))}")


def report(timed: Timed, capsys: Any) -> None:
    """Print the figures past pytest's capture (the issue asks for them)."""
    with capsys.disabled():
        print("\n" + timed.report())
