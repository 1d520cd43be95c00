"""Which cached result may answer which query: the reuse rule, on real files."""

from __future__ import annotations

from pathlib import Path

from veribatch.verifiers.base import Query
from veribatch.verifiers.cache import ResultCache, answers, query_key
from veribatch.verifiers.result import Limits, Status, VerifierResult


def _result(status: Status, wall: float = 1.0, mem: float = 50.0) -> VerifierResult:
    return VerifierResult(status, wall, wall, mem, "exit", "t", "1")


def test_decided_verdict_answers_any_limits_it_fits_in() -> None:
    proof = _result(Status.TRUE, wall=4.0, mem=300)
    assert answers(Limits(600), proof, Limits(10))
    assert answers(Limits(10), proof, Limits(600))
    assert not answers(Limits(600), proof, Limits(3))  # took 4 s: a 3 s query would time out
    assert not answers(Limits(600), proof, Limits(600, memory_mb=256))


def test_undecided_answers_only_the_same_limits() -> None:
    timeout = VerifierResult(Status.TIMEOUT, 10.0, 10.0, 40, "walltime", "t", "1")
    assert answers(Limits(10), timeout, Limits(10))
    assert not answers(Limits(10), timeout, Limits(600))
    unknown = _result(Status.UNKNOWN)
    assert not answers(Limits(10), unknown, Limits(600))


def test_cache_roundtrip_and_rules(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path)
    cache.put("k" * 64, Limits(10), VerifierResult(Status.TIMEOUT, 10, 10, 1, "walltime", "t", "1"))
    assert cache.get("k" * 64, Limits(10)).status is Status.TIMEOUT
    assert cache.get("k" * 64, Limits(600)) is None
    cache.put("k" * 64, Limits(600), _result(Status.FALSE, wall=42.0))
    assert cache.get("k" * 64, Limits(600)).status is Status.FALSE
    assert cache.get("k" * 64, Limits(10)).status is Status.TIMEOUT  # exact limits first
    assert cache.get("k" * 64, Limits(100)).status is Status.FALSE


def test_errors_and_cancelled_runs_are_never_stored(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path)
    assert not cache.put("a" * 64, Limits(10), _result(Status.ERROR))
    cancelled = VerifierResult(Status.UNKNOWN, 1, 1, 1, "cancelled", "t", "1")
    assert not cache.put("a" * 64, Limits(10), cancelled)
    assert cache.get("a" * 64, Limits(10)) is None


def test_corrupt_entry_is_a_miss(tmp_path: Path) -> None:
    cache = ResultCache(tmp_path)
    cache.put("b" * 64, Limits(10), _result(Status.TRUE))
    (entry,) = (tmp_path / "bb" / ("b" * 64)).glob("*.json")
    entry.write_text("{not json")
    assert cache.get("b" * 64, Limits(10)) is None


def test_key_is_content_not_path(tmp_path: Path) -> None:
    a, b = tmp_path / "x" / "p.c", tmp_path / "y" / "p.c"
    for f in (a, b):
        f.parent.mkdir()
        f.write_text("int main(){}")
    key = lambda f, **kw: query_key("uautomizer", "0.3.1", "native", Query((f,), **kw))  # noqa: E731
    assert key(a) == key(b)
    b.write_text("int main(){return 0;}")
    assert key(a) != key(b)
    assert key(a) != key(a, options=("--x",))
    assert key(a) != key(a, data_model="LP64")
    assert query_key("uautomizer", "0.3.0", "native", Query((a,))) != key(a)
