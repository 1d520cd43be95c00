"""Shared fixtures.  Benchmark data is read from ../shared/data (never copied in)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("VERIBATCH_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        # CI lays shared/ beside the clone: there, missing data is a broken setup, not a skip.
        if os.environ.get("CI"):
            pytest.fail(f"shared benchmark data not found at {SHARED_DATA} (CI=true)")
        pytest.skip(f"shared benchmark data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def invbench_easy(shared_data: Path) -> Path:
    return shared_data / "invbench" / "Dataset" / "Evaluation" / "Easy"



@pytest.fixture(scope="session")
def recorded_dafny(shared_data: Path):
    """`recorded_dafny(case, wording)` → the real stdout of Dafny in
    ../shared/data/recorded/dafny/<case>/ (wording "v4.10.0" or "head"; see its README)."""
    root = shared_data / "recorded" / "dafny"

    def read(case: str, wording: str) -> str:
        (expect,) = [p for p in (root / case).glob("*.dfy.expect")]
        path = expect.with_name(expect.name.replace(".expect", ".v4.10.0.expect")) \
            if wording == "v4.10.0" else expect
        return path.read_text()

    return read
