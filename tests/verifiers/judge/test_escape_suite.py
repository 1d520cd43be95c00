"""Issue 18's four escapes (and the leftovers), tried as the unprivileged user nobody and as
root through the project's own entry points: nothing may get through.

The attacks and the held/escaped rule of each class are in `escape_suite.py`;
`bench/escapes.py` prints the same suite's tried/held/escaped figures.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.support import REPO
from tests.support.escape_suite import CLASSES, run_suite, summarize

pytestmark = pytest.mark.slow  # ~15 s per user: 22 attacks, fills of a few hundred MB


@pytest.fixture(scope="module", params=["nobody", "root"])
def suite(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    if os.geteuid() != 0:
        pytest.skip("needs root to become nobody and to own the attack files (CI runs as root)")
    return request.param, run_suite(request.param, REPO)


def _by(results: list[dict[str, Any]], cls: str) -> list[dict[str, Any]]:
    return [r for r in results if r["class"] == cls]


@pytest.mark.parametrize("cls", CLASSES)
def test_every_attack_of_the_class_ran_and_held(suite: tuple[str, list[dict]], cls: str) -> None:
    who, results = suite
    mine = _by(results, cls)
    assert mine, f"no attack of class {cls} ran as {who}"
    assert [r for r in mine if r.get("error")] == [], "an attack could not be run"
    assert [r for r in mine if r["escaped"]] == [], f"escaped as {who}"
    assert summarize(results)[cls]["held"] == len(mine)


def test_the_box_sees_no_session_key(suite: tuple[str, list[dict]]) -> None:
    _, results = suite
    for r in _by(results, "keyring")[:2]:
        assert "search failed" in r["detail"] and "read KEY-" not in r["detail"], r


def test_memory_tricks_are_refused_or_counted(suite: tuple[str, list[dict]]) -> None:
    who, results = suite
    mem = {r["name"]: r for r in _by(results, "memory")}
    assert "held 0 MB" in mem["memfd_create"]["detail"]           # refused by seccomp
    assert "unshare refused" in mem["tmpfs in nested userns"]["detail"]
    assert "held 0 MB" in mem["files in /"]["detail"]             # read-only root
    mechanism = mem["anonymous memory"]["memory_limit_by"]
    if who == "root" and Path("/sys/fs/cgroup/memory/memory.limit_in_bytes").exists():
        assert mechanism.startswith("cgroup v1 memory.limit_in_bytes"), mechanism
    if who == "nobody":  # no memory cgroup of its own: polled, files included, and it says so
        assert mechanism.startswith("polling") and "plus the files in its tmpfs" in mechanism
        assert "not counted" in mechanism, mechanism
    # files in every tmpfs plus anonymous memory: over the limit together, so MLE
    assert mem["every tmpfs + anonymous memory"]["detail"].startswith("MLE"), mem


def test_serve_refusals_name_the_problem(suite: tuple[str, list[dict]]) -> None:
    _, results = suite
    serve = {r["name"]: r["detail"] for r in _by(results, "serve")}
    assert "every interface" in serve["bind --host 0"]
    assert "every interface" in serve["bind VERIBATCH_SERVE_HOST=0.0.0.0"]
    assert "IPv6 is not supported" in serve["bind --host ::0"]
    assert serve["/health names the model path"].endswith('{"status": "ok"}')
