"""The replay of dataset code runs in the judge's sandbox (issue 37): a program replayed to
confirm a FALSE cannot read the worker's environment through /proc, reach the network, or
write outside its box; the box is named on the replay; and a program's own
``__VERIFIER_nondet_*`` body is not what runs (the encoder reads each call as an input, the
replay does the same).  Each program here reaches `reach_error` exactly when its escape
works, so a confirmed replay would be the escape."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.z3c_programs import prog
from veribatch.verifiers import cfront
from veribatch.verifiers.judge import SandboxUnavailable, detect_sandbox
from veribatch.verifiers.result import Status
from veribatch.verifiers.z3c import api, replay

LIBC = """extern int open(const char *, int, ...); extern long read(int, void *, unsigned long);
extern long write(int, const void *, unsigned long); extern int close(int);
extern int getppid(void); extern int sprintf(char *, const char *, ...);
extern char *strstr(const char *, const char *); extern int socket(int, int, int);
struct sockaddr_in { unsigned short family; unsigned short port; unsigned int addr; char zero[8]; };
extern int connect(int, const void *, unsigned int);
"""
SECRET = "vb-replay-secret-4711"


@pytest.fixture(scope="module", autouse=True)
def box() -> None:
    try:
        detect_sandbox("auto")
    except SandboxUnavailable as e:
        pytest.skip(f"no sandbox on this node: {e}")


def _replayed(body: str, values: list[int]) -> replay.Replay:
    got = replay.replay(cfront.parse(prog(LIBC + body)), values, data_model="LP64")
    assert got.sandbox and "UNSAFE" not in got.sandbox, got
    return got


def test_environment_of_other_processes_is_not_readable() -> None:
    """/proc/<pid>/environ of a process of the worker's user holding a key in its environment
    (as the worker's own does), of the replay's parent, and of pid 1."""
    body = """int seen(int pid) { char path[64]; char buf[65536]; sprintf(path, "/proc/%d/environ", pid);
      int fd = open(path, 0); if (fd < 0) return 0; long n = read(fd, buf, sizeof buf - 1); close(fd);
      if (n <= 0) return 0; for (long i = 0; i < n; i++) if (!buf[i]) buf[i] = ' '; buf[n] = 0;
      return strstr(buf, "%s") != 0; }
    int main() { int pid = __VERIFIER_nondet_int();
      if (seen(pid) || seen(getppid()) || seen(1)) reach_error(); return 0; }""".replace("%s", SECRET)
    holder = subprocess.Popen(["sleep", "60"], env={"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": SECRET})
    try:
        got = _replayed(body, [holder.pid])
    finally:
        holder.kill()
        holder.wait()
    assert not got.confirmed and "without reaching reach_error" in got.detail, got


@pytest.fixture
def listener() -> Iterator[int]:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    try:
        yield srv.getsockname()[1]
    finally:
        srv.close()


def test_network_is_not_reachable(listener: int) -> None:
    body = """int main() { int port = __VERIFIER_nondet_int(); struct sockaddr_in a;
      a.family = 2; a.port = (unsigned short)(((port & 255) << 8) | ((port >> 8) & 255));
      a.addr = 0x0100007f; for (int i = 0; i < 8; i++) a.zero[i] = 0;
      int s = socket(2, 1, 0); if (s >= 0 && connect(s, &a, sizeof a) == 0) reach_error(); return 0; }"""
    got = _replayed(body, [listener])
    assert not got.confirmed, got


def test_nothing_is_written_outside_the_box(tmp_path: Path) -> None:
    """A host directory open to everyone (0777) and this checkout: neither can be written
    (reach_error iff one open succeeds); a file in /tmp lands in the box's private tmpfs,
    never on the host."""
    tmp_path.chmod(0o777)
    targets = [tmp_path / "escaped", Path.cwd() / f".vb-replay-escape-{os.getpid()}"]
    in_tmp = Path("/tmp") / f"vb-replay-escape-{os.getpid()}"
    body = """int tried(const char *p) { int fd = open(p, 01 | 0100, 0666);
      if (fd < 0) return 0; write(fd, "x", 1); close(fd); return 1; }
    int main() { int k = __VERIFIER_nondet_int(); tried("%c");
      if (tried("%a") || tried("%b")) reach_error(); return k; }""".replace(
        "%a", str(targets[0])).replace("%b", str(targets[1])).replace("%c", str(in_tmp))
    try:
        got = _replayed(body, [0])
        assert not got.confirmed and "without reaching reach_error" in got.detail, got
        assert not any(t.exists() for t in (*targets, in_tmp))
    finally:
        for t in (*targets, in_tmp):
            t.unlink(missing_ok=True)


def test_a_programs_own_nondet_body_is_not_replayed() -> None:
    """Its body would run (here: read the environment) where the encoder read an input."""
    text = prog("""extern int open(const char *, int, ...); extern int read(int, void *, unsigned int);
      int __VERIFIER_nondet_int(void) { char b[8]; int fd = open("/proc/self/environ", 0);
        read(fd, b, 8); return 42; }
      int main() { int x = __VERIFIER_nondet_int(); if (x == 5) reach_error(); return 0; }""")
    src = replay.program_source(cfront.parse(text), [5])
    assert "/proc/self/environ" not in src and "return 42" not in src
    res = api.verify(text, 20, in_process=True)
    assert res.status is Status.FALSE, res
    cex = res.extras["counterexample"]
    assert cex["inputs"] == [5] and cex["replay_sandbox"] == replay.replay(cfront.parse(text), [5]).sandbox


UNSAFE_PROGRAM = prog("""int main() { int a = __VERIFIER_nondet_int(); if (a == 3) reach_error(); return 0; }""")


def test_without_a_sandbox_nothing_is_replayed_and_no_false_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(mode: str = "auto") -> None:
        raise SandboxUnavailable("no sandbox for untrusted code on this node: test")
    monkeypatch.setattr(replay, "detect_sandbox", refuse)
    got = replay.replay(cfront.parse(UNSAFE_PROGRAM), [3])
    assert not got.confirmed and got.sandbox == "" and "not replayed" in got.detail, got
    res = api.verify(UNSAFE_PROGRAM, 10, in_process=True)
    assert res.status is not Status.FALSE and "not replayed" in (res.reason or ""), res


def test_the_unsafe_fallback_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(replay.SANDBOX_ENV, "unsafe")
    got = replay.replay(cfront.parse(UNSAFE_PROGRAM), [3])
    assert got.confirmed and "UNSAFE" in got.sandbox, got
