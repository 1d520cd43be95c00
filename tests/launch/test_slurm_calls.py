"""`slurm_calls`: which SLURM errors are an outage worth waiting for, and the bounded wait.
(The real commands against a controller that does not answer: test_controller_outage.py.)"""

from __future__ import annotations

import pytest

from veribatch.launch.slurm_calls import SlurmUnreachable, unreachable, with_backoff

CONNECT = "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)"
TIMEOUT = "squeue: error: Socket timed out on send/recv operation"


def test_what_counts_as_an_outage():
    assert unreachable(CONNECT) and unreachable(CONNECT, read_only=False)
    # a timeout after sending may have submitted: retried for reads only
    assert unreachable(TIMEOUT) and not unreachable(TIMEOUT, read_only=False)
    assert not unreachable("slurm_load_jobs error: Invalid job id specified")
    assert not unreachable("sbatch: error: invalid partition specified: nope")


def test_backoff_until_the_controller_answers():
    answers = iter([(True, None, CONNECT)] * 3 + [(False, "queue", "")])
    slept: list[float] = []
    assert with_backoff(lambda: next(answers), "squeue", window_s=60, sleep=slept.append) == "queue"
    assert slept == [1.0, 2.0, 4.0]  # exponential


def test_bounded_then_a_clear_error():
    slept: list[float] = []
    with pytest.raises(SlurmUnreachable, match=r"did not answer `squeue`.*Unable to contact slurm controller"):
        with_backoff(lambda: (True, None, CONNECT), "`squeue`", window_s=0, sleep=slept.append)
    assert slept == []
