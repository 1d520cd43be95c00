"""The limit enforcer on real processes: every way a tool can misbehave ends in a recorded reason."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import psutil
import pytest

from veribatch.verifiers.result import Limits
from veribatch.verifiers.runner import LimitedProcess, execute


def _alive_with(marker: str) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter(["cmdline", "status"]):
        try:
            if p.info["status"] != psutil.STATUS_ZOMBIE and marker in " ".join(p.info["cmdline"] or []):
                found.append(p)
        except psutil.Error:
            continue
    return found


def _wait_gone(marker: str, timeout: float = 3.0) -> list[psutil.Process]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = _alive_with(marker)
        if not left:
            return []
        time.sleep(0.05)
    return _alive_with(marker)


def test_exit_code_and_combined_output(tmp_path: Path) -> None:
    ex = execute(["sh", "-c", "echo out; echo err >&2; exit 3"], Limits(10), tmp_path / "o.log")
    assert ex.termination_reason == "exit"
    assert ex.returncode == 3 and ex.signal is None
    assert ex.read_output().split() == ["out", "err"]
    assert ex.peak_mem_mb > 0


def test_wall_limit_kills_a_sleeper(tmp_path: Path) -> None:
    t = time.monotonic()
    ex = execute(["sleep", "30"], Limits(wall_s=0.5), tmp_path / "o.log")
    assert ex.termination_reason == "walltime"
    assert ex.signal is not None
    assert time.monotonic() - t < 3


def test_cpu_limit_counts_cpu_not_wall(tmp_path: Path) -> None:
    ex = execute(["python3", "-c", "while True: pass"], Limits(wall_s=20, cpu_s=0.7),
                 tmp_path / "o.log")
    assert ex.termination_reason == "cputime"
    assert 0.6 <= ex.cpu_s < 3 and ex.wall_s < 5


def test_infinite_cpu_limit_means_no_cpu_cap(tmp_path: Path) -> None:
    """A CPU cap only when asked for: no RLIMIT_CPU by default (or with inf), no cputime verdict."""
    capped = execute(["sh", "-c", "ulimit -t"], Limits(wall_s=10, cpu_s=5), tmp_path / "a.log")
    assert capped.read_output().strip() == "6"  # the CPU limit + 1 s backstop
    for name, limits in (("b", Limits(wall_s=10)), ("c", Limits(wall_s=10, cpu_s=float("inf")))):
        free = execute(["sh", "-c", "ulimit -t"], limits, tmp_path / f"{name}.log")
        assert free.termination_reason == "exit" and free.read_output().strip() == "unlimited"


def test_cpu_of_children_is_summed(tmp_path: Path) -> None:
    # Two busy children, each far below the limit alone, together above it.
    code = "import os\nfor _ in range(2):\n  if os.fork()==0:\n    while True: pass\nos.wait()"
    ex = execute(["python3", "-c", code], Limits(wall_s=20, cpu_s=1.0), tmp_path / "o.log")
    assert ex.termination_reason == "cputime"
    assert ex.wall_s < 5


def test_memory_limit_on_resident_memory(tmp_path: Path) -> None:
    code = "import time\nx=[]\nwhile True:\n  x.append(bytearray(20*2**20)); time.sleep(0.01)"
    ex = execute(["python3", "-c", code], Limits(wall_s=20, memory_mb=150), tmp_path / "o.log")
    assert ex.termination_reason == "memory"
    assert ex.peak_mem_mb >= 150


def test_output_flood_is_capped_not_buffered(tmp_path: Path) -> None:
    log = tmp_path / "o.log"
    ex = execute(["yes", "flood"], Limits(wall_s=1.0), log, output_cap=256 * 1024)
    assert ex.output_truncated
    assert ex.termination_reason == "walltime"
    size = log.stat().st_size
    assert 256 * 1024 <= size < 256 * 1024 + 200
    assert log.read_text().endswith("[veribatch: output truncated at 262144 bytes]\n")


def test_output_cap_can_end_the_run(tmp_path: Path) -> None:
    ex = execute(["yes"], Limits(wall_s=20), tmp_path / "o.log", output_cap=64 * 1024,
                 kill_on_output_cap=True)
    assert ex.termination_reason == "output"
    assert ex.wall_s < 5


def test_whole_tree_killed_on_limit(tmp_path: Path) -> None:
    marker = f"{300 + uuid.uuid4().int % 1000}.{os.getpid() % 1000}"
    script = f"sleep {marker} & sleep {marker} & (sleep {marker} &) ; wait"
    ex = execute(["sh", "-c", script], Limits(wall_s=0.8), tmp_path / "o.log")
    assert ex.termination_reason == "walltime"
    assert _wait_gone(f"sleep {marker}") == []


def test_background_children_of_a_finished_tool_are_killed(tmp_path: Path) -> None:
    # The child even leaves the process group (setsid); the poller saw it, so it dies too.
    marker = f"{400 + uuid.uuid4().int % 1000}.{os.getpid() % 1000}"
    script = f"setsid sleep {marker} & sleep {marker} & sleep 0.5; exit 0"
    ex = execute(["sh", "-c", script], Limits(wall_s=20), tmp_path / "o.log")
    assert ex.termination_reason == "exit" and ex.returncode == 0
    assert _wait_gone(f"sleep {marker}") == []


def test_kill_is_fast_and_marked_cancelled(tmp_path: Path) -> None:
    marker = f"{500 + uuid.uuid4().int % 1000}.{os.getpid() % 1000}"
    proc = LimitedProcess(["sh", "-c", f"sleep {marker} & sleep {marker}"], Limits(600),
                          tmp_path / "o.log").start()
    time.sleep(0.3)
    assert proc.poll() is None
    t = time.monotonic()
    ex = proc.kill()
    assert time.monotonic() - t < 1.0
    assert ex.termination_reason == "cancelled"
    assert proc.wait(0) is ex and proc.kill() is ex  # idempotent
    assert _wait_gone(f"sleep {marker}") == []


def test_crash_signal_is_reported(tmp_path: Path) -> None:
    ex = execute(["sh", "-c", "kill -SEGV $$"], Limits(10), tmp_path / "o.log")
    assert ex.termination_reason == "signal" and ex.signal == 11


def test_missing_executable_is_an_error_not_an_exception(tmp_path: Path) -> None:
    ex = execute(["/nonexistent/tool"], Limits(10), tmp_path / "o.log")
    assert ex.termination_reason == "error"
    assert "/nonexistent/tool" in (ex.error or "")


def test_separate_stderr_and_stdin(tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("3 4\n")
    ex = execute(["python3", "-c", "import sys; a,b=map(int,input().split()); print(a*b); "
                  "print('note', file=sys.stderr)"], Limits(10), tmp_path / "out",
                 stdin_path=tmp_path / "in.txt", stderr_path=tmp_path / "err")
    assert ex.read_output() == "12\n" and ex.read_stderr() == "note\n"


@pytest.mark.parametrize("n", [6])
def test_many_parallel_processes_each_get_their_own_result(tmp_path: Path, n: int) -> None:
    procs = [LimitedProcess(["sh", "-c", f"sleep 0.{i}; echo {i}; exit {i}"], Limits(10),
                            tmp_path / f"{i}.log").start() for i in range(n)]
    results = [p.wait(10) for p in procs]
    assert [r.returncode for r in results if r] == list(range(n))
    assert [r.read_output().strip() for r in results if r] == [str(i) for i in range(n)]


@pytest.mark.parametrize("ending", ["exit", "sigkill"])
def test_tools_do_not_outlive_their_worker(tmp_path: Path, ending: str) -> None:
    """A worker that exits (atexit) or is SIGKILLed (parent-death signal) takes its tools along."""
    import subprocess
    import sys

    marker = f"{600 + uuid.uuid4().int % 1000}.{os.getpid() % 1000}"
    end = "os.kill(os.getpid(), signal.SIGKILL)" if ending == "sigkill" else "sys.exit(0)"
    worker = (
        "import os, signal, sys, time\n"
        "from pathlib import Path\n"
        "from veribatch.verifiers.result import Limits\n"
        "from veribatch.verifiers.runner import LimitedProcess\n"
        f"LimitedProcess(['sleep', '{marker}'], Limits(600), Path({str(tmp_path / 'o.log')!r})).start()\n"
        "time.sleep(0.5)\n"
        f"{end}\n"
    )
    subprocess.run([sys.executable, "-c", worker], timeout=30)
    assert _wait_gone(f"sleep {marker}") == []


def test_descendants_with_odd_process_names_are_found(tmp_path: Path) -> None:
    # /proc/PID/stat quotes the command name in parentheses; names may contain both.
    odd = tmp_path / "sl eep) (x"
    odd.symlink_to("/bin/sleep")
    marker = f"{700 + uuid.uuid4().int % 1000}.{os.getpid() % 1000}"
    proc = LimitedProcess(["sh", "-c", f"setsid '{odd}' {marker} & wait"], Limits(600),
                          tmp_path / "o.log").start()
    deadline = time.monotonic() + 3
    while not _alive_with(marker) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.1)  # let the monitor see it (it left the process group)
    assert proc.kill().termination_reason == "cancelled"
    assert _wait_gone(marker) == []
