"""The decision calculus of InvBench §3.2, rule by rule, including partial information."""

from __future__ import annotations

import itertools

import pytest

from veribatch.tasks.invbench.decision import decide
from veribatch.verifiers.result import Status

ALL = list(Status)


@pytest.mark.parametrize("d_a", [*ALL, None])
def test_dec_false_needs_only_d_b(d_a: Status | None) -> None:
    assert decide(d_a, Status.FALSE) == ("FALSE", "DEC-FALSE")


@pytest.mark.parametrize("d_b", [s for s in ALL if s != Status.FALSE])
def test_dec_prop_returns_d_b_as_t_or_u(d_b: Status) -> None:
    want = "TRUE" if d_b == Status.TRUE else "UNKNOWN"
    assert decide(Status.TRUE, d_b) == (want, "DEC-PROP")


@pytest.mark.parametrize(
    ("d_a", "d_b"),
    [(a, b) for a, b in itertools.product(ALL, ALL) if a != Status.TRUE and b != Status.FALSE],
)
def test_dec_u_otherwise(d_a: Status, d_b: Status) -> None:
    assert decide(d_a, d_b) == ("UNKNOWN", "DEC-U")


@pytest.mark.parametrize(
    ("d_a", "d_b"),
    [(None, None), (Status.TRUE, None), (Status.FALSE, None), (None, Status.TRUE), (None, Status.TIMEOUT)],
)
def test_undetermined_while_a_needed_query_runs(d_a: Status | None, d_b: Status | None) -> None:
    assert decide(d_a, d_b) is None


def test_error_is_never_a_verdict() -> None:
    # A crashed d_b after a proved invariant is inconclusive, not TRUE.
    assert decide(Status.TRUE, Status.ERROR) == ("UNKNOWN", "DEC-PROP")
    assert decide(Status.ERROR, Status.TRUE) == ("UNKNOWN", "DEC-U")
