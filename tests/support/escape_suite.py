"""The escape suite: attacks on the judge's box and on `launch serve`, by class, through the
project's own entry points, each judged held or escaped.

Used by `tests/verifiers/judge/test_escape_suite.py` (which asserts that nothing escapes)
and by `bench/escapes.py` (which prints tried / held / escaped per class, as root and as the
unprivileged user ``nobody``, for this checkout or another one: before/after a change).

The attacks run in a *driver* process started as the user under test (``setpriv`` to
uid 65534 for the unprivileged run, exactly what a cluster user's job looks like to the
sandbox) with ``PYTHONPATH`` pointing at the checkout being measured and ``TMPDIR`` at a
private folder, so the leftovers class can count what a run leaves behind:

    python escape_suite.py SPEC.json      (prints one JSON list of results)

Classes (issue 18):

keyring    a key planted in the driver's own session keyring (``keyctl new_session`` as an
           ssh login with pam_keyinit gives) is searched for, read and added to from the box,
           through `run_program` and REFUTE's generator path `run_generator`
memory     ``memory_mb=256``: files in the box's root, /tmp, /box and /dev/shm, memfd pages,
           a tmpfs mounted in a nested user namespace, every tmpfs filled plus anonymous
           memory; escaped when the program is judged OK while holding more than the limit.
           Each result carries the run's `memory_limit_by`, the mechanism the record names
stdin      the judged input rewritten through ``/proc/self/fd/0`` (`run_program`,
           ``python -m veribatch.verifiers.judge``, ``launch verify --tool judge``)
serve      `launch serve`'s bind check (``0``, ``0.0.0.0`` from the environment, ``::0``,
           ``0.0``) and a token-less ``/health`` that names the model's local path
leftovers  folders left in $TMPDIR by a SIGKILLed judge and by one ``launch verify``

Classes (issue 28; the programs are in `escape_attacks.py`):

kmem       memory the kernel keeps for the box (SysV shm and message queues, unix and TCP
           socket buffers, tmpfs xattrs, 400k empty files): escaped when judged OK while
           holding more than ``memory_mb=256``; "held" needs the program's closing ``done``
cpu        2.5 s of CPU in children shorter than a poll under a 1 s limit: escaped when OK
output     exactly cap + 4 KiB then exit, through `run_program` (escaped when OK; on stderr,
           which issue 40 caps on its own and never counts, escaped when *not* OK) and as a
           generator (escaped when its output becomes an input)
verdict    a generator whose stderr reads like the sandbox's own failure: escaped when the
           judge blames itself (``judge_error``) instead of the program
input      inputs Python's ``int`` and C++ ``cin`` read differently: escaped when judged a
           counterexample (``success``) rather than an invalid input
network    AF_VSOCK (directly and through io_uring), AF_INET, AF_NETLINK sockets: escaped
           when one binds
quota      inotify instances (escaped at the uid's whole quota), ``mlock``, locks on host
           files bound into the box
info       host facts visible in the box: the judge's command line and scratch paths
           (``/proc/1/cmdline``, mountinfo, $PWD), the boot id, the kernel command line,
           ``/proc/keys``
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

CLASSES = ("keyring", "memory", "stdin", "serve", "leftovers", "kmem", "cpu", "output",
           "verdict", "input", "network", "quota", "info",
           "hidden", "stderr", "shared", "load", "small")  # the last five: `escape_round3`
NOBODY = 65534
MEMORY_MB = 256
HOLD_MB = 600

# -- attack programs (run inside the box) -----------------------------------------------

_KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}  # (add_key, keyctl)


def _keyring_program(marker: str) -> str:
    add_key, keyctl = _KEYCTL.get(os.uname().machine, _KEYCTL["x86_64"])
    return f"""import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
L = ctypes.c_long
kid = libc.syscall(L({keyctl}), L(10), L(-3), b"user", b"vbsecret-{marker}", L(0))
if kid >= 0:
    buf = ctypes.create_string_buffer(4096)
    n = libc.syscall(L({keyctl}), L(11), L(kid), buf, L(4096))
    print("read", buf.raw[:max(n, 0)].decode(errors="replace"))
else:
    print("search failed", ctypes.get_errno())
r = libc.syscall(L({add_key}), b"user", b"vbadded-{marker}", b"x", L(1), L(-3))
print("add_key", r)
"""


def _fill_program(where: str) -> str:
    return f"""import os
held = 0
i = 0
chunk = b"x" * (32 << 20)
try:
    while held < ({HOLD_MB} << 20):
        with open("{where}/f%d" % i, "wb") as f:
            f.write(chunk)
        held += len(chunk)
        i += 1
except OSError as e:
    print("stopped", e.errno)
print("held", held >> 20)
"""


_MEMFD = f"""import os
held = 0
fds = []
chunk = b"x" * (32 << 20)
try:
    while held < ({HOLD_MB} << 20):
        fd = os.memfd_create("m")
        os.write(fd, chunk)
        fds.append(fd)
        held += len(chunk)
except OSError as e:
    print("stopped", e.errno)
print("held", held >> 20)
"""

_USERNS_TMPFS = """import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
uid, gid = os.getuid(), os.getgid()
if libc.unshare(0x10000000 | 0x00020000) != 0:
    print("unshare refused", ctypes.get_errno())
    print("held 0")
    raise SystemExit(0)
open("/proc/self/setgroups", "w").write("deny")
open("/proc/self/uid_map", "w").write(f"0 {uid} 1")
open("/proc/self/gid_map", "w").write(f"0 {gid} 1")
os.makedirs("/tmp/m", exist_ok=True)
if libc.mount(b"none", b"/tmp/m", b"tmpfs", 0, b"size=2g") != 0:
    print("mount refused", ctypes.get_errno())
    print("held 0")
    raise SystemExit(0)
""" + _fill_program("/tmp/m").replace("import os\n", "")

_ALL_TMPFS = f"""import os
held = 0
chunk = b"x" * (16 << 20)
for where in ("/tmp", "/box", "/dev/shm"):
    try:
        for i in range(100):
            with open(f"{{where}}/f%d" % i, "wb") as f:
                f.write(chunk)
            held += len(chunk)
    except OSError:
        pass
del chunk
keep = []
try:
    while held < ({HOLD_MB} << 20):
        keep.append(bytearray(8 << 20))
        held += 8 << 20
except MemoryError:
    keep.pop()
    held -= 16 << 20
print("held", held >> 20)
"""

_REWRITE_STDIN = """import os
try:
    fd = os.open("/proc/self/fd/0", os.O_WRONLY | os.O_TRUNC)
    os.write(fd, b"PWNED")
    print("rewrote")
except OSError as e:
    print("refused", e.errno)
"""

_SLEEP = "import time\ntime.sleep(60)\n"

# -- the driver (runs as the user under test) --------------------------------------------


def _libc() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _plant_key(marker: str) -> int:
    """A fresh session keyring for this process holding the secret key; the key's id."""
    _, keyctl = _KEYCTL.get(os.uname().machine, _KEYCTL["x86_64"])
    add_key = _KEYCTL.get(os.uname().machine, _KEYCTL["x86_64"])[0]
    libc, L = _libc(), ctypes.c_long
    if libc.syscall(L(keyctl), L(1), None) < 0:  # KEYCTL_JOIN_SESSION_KEYRING, anonymous
        raise OSError(ctypes.get_errno(), "keyctl join_session_keyring")
    secret = f"KEY-{marker}".encode()
    kid = libc.syscall(L(add_key), b"user", f"vbsecret-{marker}".encode(), secret,
                       L(len(secret)), L(-3))
    if kid < 0:
        raise OSError(ctypes.get_errno(), "add_key")
    return int(kid)


def _key_added(marker: str) -> bool:
    _, keyctl = _KEYCTL.get(os.uname().machine, _KEYCTL["x86_64"])
    libc, L = _libc(), ctypes.c_long
    return libc.syscall(L(keyctl), L(10), L(-3), b"user", f"vbadded-{marker}".encode(),
                        L(0)) >= 0


def _result(cls: str, name: str, entry: str, escaped: bool, detail: str) -> dict[str, Any]:
    return {"class": cls, "name": name, "entry": entry, "escaped": bool(escaped),
            "detail": detail[-600:]}


def _held_mb(output: str) -> int:
    for line in reversed(output.splitlines()):
        if line.startswith("held "):
            return int(line.split()[1])
    return 0


def drive(spec: dict[str, Any]) -> list[dict[str, Any]]:
    from veribatch.tasks.refute.counterexample import JudgeLimits, run_generator
    from veribatch.verifiers.judge import Program, detect_sandbox, run_program

    marker = spec["marker"]
    work = Path(spec["work"])
    cache = work / "cache"
    box = detect_sandbox()
    python = spec.get("python") or sys.executable
    results: list[dict[str, Any]] = []

    def src(name: str, text: str) -> Program:
        p = work / f"{name}.py"
        p.write_text(text)
        return Program.of(p)

    want = set(spec.get("classes") or CLASSES)

    def attempt(cls: str, name: str, entry: str, fn: Callable[[], tuple[bool, str]]) -> None:
        if cls not in want:
            return
        try:
            escaped, detail = fn()
        except Exception as e:  # the harness could not run the attack: neither held nor escaped
            results.append({**_result(cls, name, entry, False, f"{type(e).__name__}: {e}"),
                            "error": True})
            return
        results.append(_result(cls, name, entry, escaped, detail))

    # keyring
    _plant_key(marker)
    secret = f"KEY-{marker}"
    kprog = src("keyring", _keyring_program(marker))

    def key_run_program() -> tuple[bool, str]:
        r = run_program(kprog, "", time_s=5, memory_mb=MEMORY_MB, cache_dir=cache, sandbox=box)
        return secret in r.output, f"{r.verdict}: {r.output.strip()} {r.stderr[-200:]}"

    def key_generator() -> tuple[bool, str]:
        out = run_generator(kprog, JudgeLimits(), cache_dir=cache, sandbox=box, time_s=5)
        text = out.decode(errors="replace") if isinstance(out, bytes) else str(out.to_record())
        return secret in text, text.strip()

    def key_added() -> tuple[bool, str]:
        found = _key_added(marker)
        return found, ("the box's key IS in the driver's session keyring" if found
                       else "the box's key is not in the driver's session keyring")

    attempt("keyring", "read secret key", "run_program", key_run_program)
    attempt("keyring", "read secret key", "run_generator", key_generator)
    attempt("keyring", "add key to host session", "run_program", key_added)

    # memory
    def mem(name: str, text: str) -> Callable[[], tuple[bool, str]]:
        def go() -> tuple[bool, str]:
            r = run_program(src(name, text), "", time_s=10, wall_s=30, memory_mb=MEMORY_MB,
                            cache_dir=cache, sandbox=box)
            held = _held_mb(r.output)
            mechanism[0] = getattr(r, "memory_limit_by", "") or "(not recorded)"
            return (str(r.verdict) == "OK" and held > MEMORY_MB,
                    f"{r.verdict} ({r.reason}) held {held} MB, peak {r.peak_mem_mb:.0f} MB; "
                    f"{r.output.strip()[-200:]}")
        return go

    mechanism = [""]
    for name, text in (("files in /", _fill_program("")), ("files in /tmp", _fill_program("/tmp")),
                       ("files in /box", _fill_program("/box")),
                       ("files in /dev/shm", _fill_program("/dev/shm")),
                       ("memfd_create", _MEMFD), ("tmpfs in nested userns", _USERNS_TMPFS),
                       ("anonymous memory", "b = bytearray(600 << 20)\nprint('held 600')\n"),
                       ("every tmpfs + anonymous memory", _ALL_TMPFS)):
        attempt("memory", name, "run_program", mem(name.replace(" ", "_").replace("/", "_"), text))
        if "memory" in want:
            results[-1]["memory_limit_by"] = mechanism[0]

    # stdin written back
    prog = src("rewrite", _REWRITE_STDIN)

    def rewrite(entry: str) -> Callable[[], tuple[bool, str]]:
        def go() -> tuple[bool, str]:
            inp = work / f"input-{entry}.txt"
            inp.write_text("1 2 3\n")
            # writable by the box's uid as well: for root's run too, only the private copy
            # (never the file itself as stdin) keeps the program from rewriting it
            inp.chmod(0o666)
            env = {**os.environ}
            if entry == "run_program":
                r = run_program(prog, inp, time_s=5, cache_dir=cache, sandbox=box)
                detail = r.output
            elif entry == "python -m veribatch.verifiers.judge":
                p = subprocess.run([python, "-m", "veribatch.verifiers.judge", "--program",
                                    str(prog.source), "--input", str(inp), "--cache-dir",
                                    str(cache)], capture_output=True, text=True, env=env,
                                   timeout=120)
                detail = p.stdout[-300:] + p.stderr[-300:]
            else:
                p = subprocess.run([python, "-m", "veribatch", "verify", "--tool", "judge",
                                    "--log-dir", str(work / "verify-logs"), str(prog.source),
                                    str(inp)], capture_output=True, text=True, env=env,
                                   timeout=120)
                detail = p.stdout[-300:] + p.stderr[-300:]
            after = inp.read_text()
            return after != "1 2 3\n", f"input now {after!r}; {detail.strip()[-300:]}"
        return go

    for entry in ("run_program", "python -m veribatch.verifiers.judge", "launch verify"):
        attempt("stdin", "rewrite /proc/self/fd/0", entry, rewrite(entry))

    # serve
    def bind(host: str | None, env_host: str | None) -> Callable[[], tuple[bool, str]]:
        def go() -> tuple[bool, str]:
            from veribatch.inference.serve_job import HOST_ENV, ServeJob

            old = os.environ.pop(HOST_ENV, None)
            if env_host is not None:
                os.environ[HOST_ENV] = env_host
            try:
                job = ServeJob(work / f"serve-{uuid.uuid4().hex[:6]}", "hf:/nonexistent/model",
                               backend="http", host=host, port=None)
            except Exception as e:
                msg = str(e)
                unclear = host is not None and ":" in host and "IPv6" not in msg
                return unclear, f"refused{' (message does not say IPv6)' if unclear else ''}: {msg}"
            finally:
                os.environ.pop(HOST_ENV, None)
                if old is not None:
                    os.environ[HOST_ENV] = old
            infos = socket.getaddrinfo(job.host, job.port, type=socket.SOCK_STREAM)
            wildcard = any(i[4][0] in ("0.0.0.0", "::") for i in infos)
            return wildcard, f"would bind {job.host}:{job.port}"
        return go

    for name, host, env_host in (("--host 0", "0", None), ("--host 0.0", "0.0", None),
                                 ("VERIBATCH_SERVE_HOST=0.0.0.0", None, "0.0.0.0"),
                                 ("--host ::0", "::0", None), ("--host 0.0.0.0", "0.0.0.0", None)):
        attempt("serve", f"bind {name}", "serve_job.ServeJob", bind(host, env_host))

    def health() -> tuple[bool, str]:
        import types
        import urllib.request

        from veribatch.inference.serve_http import EngineServer

        path = f"/secret/models/{marker}"
        engine = types.SimpleNamespace(engine="hf", model=path)
        server = EngineServer(engine, host="127.0.0.1", port=0, served_name=path,  # type: ignore[arg-type]
                              token="t0k").start()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/health", timeout=10) as r:
                body = r.read().decode()
        finally:
            server.stop()
        return marker in body, f"/health without a token: {body[:200]}"

    attempt("serve", "/health names the model path", "serve_http.EngineServer", health)

    # leftovers: folders in $TMPDIR
    tmp = Path(tempfile.gettempdir())

    def ours() -> list[str]:
        return sorted(p.name for p in tmp.iterdir() if p.name.startswith("veribatch-"))

    def killed_judge() -> tuple[bool, str]:
        sleeper = src("sleeper", _SLEEP)
        inp = work / "in-sleep.txt"
        inp.write_text("x\n")
        p = subprocess.Popen([python, "-m", "veribatch.verifiers.judge", "--program",
                              str(sleeper.source), "--input", str(inp), "--time", "30",
                              "--cache-dir", str(cache)], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not any("veribatch-box-" in n for n in _walk(tmp)):
            time.sleep(0.05)
        time.sleep(0.3)
        p.send_signal(signal.SIGKILL)
        p.wait()
        time.sleep(3.0)
        left = [n for n in _walk(tmp) if "veribatch-box-" in n or "veribatch-judge-" in n]
        return bool(left), f"left after SIGKILL: {left[:5]}"

    def verify_litter() -> tuple[bool, str]:
        inp = work / "in-verify.txt"
        inp.write_text("1\n")
        ok = src("ok", "print(input())\n")
        subprocess.run([python, "-m", "veribatch", "verify", "--tool", "judge",
                        str(ok.source), str(inp)], capture_output=True, timeout=120)
        left = [n for n in ours() if n.startswith("veribatch-verify-")]
        return bool(left), f"left after launch verify: {left[:5]}"

    attempt("leftovers", "SIGKILL of the judge", "python -m veribatch.verifiers.judge",
            killed_judge)
    attempt("leftovers", "one launch verify", "launch verify", verify_litter)
    results += drive_round2(spec, work, cache, box, attempt_fn=attempt, src=src)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import escape_round3  # type: ignore[import-not-found]

    escape_round3.drive_round3(spec.get("who", "nobody"), cache, box, attempt=attempt, src=src)
    return results


def _done_held(output: str) -> tuple[bool, int]:
    """(the program ran to its end, MB it says it held then)."""
    lines = output.strip().splitlines()
    return bool(lines) and lines[-1] == "done", _held_mb(output)


def drive_round2(spec: dict[str, Any], work: Path, cache: Path, box: Any, *,
                 attempt_fn: Callable[..., None], src: Callable[[str, str], Any]
                 ) -> list[dict[str, Any]]:
    """Issue 28's classes; results go through `attempt_fn` (the caller's list)."""
    # by path: the driver runs as a script against another checkout's package
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import escape_attacks as A  # type: ignore[import-not-found]

    from veribatch.tasks.refute.counterexample import (
        JudgeLimits,
        Solutions,
        judge_input,
        run_generator,
    )
    from veribatch.verifiers.judge import run_program

    attempt = attempt_fn

    # kmem: memory the kernel keeps
    def kmem(name: str, text: str) -> Callable[[], tuple[bool, str]]:
        def go() -> tuple[bool, str]:
            r = run_program(src("kmem_" + name.split()[0].lower(), text), "", time_s=20,
                            wall_s=60, memory_mb=MEMORY_MB, cache_dir=cache, sandbox=box)
            ran, held = _done_held(r.output)
            return (str(r.verdict) == "OK" and held > MEMORY_MB,
                    f"{r.verdict} ({r.reason}) held {held} MB{'' if ran else ' (did not finish)'}"
                    f", peak {r.peak_mem_mb:.0f} MB; by {r.memory_limit_by}; "
                    f"{r.output.strip()[-160:]} {r.stderr.strip()[-120:]}")
        return go

    for name, text in A.KERNEL_MEMORY.items():
        attempt("kmem", name, "run_program", kmem(name, text))

    # cpu: short-lived children
    def cpu(name: str, text: str) -> Callable[[], tuple[bool, str]]:
        def go() -> tuple[bool, str]:
            r = run_program(src("cpu_" + name.split()[0], text), "", time_s=1, wall_s=60,
                            cache_dir=cache, sandbox=box)
            return (str(r.verdict) == "OK",
                    f"{r.verdict} ({r.reason}) cpu {r.cpu_s:.2f} s under a 1 s limit; "
                    f"{r.output.strip()[-80:]} {r.stderr.strip()[-120:]}")
        return go

    for name, text in A.CPU.items():
        attempt("cpu", name, "run_program", cpu(name, text))

    # output: just over the cap
    cap = 1 << 20

    def over(stream: str) -> Callable[[], tuple[bool, str]]:
        def go() -> tuple[bool, str]:
            fails = []
            for i in range(3):  # the race is timing: try it a few times
                r = run_program(src(f"over_{stream}", A.over_cap(cap, stream)), "", time_s=5,
                                output_cap=cap, cache_dir=cache, sandbox=box)
                want = "OK" if stream == "stderr" else "OLE"
                if str(r.verdict) != want:
                    fails.append(f"run {i}: {r.verdict} with {len(r.output)} chars")
            return bool(fails), "; ".join(fails) or f"{want} every time"
        return go

    def over_generator() -> tuple[bool, str]:
        fails = []
        for i in range(3):
            out = run_generator(src("over_gen", A.over_cap(cap)), JudgeLimits(input_cap=cap),
                                cache_dir=cache, sandbox=box, time_s=5)
            if isinstance(out, bytes):
                fails.append(f"run {i}: {len(out)} bytes became the input")
            elif out.reason != "generator_output_limit":
                fails.append(f"run {i}: {out.reason}")
        return bool(fails), "; ".join(fails) or "generator_output_limit every time"

    attempt("output", "cap + 4 KiB on stdout, then exit", "run_program", over("stdout"))
    attempt("output", "cap + 4 KiB on stderr, then exit", "run_program", over("stderr"))
    attempt("output", "cap + 4 KiB as a generator", "run_generator", over_generator)

    # verdict: the program's text must not make the judge blame itself
    def spoofed(text: str, code: int) -> Callable[[], tuple[bool, str]]:
        def go() -> tuple[bool, str]:
            out = run_generator(src(f"spoof{code}", A.spoof(text, code)), JudgeLimits(),
                                cache_dir=cache, sandbox=box, time_s=5)
            if isinstance(out, bytes):
                return True, f"became an input: {out[:100]!r}"
            return out.reason != "generator_crash", f"{out.reason}: {out.detail[:200]}"
        return go

    for name, (text, code) in A.SPOOFS.items():
        attempt("verdict", name, "run_generator", spoofed(text, code))

    # input: one reading by the validator and the solutions
    sol = Solutions(_prog(work, "wrong.cpp", A.WRONG),
                    _prog(work, "correct.cpp", A.CORRECT), src("validator", A.VALIDATOR))

    def reading(data: bytes) -> Callable[[], tuple[bool, str]]:
        def go() -> tuple[bool, str]:
            j = judge_input(sol, data, JudgeLimits(run_s=5, runs=1), cache_dir=cache, sandbox=box)
            return j.success, f"{j.outcome}/{j.reason}: {j.detail[:200]}"
        return go

    for name, data in A.TWO_READINGS.items():
        attempt("input", name, "judge_input", reading(data))

    # network: address families the box has no use for
    def net(name: str, text: str) -> Callable[[], tuple[bool, str]]:
        def go() -> tuple[bool, str]:
            r = run_program(src("net_" + name.split()[0], text), "", time_s=5,
                            cache_dir=cache, sandbox=box)
            return "bound" in r.output, f"{r.verdict}: {r.output.strip()[-200:]} " \
                                        f"{r.stderr.strip()[-120:]}"
        return go

    for name, text in A.NETWORK.items():
        attempt("network", name, "run_program", net(name, text))

    # quota: the judge's uid's shared limits, and host files
    try:
        inotify_quota = int(Path("/proc/sys/fs/inotify/max_user_instances").read_text())
    except (OSError, ValueError):
        inotify_quota = 128

    def quota(name: str, text: str) -> Callable[[], tuple[bool, str]]:
        def go() -> tuple[bool, str]:
            r = run_program(src("quota_" + name.split()[0], text), "", time_s=5,
                            cache_dir=cache, sandbox=box)
            out = r.output
            if name.startswith("inotify"):
                n = int(out.split("instances")[-1]) if "instances" in out else -1
                escaped = n >= inotify_quota
            elif name.startswith("locked"):
                escaped = "locked" in out
            else:
                escaped = "locked" in out and "nothing" not in out
            if not out.strip():  # the program did not run: the harness's fault
                raise RuntimeError(f"no output: {r.verdict} {r.stderr[-300:]}")
            return escaped, f"{r.verdict}: {out.strip()[-200:]}"
        return go

    for name, text in A.QUOTAS.items():
        attempt("quota", name, "run_program", quota(name, text))

    # info: host facts
    host_boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    host_cmdline = Path("/proc/cmdline").read_text().strip()
    info_run: list[Any] = []

    def info() -> Any:
        if not info_run:
            info_run.append(run_program(src("info", A.INFO), "", time_s=5, cache_dir=cache,
                                        sandbox=box))
        lines = {ln.split(" ", 1)[0]: ln.split(" ", 1)[-1]
                 for ln in info_run[0].output.splitlines() if ln.strip()}
        if "KEYS" not in lines:
            raise RuntimeError(f"no output: {info_run[0].stderr[-300:]}")
        return lines

    host_paths = (str(Path(tempfile.gettempdir())), str(work), "veribatch-scratch-",
                  "veribatch-box-")

    def leaks(key: str) -> Callable[[], tuple[bool, str]]:
        def go() -> tuple[bool, str]:
            text = info()[key]
            if key == "BOOTID":
                return text == host_boot, f"boot id {text}"
            if key == "CMDLINE":
                return bool(host_cmdline) and text == host_cmdline, f"cmdline {text[:120]}"
            if key == "KEYS":
                return not (text.startswith("unreadable") or not text.strip()), text[:200]
            hit = [h for h in host_paths if h in text]
            return bool(hit), f"names {hit}: {text[:300]}"
        return go

    for key, name in (("INIT", "/proc/1/cmdline"), ("MOUNTINFO", "mountinfo"),
                      ("PWD", "$PWD and cwd"), ("BOOTID", "boot id"),
                      ("CMDLINE", "kernel command line"), ("KEYS", "/proc/keys")):
        attempt("info", name, "run_program", leaks(key))
    return []


def _prog(work: Path, name: str, text: str) -> Any:
    from veribatch.verifiers.judge import Program

    p = work / name
    p.write_text(text)
    return Program.of(p)


def _walk(tmp: Path) -> list[str]:
    """Names of veribatch folders in `tmp`, one level down too (a per-process parent)."""
    out: list[str] = []
    for p in tmp.iterdir():
        if p.name.startswith("veribatch-"):
            out.append(p.name)
            with contextlib.suppress(OSError):
                out += [f"{p.name}/{q.name}" for q in p.iterdir()]
    return out


# -- the orchestrator (root) -------------------------------------------------------------


def _python_for(who: str, pypath: str) -> str:
    """An interpreter `who` can execute (and spawn again: a venv whose python links into
    root's 0700 home runs for nobody only by accident of the first exec)."""
    if who == "root":
        return sys.executable
    probe = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--",
             sys.executable, "-c", "import subprocess, sys, psutil, typer; "
             "subprocess.run([sys.executable, '-c', 'import psutil'], check=True)"]
    if subprocess.run(probe, capture_output=True, cwd="/", env={"PYTHONPATH": pypath}).returncode == 0:
        return sys.executable
    return "/usr/bin/python3"


def run_suite(who: str, repo: Path, timeout_s: float = 900,
              classes: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """Run every attack (of `classes`, default all) as `who` ("root" or "nobody") against
    the checkout at `repo`."""
    import site

    if os.geteuid() != 0:
        raise RuntimeError("the escape suite needs root (to become nobody and to own files)")
    base = Path(tempfile.mkdtemp(prefix="vb-escsuite-"))
    base.chmod(0o755)
    try:
        home, work, tmp = base / "home", base / "work", base / "tmp"
        for d in (home, work, tmp):
            d.mkdir()
        spec = base / "spec.json"
        python = _python_for(who, pypath := os.pathsep.join([str(repo), *site.getsitepackages()]))
        spec.write_text(json.dumps({"marker": f"m{uuid.uuid4().hex[:10]}", "work": str(work),
                                    "python": python, "classes": list(classes), "who": who}))
        prefix: list[str] = []
        if who == "nobody":
            for d in (home, work, tmp):
                os.chown(d, NOBODY, NOBODY)
            prefix = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": pypath,
               "TMPDIR": str(tmp), "VERIBATCH_CACHE": str(home / ".cache"), "LANG": "C.UTF-8"}
        p = subprocess.run([*prefix, python, __file__, str(spec)],
                           capture_output=True, text=True, env=env, cwd=str(work),
                           timeout=timeout_s)
        if p.returncode != 0:
            raise RuntimeError(f"escape driver failed as {who}: {p.stderr[-3000:]}")
        return json.loads(p.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(base, ignore_errors=True)


def summarize(results: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per class: tried, held, escaped, and attacks the harness could not run (error)."""
    out = {c: {"tried": 0, "held": 0, "escaped": 0, "error": 0} for c in CLASSES}
    for r in results:
        s = out.setdefault(r["class"], {"tried": 0, "held": 0, "escaped": 0, "error": 0})
        s["tried"] += 1
        s["error" if r.get("error") else "escaped" if r["escaped"] else "held"] += 1
    return out


if __name__ == "__main__":
    print(json.dumps(drive(json.loads(Path(sys.argv[1]).read_text()))))
