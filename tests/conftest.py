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
