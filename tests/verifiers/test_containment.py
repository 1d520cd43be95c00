"""No tool process outlives a worker that dies: counted on the real process table.

Every process a worker starts inherits its environment, so a marker variable set
for the worker finds each one of them in ``/proc/*/environ`` — whatever it calls
itself, whichever session or process group it moved to, and whoever its parent is
now.  Each test runs a real worker (a fresh Python), lets a tool tree grow
(a daemonising shell tree standing in for UAutomizer's JVM; the embedded z3 verifier
with its portfolio members running), SIGKILLs the worker (or the fork server, or a
reaper), and counts what is left.  As root here, the queries also get a cgroup; run
as the unprivileged user nobody they rely on the subreaper alone — both must leave
nothing.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MARK = "VB_CONTAINMENT_MARK"

# The stand-in for a JVM under a wrapper: a child that starts its own session and
# double-forks a grandchild, whose parent then exits (the grandchild is orphaned).
DAEMONS = "setsid sh -c 'sleep 300 & sleep 300' & (sleep 300 &) ; sleep 300"

WORKER = r"""
import json, os, signal, sys, time
from pathlib import Path
from veribatch.verifiers.base import Query
from veribatch.verifiers.registry import get_verifier
from veribatch.verifiers.result import Limits
from veribatch.verifiers.runner import LimitedProcess

kind, work, victim = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
if kind == "daemons":
    proc = LimitedProcess(["sh", "-c", sys.argv[4]], Limits(600), work / "out.log").start()
else:
    query = get_verifier("z3").start(Query((work / "hard.c",)), Limits(600), work / "logs")
    proc = query._process


def tree(pid):
    out = []
    try:
        kids = open(f"/proc/{pid}/task/{pid}/children").read().split()
    except OSError:
        return out
    for k in map(int, kids):
        out += [k, *tree(k)]
    return out


def marked_sleeps():
    mark = b"VB_CONTAINMENT_MARK=" + os.environ["VB_CONTAINMENT_MARK"].encode()
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                env = open(f"/proc/{name}/environ", "rb").read().split(b"\0")
                cmd = open(f"/proc/{name}/cmdline", "rb").read()
            except OSError:
                continue
            if mark in env and cmd.startswith(b"sleep"):
                out.append(int(name))
    return out


def ready():
    # the same test whichever way the tool was started (fork server or, with
    # VERIBATCH_FORKSERVER=0, directly): the sleeps wherever they went; the z3c
    # query's own children (its portfolio members)
    if proc._root < 0:
        return []
    if kind == "daemons":
        sleeps = marked_sleeps()
        return sleeps if len(sleeps) >= 4 else []
    return tree(proc._root)


deadline = time.monotonic() + 60
while not ready() and time.monotonic() < deadline:
    time.sleep(0.05)
time.sleep(0.3)
print(json.dumps({"before": len(ready())}), flush=True)
if victim == "worker":
    os.kill(os.getpid(), signal.SIGKILL)
from veribatch.verifiers import forkserver
server = forkserver.get()
if victim == "server":
    os.kill(server.proc.pid, signal.SIGKILL)
else:  # the query's reaper
    os.kill(proc._tree, signal.SIGKILL)
ex = proc.wait(30)
print(json.dumps({"reason": ex.termination_reason, "containment": ex.containment}), flush=True)
time.sleep(3)
"""


def _state(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        return stat[stat.rindex(b")") + 2:][:1]
    except OSError:
        return b"?"


def marked(marker: str, exclude: tuple[int, ...] = ()) -> list[int]:
    """Live (non-zombie) processes carrying the marker in their environment."""
    want = f"{MARK}={marker}".encode()
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in exclude:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if want in env and _state(int(name)) not in (b"Z", b"?"):
            out.append(int(name))
    return out


def wait_none(marker: str, timeout: float = 15.0, exclude: tuple[int, ...] = ()) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = marked(marker, exclude)
        if not left:
            return []
        time.sleep(0.1)
    return marked(marker, exclude)


def describe(pids: list[int]) -> list[str]:
    out = []
    for p in pids:
        with contextlib.suppress(OSError):
            out.append(f"{p}: " + Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ")
                       .decode(errors="replace")[:120])
    return out


@pytest.fixture
def workdir(hard_c: str) -> Iterator[Path]:
    """A work dir the unprivileged user can use too (pytest's tmp_path is private to root)."""
    d = Path(tempfile.mkdtemp(prefix="vb-containment-"))
    d.chmod(0o777)
    (d / "hard.c").write_text(hard_c)
    (d / "hard.c").chmod(0o644)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _as_nobody() -> list[str]:
    setpriv = shutil.which("setpriv")
    if os.geteuid() != 0 or setpriv is None:
        pytest.skip("needs root and setpriv to run the worker as the unprivileged user nobody")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--"]


@functools.cache
def _nobody_python() -> tuple[str, str]:
    """(interpreter, PYTHONPATH) with which nobody can run veribatch *and start children*.

    A venv whose interpreter lives in a root-only directory (pyenv under /root) cannot be
    exec-ed by nobody's processes; the system Python of the same minor version with the
    venv's site-packages on the path can.
    """
    site = next((p for p in sys.path if p.endswith("site-packages") and sys.prefix in p), "")
    candidates = [(sys.executable, str(REPO))]
    system = shutil.which("python3", path="/usr/bin:/bin")
    if system and site:
        candidates.append((system, f"{REPO}:{site}"))
    probe = ("import sys, z3, psutil, pycparser; "
             f"assert sys.version_info[:2] == {tuple(sys.version_info[:2])!r}")
    for exe, path in candidates:
        # through /usr/bin/env: a child of a nobody process must be able to exec it
        ok = subprocess.run([*_as_nobody(), "/usr/bin/env", exe, "-c", probe],
                            env={**os.environ, "PYTHONPATH": path}, capture_output=True,
                            cwd="/").returncode == 0
        if ok:
            return exe, path
    pytest.skip("no Python interpreter that the user nobody can execute")


def run_worker(kind: str, victim: str, workdir: Path, *, user: str = "root",
               cgroup: bool = True) -> tuple[list[dict], str]:
    marker = uuid.uuid4().hex
    env = {**os.environ, MARK: marker, "PYTHONPATH": str(REPO)}
    if not cgroup:
        env["VERIBATCH_CGROUP"] = "off"
    prefix, python = [], sys.executable
    if user == "nobody":
        prefix = _as_nobody()
        python, env["PYTHONPATH"] = _nobody_python()
    argv = [*prefix, python, "-c", WORKER, kind, str(workdir), victim, DAEMONS]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env,
                          cwd=workdir)
    lines = [json.loads(ln) for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, proc.stdout + proc.stderr
    return lines, marker


@pytest.mark.parametrize("user", ["root", "nobody"])
@pytest.mark.parametrize("kind", ["daemons", "z3"])
def test_sigkilled_worker_leaves_no_process(workdir: Path, kind: str, user: str) -> None:
    lines, marker = run_worker(kind, "worker", workdir, user=user)
    # The tool's tree was really there (4 sleeps; the z3c query's portfolio member).
    assert lines[0]["before"] >= (4 if kind == "daemons" else 1), lines
    left = wait_none(marker)
    assert left == [], describe(left)


def test_without_cgroups_the_subreaper_alone_suffices(workdir: Path) -> None:
    lines, marker = run_worker("daemons", "worker", workdir, cgroup=False)
    assert lines[0]["before"] >= 4
    left = wait_none(marker)
    assert left == [], describe(left)


@pytest.mark.parametrize("victim", ["server", "reaper"])
def test_sigkilled_fork_server_or_reaper_takes_the_tools_along(workdir: Path, victim: str) -> None:
    """The worker lives on; the query ends killed, never as a normal exit; its tree is gone.

    A dead server's reapers still report (their tool died of SIGKILL: "signal"); a dead
    reaper reports nothing (no exit status: "error")."""
    lines, marker = run_worker("daemons", victim, workdir)
    assert lines[0]["before"] >= 4
    assert lines[1]["reason"] == ("signal" if victim == "server" else "error"), lines
    # Everything but the worker itself (and a new fork server it may have started) is gone
    # while the worker still runs; then the worker exits and nothing at all is left.
    left = wait_none(marker)
    assert left == [], describe(left)


def test_containment_is_reported(tmp_path: Path) -> None:
    from veribatch.verifiers.result import Limits
    from veribatch.verifiers.runner import execute

    ex = execute(["sh", "-c", "cat /proc/self/cgroup"], Limits(10), tmp_path / "o.log")
    assert ex.termination_reason == "exit"
    if ex.containment == "cgroup2+subreaper":  # the tool ran in a cgroup of its own
        assert "/veribatch-" in ex.read_output()
    else:
        assert ex.containment == "subreaper"
    assert ex.enforcement.endswith(("memory by polling", "memory by cgroup"))


def test_local_executor_shard_killed_leaves_no_process(hard_c: str, tmp_path: Path) -> None:
    """A real `launch invbench` run: SIGKILL the shard's worker while z3 is deciding."""
    data = tmp_path / "data" / "Dataset" / "Evaluation"
    (data / "Easy").mkdir(parents=True)
    (data / "Easy" / "cubes.c").write_text(hard_c)
    (data / "timing.json").write_text(json.dumps([{"file": "cubes.c", "result": "TRUE", "time": 5}]))
    marker = uuid.uuid4().hex
    env = {**os.environ, MARK: marker, "PYTHONPATH": str(REPO)}
    run = subprocess.Popen(
        [sys.executable, "-m", "veribatch", "invbench", "--dataset", f"easy:{tmp_path / 'data'}",
         "-o", "budget_s=300", "--runs-dir", str(tmp_path / "runs"), "-q"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        worker = None
        deadline = time.monotonic() + 120
        while worker is None and time.monotonic() < deadline:
            if list((tmp_path / "runs").glob("*/shards/baseline/0/scratch/baseline/*/z3-*/output.log")):
                for pid in marked(marker):
                    if b"veribatch.launch.worker" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                        worker = pid
            time.sleep(0.2)
        assert worker is not None, "the shard never got a z3 query running"
        time.sleep(1.5)  # the portfolio's members are running now
        os.kill(worker, signal.SIGKILL)
        out, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode != 0, out  # the shard failed: recorded, not lost
    left = wait_none(marker)
    assert left == [], describe(left)


@pytest.mark.slurm
def test_slurm_shards_killed_or_cancelled_leave_no_process(slurm_cluster: dict[str, str], hard_c: str,
                                                           tmp_path: Path) -> None:
    """proctrack/linuxproc only follows parent links: a SIGKILLed shard process (shard 0) and
    a scancelled array element (shard 1) must still leave nothing of their z3 queries."""
    data = tmp_path / "data" / "Dataset" / "Evaluation"
    (data / "Easy").mkdir(parents=True)
    for name in ("a.c", "b.c"):
        (data / "Easy" / name).write_text(hard_c)
    (data / "timing.json").write_text(json.dumps(
        [{"file": n, "result": "TRUE", "time": 5} for n in ("a.c", "b.c")]))
    marker = uuid.uuid4().hex
    env = {**os.environ, **slurm_cluster, MARK: marker, "PYTHONPATH": str(REPO)}
    runs = tmp_path / "runs"
    r = subprocess.run(
        [sys.executable, "-m", "veribatch", "invbench", "--dataset", f"easy:{tmp_path / 'data'}",
         "--executor", "slurm", "--profile", "local-test", "--shards", "2", "-o", "budget_s=300",
         "--runs-dir", str(runs), "-q"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    rd = next(p for p in runs.iterdir() if (p / "manifest.json").exists())
    subs = json.loads((rd / "jobs.json").read_text())["submissions"]
    jobs = {s["stage"]: s["jobs"] for s in subs}
    try:
        for shard, how in ((0, "kill -9"), (1, "scancel")):
            scratch = rd / "shards" / "baseline" / str(shard) / "scratch" / "baseline"
            deadline = time.monotonic() + 300  # queue time on a shared cluster included
            while not list(scratch.glob("*/z3-*/output.log")) and time.monotonic() < deadline:
                time.sleep(0.5)
            assert list(scratch.glob("*/z3-*/output.log")), f"shard {shard}: no z3 query ran"
            time.sleep(1.5)  # the portfolio's members are running now
            before = marked(marker)
            assert len(before) >= 4, describe(before)
            if how == "kill -9":
                attempt = json.loads((rd / "shards" / "baseline" / "0" / "attempt.json").read_text())
                os.kill(int(attempt["pid"]), signal.SIGKILL)
            else:
                subprocess.run(["scancel", jobs["baseline"][str(shard)]], env=env, check=True,
                               timeout=30)
        # What is still in a job's process tree SLURM kills itself when the rest of the run
        # is cancelled; what left the tree (re-parented to init) it cannot find: that is
        # what would be counted here.
        subprocess.run(["scancel", *{j.split("_")[0] for s in jobs.values() for j in s.values()}],
                       env=env, timeout=30)
        left = wait_none(marker, timeout=60)
        assert left == [], describe(left)
    finally:
        subprocess.run(["scancel", *{j.split("_")[0] for s in jobs.values() for j in s.values()}],
                       env=env, timeout=30)


@pytest.mark.slurm
@pytest.mark.parametrize("kind", ["daemons", "z3"])
def test_slurm_worker_sigkilled_in_a_job_step_leaves_no_process(slurm_cluster: dict[str, str], workdir: Path,
                                                                kind: str) -> None:
    """The same worker as above, as a SLURM job step (``srun``, as submitit runs shards)."""
    marker = uuid.uuid4().hex
    env = {**os.environ, **slurm_cluster, MARK: marker, "PYTHONPATH": str(REPO)}
    (workdir / "worker.py").write_text(WORKER)
    out = workdir / "job.out"
    cmd = shlex.join(["srun", sys.executable, str(workdir / "worker.py"), kind, str(workdir),
                      "worker", DAEMONS])
    sub = subprocess.run(["sbatch", "--parsable", "--partition=cpu", "--time=5", "--mem=1G",
                          f"--output={out}", "--wrap", cmd], env=env, capture_output=True,
                         text=True, timeout=60)
    assert sub.returncode == 0, sub.stderr
    job = sub.stdout.strip().split(";")[0]
    try:
        deadline = time.monotonic() + 300  # queue time on a shared cluster included
        while time.monotonic() < deadline and '"before"' not in (out.read_text() if out.exists() else ""):
            time.sleep(0.5)
        text = out.read_text() if out.exists() else ""
        before = [json.loads(ln) for ln in text.splitlines() if ln.startswith('{"before"')]
        assert before and before[0]["before"] >= (4 if kind == "daemons" else 1), text
        left = wait_none(marker, timeout=30)
        assert left == [], describe(left)
    finally:
        subprocess.run(["scancel", job], env=env, timeout=30)
