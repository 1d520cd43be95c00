"""The escape suite's third round (issue 40): the judge as a normal cluster user.

Classes (each attack judged held or escaped by `drive_round3`):

hidden     memory no poll sees, ``memory_mb=256``: shared anonymous memory dropped from the
           resident set with ``MADV_DONTNEED`` in 8 processes; huge pages pinned in pipe
           slots with ``vmsplice``.  Escaped when judged OK while holding more than the limit
stderr     verdicts read from stderr: a wrong solution whose stdout is right but whose
           stderr says ``MemoryError``, or floods past the output cap; escaped when REFUTE
           counts it a success (it is not a counterexample)
shared     one uid's kernel quotas shared by every box: epoll watches, queued real-time
           signals beyond the box's share, a resized stdout pipe, and (as root) two runs
           under one host uid; escaped when the box gets them
load       a wrong solution stopped by the wall clock with its CPU limit unused (a correct
           program on a loaded node looks the same): escaped when counted a success
small      the box init's eventfd kind (``eventfd``), host load/memory/pressure figures,
           the host path behind stdin, stdin's host file writable
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

MEMORY_MB = 256
CLASSES3 = ("hidden", "stderr", "shared", "load", "small")

_TAIL = 'print("held", held >> 20)\nprint("done")\n'

SHARED_ANON = """import ctypes, mmap, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                      ctypes.c_int, ctypes.c_long]
def hold(mb):
    # shared anonymous pages, written, then dropped from this process's resident set:
    # they stay in the shared object, counted by no RSS
    got = 0
    while got < mb:
        a = libc.mmap(None, 8 << 20, 3, 0x01 | 0x20, -1, 0)   # MAP_SHARED | MAP_ANONYMOUS
        if a in (None, ctypes.c_void_p(-1).value):
            break
        ctypes.memset(a, 1, 8 << 20)
        libc.madvise(ctypes.c_void_p(a), ctypes.c_size_t(8 << 20), 4)   # MADV_DONTNEED
        got += 8
    return got
kids, held = [], 0
r, w = None, None
try:
    r, w = os.pipe()
except OSError as e:
    print("pipe refused", e.errno)
for i in range(8):
    try:
        pid = os.fork()
    except OSError as e:
        print("fork refused", e.errno)
        break
    if pid == 0:
        n = hold(200)
        os.write(w, b"%d\\n" % n)
        import time; time.sleep(3)
        os._exit(0)
    kids.append(pid)
if kids:
    for _ in kids:
        line = b""
        while not line.endswith(b"\\n"):
            line += os.read(r, 1)
        held += int(line) << 20
    for k in kids:
        os.waitpid(k, 0)
else:
    held = hold(1600) << 20
""" + _TAIL

VMSPLICE = """import ctypes, mmap, os
libc = ctypes.CDLL(None, use_errno=True)
class Iov(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
held = 0
pipes = []
HUGE = 2 << 20
try:
    for p in range(64):
        try:
            r, w = os.pipe()
        except OSError as e:
            print("pipe refused", e.errno); break
        pipes.append((r, w))
        os.set_blocking(w, False)
        m = mmap.mmap(-1, 17 * HUGE)
        base = ctypes.addressof(ctypes.c_char.from_buffer(m))
        start = (base + HUGE - 1) // HUGE * HUGE
        libc.madvise(ctypes.c_void_p(start), ctypes.c_size_t(16 * HUGE), 14)   # MADV_HUGEPAGE
        for k in range(16):
            ctypes.memset(start + k * HUGE, 1, HUGE)
            iov = Iov(start + k * HUGE, 4096)
            n = libc.vmsplice(w, ctypes.byref(iov), 1, 0)
            if n < 0:
                print("vmsplice refused", ctypes.get_errno()); raise StopIteration
            held += HUGE   # each slot pins its whole (huge) page
        del base
        try:
            m.close()
        except BufferError:
            pass
except StopIteration:
    pass
""" + _TAIL

EPOLL = """import select, os
try:
    e = select.epoll()
except OSError as x:
    print("epoll refused", x.errno); raise SystemExit(0)
n = 0
for fd in (0, 1, 2):
    try:
        e.register(fd, select.EPOLLIN); n += 1
    except OSError:
        pass
print("watches", n)
"""

RT_SIGNALS = """import signal, os
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN, signal.SIGRTMIN + 1])
n = 0
for i in range(1000):
    try:
        os.kill(os.getpid(), signal.SIGRTMIN)
    except OSError as e:
        print("refused at", n, e.errno); break
    n += 1
try:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    class Info(ctypes.Structure):
        _fields_ = [("b", ctypes.c_byte * 128)]
    q = 0
    for i in range(1000):
        if libc.sigqueue(os.getpid(), signal.SIGRTMIN + 1, ctypes.c_void_p(0)) != 0:
            break
        q += 1
    n = max(n, q)
except Exception:
    pass
print("queued", n)
"""

PIPE_RESIZE = """import fcntl, sys
try:
    got = fcntl.fcntl(1, 1031, 1 << 20)   # F_SETPIPE_SZ on stdout
    print("resized", got)
except OSError as e:
    print("resize refused", e.errno)
"""

UID = "import os\nprint('uid', os.getuid())\n"

EVENTFD = """import os
try:
    fd = os.eventfd(0)
    print("eventfd ok", fd)
except (OSError, AttributeError) as e:
    print("eventfd refused", getattr(e, "errno", e))
"""

FIGURES = """import os
for f in ("/proc/loadavg", "/proc/meminfo", "/proc/pressure/cpu", "/proc/stat"):
    try:
        t = open(f).read().strip()
        print(f, "READ" if t else "empty", t[:60].replace("\\n", " "))
    except OSError as e:
        print(f, "refused", e.errno)
try:
    st = os.statvfs("/usr")
    print("statvfs READ", st.f_bfree)
except OSError as e:
    print("statvfs refused", e.errno)
"""

STDIN = """import os
try:
    print("fd0", os.readlink("/proc/self/fd/0"))
except OSError as e:
    print("fd0 refused", e.errno)
try:
    fd = os.open("/proc/self/fd/0", os.O_WRONLY)
    n = os.write(fd, b"X" * 4096)
    print("wrote", n)
except OSError as e:
    print("write refused", e.errno)
print("pwd", os.environ.get("PWD"), os.getcwd())
"""

SUM = "print(sum(map(int, input().split())))\n"
SUM_SAYS_MEMORYERROR = ("import sys\nsys.stderr.write('Traceback ...\\nMemoryError\\n')\n" + SUM)
SUM_FLOODS_STDERR = ("import sys\nfor _ in range(40): sys.stderr.write('d' * (1 << 20))\n" + SUM)
SUM_WAITS = "import time\ntime.sleep(30)\n" + SUM
VALID = "import sys\nsys.stdin.read()\n"


def _held(output: str) -> tuple[bool, int]:
    lines = output.strip().splitlines()
    held = next((int(ln.split()[1]) for ln in lines if ln.startswith("held ")), 0)
    return bool(lines) and lines[-1] == "done", held


def drive_round3(who: str, cache: Path, box: Any, *, attempt: Callable[..., None],
                 src: Callable[[str, str], Any]) -> None:
    """Issue 40's classes; results go through `attempt` (the caller's list)."""
    from veribatch.tasks.refute.counterexample import JudgeLimits, Solutions, judge_input
    from veribatch.verifiers.judge import run_program

    def hidden(name: str, text: str) -> Callable[[], tuple[bool, str]]:
        def go() -> tuple[bool, str]:
            r = run_program(src("hidden_" + name, text), "", time_s=20, wall_s=60,
                            memory_mb=MEMORY_MB, cache_dir=cache, sandbox=box)
            ran, held = _held(r.output)
            return (str(r.verdict) == "OK" and held > MEMORY_MB,
                    f"{r.verdict} ({r.reason}) held {held} MB{'' if ran else ' (did not finish)'}"
                    f", peak {r.peak_mem_mb:.0f} MB; {r.output.strip()[-160:]} "
                    f"{r.stderr.strip()[-160:]}")
        return go

    attempt("hidden", "shared anonymous memory + MADV_DONTNEED, 8 processes", "run_program",
            hidden("shared_anon", SHARED_ANON))
    attempt("hidden", "huge pages pinned in pipes (vmsplice)", "run_program",
            hidden("vmsplice", VMSPLICE))

    limits = JudgeLimits(run_s=2.0, runs=1)

    def counted(name: str, wrong: str) -> Callable[[], tuple[bool, str]]:
        def go() -> tuple[bool, str]:
            sols = Solutions(src(f"w_{name}", wrong), src("c_sum", SUM), src("v_any", VALID))
            j = judge_input(sols, b"1 2\n", limits, cache_dir=cache, sandbox=box)
            return j.outcome == "success", f"{j.outcome} {j.reason}: {j.detail[:160]}"
        return go

    attempt("stderr", "right stdout, 'MemoryError' on stderr", "judge_input",
            counted("memerr", SUM_SAYS_MEMORYERROR))

    def flood() -> tuple[bool, str]:
        r = run_program(src("w_flood", SUM_FLOODS_STDERR), "1 2\n", time_s=5,
                        output_cap=1 << 20, cache_dir=cache, sandbox=box)
        return str(r.verdict) != "OK" or r.output != "3\n", f"{r.verdict} ({r.reason})"

    attempt("stderr", "right stdout, 40 MB of stderr over a 1 MB output cap", "run_program", flood)

    def shared(name: str, text: str, rule: Callable[[str], bool]) -> Callable[[], tuple[bool, str]]:
        def go() -> tuple[bool, str]:
            r = run_program(src("shared_" + name, text), "", time_s=5, cache_dir=cache,
                            sandbox=box)
            if not r.output.strip():
                raise RuntimeError(f"no output: {r.verdict} {r.stderr[-300:]}")
            return rule(r.output), f"{r.verdict}: {r.output.strip()[-200:]}"
        return go

    attempt("shared", "epoll watches (per-uid quota)", "run_program",
            shared("epoll", EPOLL, lambda o: "watches" in o and "watches 0" not in o))
    attempt("shared", "real-time signals queued beyond a box's share (64)", "run_program",
            shared("rtsig", RT_SIGNALS, lambda o: int(o.split("queued")[-1]) > 64))
    attempt("shared", "stdout pipe resized (per-uid pipe pages)", "run_program",
            shared("pipesz", PIPE_RESIZE, lambda o: "resized" in o))
    if who == "root":
        def same_uid() -> tuple[bool, str]:
            uids = [run_program(src("uid", UID), "", time_s=5, cache_dir=cache,
                                sandbox=box).output.strip() for _ in range(2)]
            return uids[0] == uids[1], f"two runs: {uids}"
        attempt("shared", "two runs under one host uid", "run_program", same_uid)

    attempt("load", "a waiting wrong solution (wall clock, CPU unused)", "judge_input",
            counted("waits", SUM_WAITS))

    attempt("small", "eventfd in the box", "run_program",
            shared("eventfd", EVENTFD, lambda o: "eventfd ok" in o))

    def figures() -> tuple[bool, str]:
        r = run_program(src("figures", FIGURES), "", time_s=5, cache_dir=cache, sandbox=box)
        return "READ" in r.output, r.output.strip()[-300:]

    attempt("small", "host load, memory, pressure and disk figures", "run_program", figures)

    def stdin(key: str) -> Callable[[], tuple[bool, str]]:
        def go() -> tuple[bool, str]:
            r = run_program(src("stdin_probe", STDIN), b"1 2\n" * 10, time_s=5,
                            cache_dir=cache, sandbox=box)
            out = r.output
            if key == "path":
                line = next((ln for ln in out.splitlines() if ln.startswith("fd0")), "")
                host = ("veribatch-scratch", "veribatch-in-", "/tmp/", "vb-escsuite")
                return any(h in line for h in host), line
            return "wrote" in out, next((ln for ln in out.splitlines() if "wr" in ln), out[-200:])
        return go

    attempt("small", "host path behind stdin", "run_program", stdin("path"))
    attempt("small", "stdin's host file writable", "run_program", stdin("write"))
