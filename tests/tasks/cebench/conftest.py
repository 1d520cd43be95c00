"""CE-Bench test fixtures: the shared LaM4Inv copy."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def lam4inv_root(shared_data: Path) -> Path:
    return shared_data / "lam4inv"
