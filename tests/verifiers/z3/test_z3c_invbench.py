"""Soundness on real programs with known verdicts (UAutomizer's, from InvBench's timing files).

Zero wrong verdicts: every TRUE/FALSE the embedded verifier decides must match.
Budgets are short here; `bench/verifier.py` runs the whole easy split at 60 s.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from veribatch.verifiers.result import Status
from veribatch.verifiers.z3c import api

# Quickly decided programs of the easy split (both verdicts) and some outside the subset.
EASY_SAMPLE = [
    "sqrt1-ll_valuebound50_4.c", "sum04-2_1.c", "cohencu-ll_unwindbound5_1.c",
    "benchmark24_conjunctive_1.c", "benchmark46_disjunctive_1.c", "hard2_valuebound10_1.c",
    "functions_1-1_1.c", "cohendiv-ll_unwindbound10_5.c", "bh2017-ex-add_2.c",
    "trex01-1_1.c", "ps5-ll_unwindbound1_3.c", "lcm1_unwindbound2_5.c",
    "cohencu-ll_unwindbound2_8.c",
    "brs2f_1.c", "sll-01-1_8.c", "freire2_valuebound10_6.c",
]


def _expected(path: Path) -> dict[str, str]:
    return {row["file"]: row["result"] for row in json.loads(path.read_text())}


def _run(folder: Path, names: list[str], expected: dict[str, str], timeout: float):
    got = {}
    for name in names:
        res = api.verify((folder / name).read_text(), timeout, in_process=True, filename=name)
        got[name] = res
    wrong = {n: (str(r.status), expected[n]) for n, r in got.items()
             if r.status.decided and str(r.status) != expected[n]}
    return got, wrong


def test_easy_sample_zero_wrong_and_decides_the_known_ones(shared_data: Path, invbench_easy: Path):
    expected = _expected(shared_data / "invbench" / "Dataset" / "Evaluation" / "timing_easy.json")
    got, wrong = _run(invbench_easy, EASY_SAMPLE, expected, timeout=10)
    assert wrong == {}
    decided = {n for n, r in got.items() if r.status.decided}
    assert {"trex01-1_1.c", "ps5-ll_unwindbound1_3.c", "sum04-2_1.c"} <= decided
    assert len(decided) >= 11, {n: (r.status, r.reason) for n, r in got.items()}
    for n in ("brs2f_1.c", "sll-01-1_8.c", "freire2_valuebound10_6.c"):
        assert got[n].status is Status.UNKNOWN and "unsupported" in got[n].reason
    # a TRUE from Spacer carries re-checked invariants in C
    assert got["benchmark24_conjunctive_1.c"].extras["invariants"]


@pytest.mark.slow
def test_whole_easy_split_short_budget_zero_wrong(shared_data: Path, invbench_easy: Path):
    expected = _expected(shared_data / "invbench" / "Dataset" / "Evaluation" / "timing_easy.json")
    names = sorted(p.name for p in invbench_easy.glob("*.c"))
    got, wrong = _run(invbench_easy, names, expected, timeout=1.0)
    assert wrong == {}
    assert sum(r.status.decided for r in got.values()) >= 30


def test_training_sample_zero_wrong(shared_data: Path):
    root = shared_data / "invbench" / "Dataset" / "Training"
    expected = _expected(root / "timing.json")
    names = sorted(expected)[::240]  # 15 programs spread over the set
    got, wrong = _run(root / "Programs", names, expected, timeout=4)
    assert wrong == {}
    assert sum(r.status.decided for r in got.values()) >= len(names) // 2, {
        n: (str(r.status), r.reason) for n, r in got.items()
    }
