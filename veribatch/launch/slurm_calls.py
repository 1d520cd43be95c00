"""SLURM's client commands, riding out a controller that is down for a while.

slurmctld is restarted for upgrades, fails over, or is simply down for a minute; SLURM
keeps its state and the jobs on the nodes keep running.  Its clients meanwhile fail
after ~9 s each with "Unable to contact slurm controller (connect failure)".  Read as an
empty queue, such an answer would make `launch status` call running shards failed and
`launch resume` submit them a second time; read as a refused submission, it would stop
a `launch` half-way for no reason of its own.

So a command that fails *because the controller is unreachable* is retried with
exponential backoff for a bounded time (`VERIBATCH_SLURM_RETRY_S`, default 120 s), and
then `SlurmUnreachable` is raised: the CLI exits 3 (cluster unreachable) with a message
naming the command and SLURM's own words, having written nothing.  Any other failure
(an unknown job id, a refused option) is returned at once, as before.

Only a *connect failure* is retried for sbatch: with it, nothing reached the controller,
so nothing was submitted.  A timeout after the request was sent may have submitted the
job; retrying it could submit it twice, so that one fails the submission instead (the
jobs already accepted are in jobs.json; `launch resume` submits the rest).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

RETRY_ENV = "VERIBATCH_SLURM_RETRY_S"
DEFAULT_RETRY_S = 120.0
CONNECT_FAILURE = ("Unable to contact slurm controller", "connect failure")
"""SLURM's words when no connection to slurmctld could be made: nothing was sent."""
BUSY = ("Socket timed out on send/recv", "Slurm backup controller in standby mode",
        "Transport endpoint is not connected")
"""The controller answered too late or not as itself: safe to retry for a read only."""
_BACKOFF_MAX_S = 15.0


class SubmitError(RuntimeError):
    """sbatch refused a job, or SLURM is not reachable."""


class SlurmUnreachable(SubmitError):
    """slurmctld did not answer within the retry window: nothing was decided or written."""


def retry_window_s() -> float:
    try:
        return max(0.0, float(os.environ.get(RETRY_ENV, DEFAULT_RETRY_S)))
    except ValueError:
        return DEFAULT_RETRY_S


def unreachable(text: str, *, read_only: bool = True) -> bool:
    """Whether SLURM's error text says the controller could not be reached (and, for a
    read, answered too late)."""
    words = CONNECT_FAILURE + (BUSY if read_only else ())
    return any(w.lower() in text.lower() for w in words)


def with_backoff(attempt: Callable[[], tuple[bool, T, str]], what: str,
                 window_s: float | None = None,
                 sleep: Callable[[float], None] = time.sleep) -> T:
    """Call `attempt` until it says it is not an outage (``(False, value, _)``) or the
    window has passed; each outage answer is ``(True, _, SLURM's error text)``."""
    window = retry_window_s() if window_s is None else window_s
    start = time.monotonic()
    delay = 1.0
    tries = 0
    while True:
        tries += 1
        outage, value, text = attempt()
        if not outage:
            return value
        waited = time.monotonic() - start
        if waited + delay > window:
            raise SlurmUnreachable(
                f"SLURM's controller did not answer {what} for {waited:.0f} s ({tries} tries, "
                f"{RETRY_ENV}={window:g}): {text.strip().splitlines()[-1] if text.strip() else '?'}; "
                "nothing was changed — run the command again once slurmctld is back "
                "(`scontrol ping`)")
        sleep(delay)
        delay = min(delay * 2, _BACKOFF_MAX_S)


def run_slurm(cmd: list[str], timeout: float = 30) -> subprocess.CompletedProcess[str] | None:
    """A read-only SLURM command's result, retried while the controller is unreachable
    (then `SlurmUnreachable`); None when the command is not installed or hangs."""
    if shutil.which(cmd[0]) is None:
        return None

    def attempt() -> tuple[bool, subprocess.CompletedProcess[str] | None, str]:
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return True, None, f"{cmd[0]} did not return within {timeout:g} s"
        except (OSError, subprocess.SubprocessError):
            return False, None, ""
        return (out.returncode != 0 and unreachable(out.stderr + out.stdout)), out, out.stderr

    return with_backoff(attempt, f"`{' '.join(cmd[:3])}`")
