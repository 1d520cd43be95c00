"""USR2 before the time limit as a requeue of the element's job, through submitit.

SLURM sends USR2 ``signal_delay_s`` before the time limit (sbatch ``--signal``, set by
submitit).  submitit's own handler checkpoints the callable — `ShardJob.checkpoint`, which
has nothing to save: every finished instance is already fsynced in the ledger — runs
``scontrol requeue`` (the same job id, so the next stage's dependency still holds) and
exits.  `shard_loop.requeue_on_signal` turns that into a shard that ends as *requeued*
(attempt.json), never as failed, and keeps the SIGTERM SLURM sends the old instance for
the requeue from reading as a cancel.  A requeue that submitit refuses (timed out too
often) or that ``scontrol`` rejects fails the shard, recorded in error.json.

Everything veribatch knows of submitit's job side is in this module.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import Any


def preempt_signal() -> int:
    """The signal submitit's handler requeues on: USR2 unless ``SUBMITIT_PREEMPT_SIGNAL``
    says otherwise.

    The one use of submitit's private API (``JobEnvironment._usr_sig``): it is how submitit
    itself reads that variable, so asking it keeps us on the signal its handler is bound
    to, whatever the environment says.  Present in every release that `pyproject.toml`
    allows (``submitit>=1.5,<1.6``); `tests/launch/test_slurm.py` runs a shard under
    submitit's own handlers, so a release that changes it fails there, not on a cluster."""
    from submitit.core.job_environment import JobEnvironment

    return int(JobEnvironment._usr_sig())


def run_requeueable(run: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    """`run(*args, **kw)` with the preemption signal as a requeue of this job.

    Outside a submitit job (no handler installed) there is no requeue to ask for, and
    `run` runs as is."""
    from ..shard_loop import ShardRequeued, requeue_on_signal  # pyarrow: in the job only

    usr = preempt_signal()
    submitit_handler = signal.getsignal(usr)
    if not callable(submitit_handler):
        return run(*args, **kw)
    try:
        with requeue_on_signal(usr, _as_request(submitit_handler)):
            return run(*args, **kw)
    except ShardRequeued:
        # What submitit's handler does after requeueing; BaseException, so no result
        # pickle is written and the job is not "finished" for submitit either.
        raise SystemExit(-1) from None


def _as_request(handler: Callable[[int, Any], Any]) -> Callable[[int, Any], bool]:
    """submitit's USR2 handler as a requeue request for `requeue_on_signal`.

    The handler checkpoints, runs `scontrol requeue` and then calls sys.exit(-1): that
    SystemExit is the only sign the job really is back in the queue.  It raises
    UncompletedJobError when it will not requeue (timed out too many times) and
    CalledProcessError when scontrol refused — genuine failures, left to propagate.
    Returning normally means it did nothing (not rank 0).
    """
    def request(signum: int, frame: Any) -> bool:
        try:
            handler(signum, frame)
        except SystemExit:
            return True
        return False

    return request


def resubmission(job: Callable[..., Any], *args: Any) -> Any:
    """What submitit pickles again for the requeued job: the same call."""
    import submitit

    return submitit.helpers.DelayedSubmission(job, *args)
