"""The judge's limits say what happened in words a user can act on (issue 18), with real
g++, python3 and bubblewrap: fork bombs, threads, the compiler's file and log limits, a
caller's PATH without /usr/bin, temporary folders after SIGKILL, and `launch serve`'s
address check."""

from __future__ import annotations

import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import REPO
from veribatch.verifiers.judge import (
    CompileError,
    Program,
    Verdict,
    compile_cpp,
    run_program,
    run_sandboxed,
)
from veribatch.verifiers.judge.sandbox import MAX_PROCESSES, _drop_prefix, _probe_bwrap
from veribatch.verifiers.result import Limits


@pytest.fixture
def tmpdir_for_nobody() -> Iterator[Path]:
    """A $TMPDIR the sandbox user can traverse (pytest's tmp_path sits below a 0700 folder)."""
    d = Path(tempfile.mkdtemp(prefix="vb-test-tmpdir-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bin-cache")


def test_a_fork_bomb_is_refused_and_capped_where_forks_are_allowed(write, cache: Path,
                                                                   tmp_path: Path) -> None:
    py = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n" \
         "        time.sleep(0.001)\n"
    cpp = write("bomb.cpp", "#include <unistd.h>\nint main(){ for(;;) if (fork() < 0) return 3; }\n")
    # a judged program may not create processes at all (its language's allow-list)
    r = run_program(Program.of(cpp), "", time_s=2, cache_dir=cache)
    assert r.verdict is Verdict.RE and r.returncode == 3, r
    r = run_program(Program.of(write("fork1.py", "import os\nos.fork()\n")), "", time_s=2)
    assert r.verdict is Verdict.RE and "PermissionError" in r.stderr, r
    # the compiler's filter allows forks: the box's process cap holds them.  1 GB: under a
    # memory cgroup every forked interpreter's dirtied pages are charged (~5 MB each)
    ex = run_sandboxed(["/usr/bin/python3", "-I", "-S", "bomb.py"], {"bomb.py": py.encode()},
                       Limits(wall_s=5, cpu_s=2, memory_mb=1024), stdin_path=None,
                       stdout_path=tmp_path / "out", stderr_path=tmp_path / "err",
                       output_cap=1 << 16, syscalls=None)
    assert ex.peak_processes >= MAX_PROCESSES, (ex.termination_reason, ex.peak_processes)


def test_a_multithreaded_cpp_solution_runs(write, cache: Path) -> None:
    src = write("threads.cpp", """#include <thread>
#include <vector>
#include <cstdio>
int main(){ std::vector<std::thread> v; long s[8] = {0};
  for (int i = 0; i < 8; i++) v.emplace_back([&s, i]{ for (int k = 0; k < 1000; k++) s[i] += k; });
  for (auto& t : v) t.join();
  long t = 0; for (long x : s) t += x; std::printf("%ld\\n", t); }
""")
    r = run_program(Program.of(src), "", time_s=2, memory_mb=256, cache_dir=cache)
    assert r.verdict is Verdict.OK and r.output == f"{8 * 999 * 1000 // 2}\n", r


def test_deep_recursion_still_has_the_whole_memory_limit(write, cache: Path) -> None:
    src = write("deep.cpp", """#include <cstdio>
int rec(int n){ volatile char pad[512]; pad[0] = (char)n; return n ? rec(n - 1) + (pad[0] & 1) : 0; }
int main(){ std::printf("%d\\n", rec(200000)); }
""")  # ~100 MB of stack: more than any default stack limit, less than memory_mb
    r = run_program(Program.of(src), "", time_s=4, memory_mb=256, cache_dir=cache)
    assert r.verdict is Verdict.OK and r.output == "100000\n", r


def test_a_compiler_over_the_file_size_limit_is_named(cache: Path) -> None:
    big = "char blob[96 << 20] = {1};\nint main(){ return blob[5]; }\n"  # > 64 MB of assembly
    with pytest.raises(CompileError) as e:
        compile_cpp(big, cache)
    head = str(e.value).splitlines()[0]
    assert "file size limit" in head and "internal compiler error" not in head, head


def test_a_cut_compile_log_says_output_limit(cache: Path) -> None:
    src = "".join(f"void f{i}() {{ undeclared_function_number_{i}(1, 2, 3); }}\n"
                  for i in range(12000))  # ~2 MB of diagnostics, the log keeps 1 MB
    with pytest.raises(CompileError) as e:
        compile_cpp(src, cache)
    assert "(output limit" in str(e.value).splitlines()[0], str(e.value)[:300]


def test_a_path_without_usr_bin_does_not_look_like_a_namespace_failure(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    bwrap, why, _ = _probe_bwrap(_drop_prefix()[0], ())
    assert bwrap and why == "", why


def test_a_sigkilled_judge_leaves_no_folders(write, tmpdir_for_nobody: Path) -> None:
    tmp = tmpdir_for_nobody
    prog, inp = write("sleep.py", "import time\ntime.sleep(60)\n"), write("in.txt", "x\n")
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(REPO)}
    p = subprocess.Popen([sys.executable, "-m", "veribatch.verifiers.judge", "--program", str(prog),
                          "--input", str(inp), "--time", "30"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(tmp.glob("veribatch-scratch-*/veribatch-box-*")):
        time.sleep(0.05)
    assert list(tmp.glob("veribatch-scratch-*/veribatch-box-*")), "the judge never started a box"
    time.sleep(0.5)  # the program runs (a box that failed to start would end at once)
    assert p.poll() is None, "the judge ended by itself: the sleeper did not run"
    p.send_signal(signal.SIGKILL)
    p.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and list(tmp.iterdir()):
        time.sleep(0.1)
    assert list(tmp.iterdir()) == []


def test_a_dead_process_s_scratch_parent_is_swept(tmp_path: Path) -> None:
    """Where the janitor died too (a batch system's sweep), the next judge cleans up."""
    from veribatch.verifiers.judge import scratch

    dead = _dead_pid()
    stale = tmp_path / f"{scratch.PREFIX}{dead}-abc"
    (stale / "veribatch-box-x").mkdir(parents=True)
    alive = tmp_path / f"{scratch.PREFIX}{os.getpid()}-def"
    alive.mkdir()
    assert scratch.sweep(tmp_path) == [stale]
    assert not stale.exists() and alive.exists()


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_launch_verify_leaves_no_temp_folder(write, tmpdir_for_nobody: Path) -> None:
    tmp = tmpdir_for_nobody
    prog, inp = write("echo.py", "print(input())\n"), write("in.txt", "7\n")
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-m", "veribatch", "verify", "--tool", "judge", str(prog),
                        str(inp)], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and "TRUE" in p.stdout, p.stdout + p.stderr
    assert "log: not kept" in p.stdout
    deadline = time.monotonic() + 10  # a judge ended by its fork server: its janitor's second
    while time.monotonic() < deadline and list(tmp.iterdir()):
        time.sleep(0.1)
    assert [x.name for x in tmp.iterdir()] == []


@pytest.mark.parametrize("host", ["0", "0.0", "0.0.0.0", "", "0x0"])
def test_serve_refuses_every_spelling_of_every_interface(host: str) -> None:
    from veribatch.inference.serve_job import bind_address

    with pytest.raises(ValueError, match="refusing to bind every interface"):
        bind_address(host)
    assert bind_address(host, allow_any=True) == "0.0.0.0"


@pytest.mark.parametrize("host", ["::", "::0", "::1"])
def test_serve_says_ipv6_is_unsupported(host: str) -> None:
    from veribatch.inference.serve_job import bind_address

    with pytest.raises(ValueError, match="IPv6 is not supported"):
        bind_address(host)


def test_serve_accepts_a_real_address_and_resolves_names() -> None:
    from veribatch.inference.serve_job import ALLOW_ANY_ENV, HOST_ENV, ServeJob, bind_address

    assert bind_address("127.0.0.1") == "127.0.0.1"
    assert bind_address("localhost") == "127.0.0.1"
    with tempfile.TemporaryDirectory() as d:
        mp = pytest.MonkeyPatch()
        try:
            mp.setenv(HOST_ENV, "0.0.0.0")
            mp.delenv(ALLOW_ANY_ENV, raising=False)
            with pytest.raises(ValueError, match="every interface"):
                ServeJob(Path(d), "hf:/m", backend="http")
            mp.setenv(ALLOW_ANY_ENV, "1")
            assert ServeJob(Path(d), "hf:/m", backend="http").host == "0.0.0.0"
        finally:
            mp.undo()


@pytest.mark.skipif(platform.machine() != "x86_64", reason="system call numbers of x86_64")
def test_the_seccomp_filter_alone_refuses_keys_memfd_and_nested_user_namespaces(write) -> None:
    """Also where bwrap is older than 0.8 (RHEL 8/9 ship 0.4): no --disable-userns there."""
    import dataclasses

    from veribatch.verifiers.judge import detect_sandbox

    box = dataclasses.replace(detect_sandbox(), userns_disabled=False)
    assert box.kind == "bwrap" and box.seccomp
    prog = write("probe.py", """import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print("unshare", libc.unshare(0x10000000), ctypes.get_errno())
try:
    pid = os.fork()  # plain clone (no CLONE_NEWUSER): the compiler's filter allows it
    if pid == 0:
        os._exit(7)
    print("child", os.waitpid(pid, 0)[1] >> 8)
except OSError as e:
    print("fork", e.errno)
libc.syscall.restype = ctypes.c_long
print("keyctl", libc.syscall(ctypes.c_long(250), ctypes.c_long(0), ctypes.c_long(-3),
                             ctypes.c_long(0)), ctypes.get_errno())
try:
    os.memfd_create("m")
    print("memfd ok")
except OSError as e:
    print("memfd", e.errno)
""")
    r = run_program(Program.of(prog), "", time_s=5, sandbox=box)  # the allow-list
    assert r.verdict is Verdict.OK, r
    assert r.output.split("\n")[:4] == ["unshare -1 1", "fork 1", "keyctl -1 1", "memfd 1"], r.output
    out = Path(tempfile.mkdtemp(prefix="vb-seccomp-"))  # the compiler's deny-list
    try:
        ex = run_sandboxed(["/usr/bin/python3", "-I", "-S", "probe.py"],
                           {"probe.py": prog}, Limits(wall_s=20, cpu_s=5, memory_mb=256),
                           stdin_path=None, stdout_path=out / "o", stderr_path=out / "e",
                           output_cap=1 << 16, sandbox=box, syscalls=None)
        assert ex.read_output().split("\n")[:4] == ["unshare -1 1", "child 7", "keyctl -1 1",
                                                    "memfd 1"], ex.read_stderr()
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_a_box_has_its_own_small_share_of_the_uid_s_signal_quota(write) -> None:
    """RLIMIT_SIGPENDING (counted per user namespace, kernel >= 5.14): a box may queue 64
    signals, not the judge uid's whole quota; POSIX queues and locked memory: none."""
    from veribatch.verifiers.judge.sandbox import SIGNALS_PENDING

    prog = write("limits.py", "print(open('/proc/self/limits').read())\n")
    r = run_program(Program.of(prog), "", time_s=5)
    assert r.verdict is Verdict.OK, r
    rows = {" ".join(ln.split()[:3]): ln.split()[3:5] for ln in r.output.splitlines()}
    assert rows["Max pending signals"] == [str(SIGNALS_PENDING)] * 2, rows
    assert rows["Max msgqueue size"] == ["0", "0"] and rows["Max locked memory"] == ["0", "0"]
