"""C++ compilation for the judge: REFUTE's flags, sandboxed, cached by content, under limits.

The flags are those of the authors' harness (``refute/utils/code_exec.py``):
``g++ -static -DONLINE_JUDGE -O2 -std=c++23 -march=x86-64 -mno-avx2`` with a 30 s
compile limit.  (Its ``-Wl,--stack=268435456`` is a Windows linker flag; on Linux the
sandbox leaves RLIMIT_STACK unlimited, so the stack may grow to the memory limit.)  A compiler that lacks one of
them gets the nearest working set — ``-std=c++2b``/``c++20``, dynamic linking when no
static libc is installed, no ``-march`` off x86 — probed once per compiler, and the
departure is recorded as `flags_note` on every result, never hidden.

Compilation runs in the sandbox too: the source is model-written, and a compiler happily
``#include``s any file it can read and prints it in the error message.

The cache key is sha256(compiler identity, flags, source): a solution is compiled once per
machine however many inputs it runs on (RandSearch runs one solution on thousands).
Binaries are published atomically (built in a temp dir, then renamed), so parallel
workers never see a half-written one.  `STATS` counts hits and misses for bench/judge.py.

The cache is capped (`CACHE_MB`, ``$VERIBATCH_JUDGE_CACHE_MB``): a static binary can be
tens of MB, and model-written sources are all different, so after each new binary the
least recently used ones (a hit refreshes a binary's time) are removed until the cache
fits again.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import platform
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from veribatch.verifiers.judge import scratch
from veribatch.verifiers.judge.sandbox import (
    BOX_SIZE_MB,
    FILE_SIZE_MB,
    Sandbox,
    detect_sandbox,
    run_sandboxed,
)
from veribatch.verifiers.judge.toolchain import compiler, compiler_version
from veribatch.verifiers.result import Limits

CPP_FLAGS: tuple[str, ...] = ("-static", "-DONLINE_JUDGE", "-O2", "-std=c++23", "-march=x86-64",
                              "-mno-avx2")
"""The harness's flags (REFUTE's `code_exec.py`), minus the Windows-only stack flag."""
CACHE_ENV = "VERIBATCH_JUDGE_CACHE_MB"
CACHE_MB = 2048
"""The most the compiled binaries of one cache may hold together (MB) unless $VERIBATCH_JUDGE_CACHE_MB says."""
COMPILE_LIMITS = Limits(wall_s=30.0, cpu_s=30.0, memory_mb=2048)  # a CPU cap is asked for explicitly
_PROBE = "#include <cstdio>\n#include <vector>\nint main(){std::vector<int> v{1,2};std::printf(\"%zu\\n\",v.size());}\n"


class CompileError(Exception):
    """The source does not compile; the message holds the compiler's diagnostics (truncated)."""


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    errors: int = 0

    @property
    def hit_rate(self) -> float:
        n = self.hits + self.misses + self.errors
        return self.hits / n if n else 0.0


STATS = CacheStats()
_STATS_LOCK = threading.Lock()
_FAILED: dict[str, str] = {}  # key -> diagnostics: a source that failed is not recompiled


def default_cache_dir() -> Path:
    base = os.environ.get("VERIBATCH_CACHE") or Path.home() / ".cache" / "veribatch"
    return Path(base) / "judge-bin"


def _outside_image(box: Sandbox) -> bool:
    """True when programs run in an image this process is not in (paths are the image's)."""
    return box.kind == "apptainer" and box.image is not None


def _cxx_in(box: Sandbox) -> str:
    return "g++" if _outside_image(box) else compiler()


def _identity(box: Sandbox) -> str:
    if _outside_image(box):
        from veribatch.verifiers.apptainer import image_digest

        assert box.image
        return f"apptainer:{image_digest(Path(box.image))}"
    return compiler_version(compiler())


@functools.cache
def effective_flags(box: Sandbox, cache_dir: Path | None = None) -> tuple[tuple[str, ...], str | None]:
    """The flags this compiler accepts, closest to `CPP_FLAGS`, and a note on any departure.

    Probed once per compiler and sandbox kind, and remembered next to the binaries, so a
    fresh worker process does not pay for the probe compiles again."""
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    key = hashlib.sha256("\0".join([_identity(box), box.kind, *CPP_FLAGS, _PROBE]).encode())
    memo = cache / f"flags-{key.hexdigest()[:16]}.json"
    try:
        got = json.loads(memo.read_text())
        return tuple(got["flags"]), got["note"]
    except (OSError, ValueError, KeyError):
        pass
    flags, note = _probe_flags(box)
    try:
        memo.parent.mkdir(parents=True, exist_ok=True)
        tmp = memo.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"flags": list(flags), "note": note}))
        os.replace(tmp, memo)
    except OSError:
        pass  # a read-only cache only costs the probe next time
    return flags, note


def _probe_flags(box: Sandbox) -> tuple[tuple[str, ...], str | None]:
    notes: list[str] = []
    flags = list(CPP_FLAGS)
    if platform.machine() not in ("x86_64", "AMD64", "i686"):
        flags = [f for f in flags if not f.startswith(("-march", "-mno-avx"))]
        notes.append(f"{platform.machine()}: -march=x86-64 -mno-avx2 dropped")
    if not _try(box, flags):
        for std in ("-std=c++2b", "-std=c++20", "-std=gnu++17"):
            trial = [std if f.startswith("-std=") else f for f in flags]
            if _try(box, trial):
                notes.append(f"-std=c++23 unsupported by {_identity(box)}: {std}")
                flags = trial
                break
        else:
            trial = [f for f in flags if f != "-static"]
            if _try(box, trial):
                notes.append("no static libc/libstdc++: linked dynamically")
                flags = trial
    return tuple(flags), "; ".join(notes) or None


def _try(box: Sandbox, flags: list[str]) -> bool:
    with tempfile.TemporaryDirectory(prefix="veribatch-flags-", dir=scratch.scratch_dir()) as tmp:
        out = Path(tmp) / "out"
        out.mkdir()
        _own(out, box)
        Path(tmp).chmod(0o755)  # the sandbox user must reach out/
        ex = run_sandboxed([_cxx_in(box), *flags, "-o", "out/prog", "main.cpp"],
                           {"main.cpp": _PROBE.encode()}, COMPILE_LIMITS, stdin_path=None,
                           stdout_path=Path(tmp) / "log", stderr_path=Path(tmp) / "log",
                           output_cap=1 << 16, sandbox=box, writable={"out": out})
        return ex.termination_reason == "exit" and ex.returncode == 0 and (out / "prog").is_file()


_LIMIT_WORDS = {"walltime": "time limit", "cputime": "time limit", "memory": "memory limit",
                "output": "output limit", "processes": "process limit"}


def failure_cause(termination: str, truncated: bool, log: str) -> str:
    """Why a compile failed, in the words a user can act on.

    A limit the compiler hit is named as such, not as the compiler's own words: a file
    over RLIMIT_FSIZE kills cc1plus/as with SIGXFSZ, which g++ prints as an "internal
    compiler error"; a full /tmp of the box reads "No space left on device"."""
    if termination in _LIMIT_WORDS:
        return _LIMIT_WORDS[termination]
    if termination != "exit" and termination != "signal":
        return termination
    if "File size limit exceeded" in log or "signal 25" in log:
        return f"file size limit: the compiler wrote a file over {FILE_SIZE_MB} MB"
    if "No space left on device" in log:
        return f"file size limit: the box's temporary space (at most {BOX_SIZE_MB} MB) is full"
    if truncated:
        return "output limit: the compiler's log was cut"
    return "errors"


def cache_cap_mb() -> int:
    try:
        return max(1, int(os.environ.get(CACHE_ENV, CACHE_MB)))
    except ValueError:
        return CACHE_MB


def evict(cache: Path, keep: Path | None = None, cap_mb: int | None = None) -> list[Path]:
    """Remove the least recently used entries of `cache` (a binary and its compile log) until
    they fit in `cap_mb` (`cache_cap_mb` by default), never `keep`; the removed entries."""
    cap = (cap_mb if cap_mb is not None else cache_cap_mb()) * 2**20
    entries: list[tuple[float, int, Path]] = []
    with contextlib.suppress(OSError):
        for shard in cache.iterdir():
            if not shard.is_dir() or len(shard.name) != 2:
                continue
            for entry in shard.iterdir():
                with contextlib.suppress(OSError):
                    if entry.name.startswith("."):
                        continue  # a build in progress
                    # every file of the entry: compile.log (1 MB at most) counts as the binary does
                    size = sum(f.stat().st_size for f in entry.iterdir() if f.is_file())
                    entries.append((entry.stat().st_mtime, size, entry))
    total = sum(size for _, size, _ in entries)
    gone: list[Path] = []
    for _, size, entry in sorted(entries, key=lambda e: e[0]):
        if total <= cap:
            break
        if entry == keep:
            continue
        shutil.rmtree(entry, ignore_errors=True)
        total -= size
        gone.append(entry)
    return gone


def _own(path: Path, box: Sandbox) -> None:
    if box.uid is not None:
        os.chown(path, box.uid, box.uid)
    path.chmod(0o700 if box.uid is not None else 0o755)


def _count(kind: str) -> None:
    with _STATS_LOCK:
        setattr(STATS, kind, getattr(STATS, kind) + 1)


def compile_cpp(
    source: Path | str, cache_dir: Path | None = None, *, limits: Limits = COMPILE_LIMITS,
    sandbox: Sandbox | None = None,
) -> Path:
    """Compile a C++ source file (a path) or text (a str) in the sandbox; return the cached binary."""
    box = sandbox or detect_sandbox()
    text = Path(source).read_bytes() if isinstance(source, Path) else source.encode()
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    flags, _ = effective_flags(box, cache)
    key = hashlib.sha256("\0".join([_identity(box), *flags]).encode() + b"\0" + text).hexdigest()
    if key in _FAILED:
        _count("errors")
        raise CompileError(_FAILED[key])
    final = cache / key[:2] / key
    binary = final / "prog"
    if binary.is_file():
        _count("hits")
        with contextlib.suppress(OSError):
            os.utime(final)  # recently used: evicted last
        return binary
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=final.parent))
    # The compiler's output dir lives in the system temp dir, not in the cache: the cache may
    # sit below a directory the sandbox user cannot enter (root's home, a 0700 scratch dir).
    out = scratch.mkdtemp("veribatch-out-")
    try:
        _own(out, box)
        ex = run_sandboxed([_cxx_in(box), *flags, "-o", "out/prog", "main.cpp"], {"main.cpp": text},
                           limits, stdin_path=None, stdout_path=tmp / "compile.log",
                           stderr_path=tmp / "compile.log", output_cap=1 << 20, sandbox=box,
                           writable={"out": out})
        if ex.termination_reason != "exit" or ex.returncode != 0 or not (out / "prog").is_file():
            log = ex.error or ex.read_output()
            msg = f"g++ failed ({failure_cause(ex.termination_reason, ex.output_truncated, log)})" \
                  f":\n{log[-4000:]}"
            _FAILED[key] = msg
            _count("errors")
            raise CompileError(msg)
        (tmp / "prog").write_bytes((out / "prog").read_bytes())
        (tmp / "prog").chmod(0o755)
        tmp.chmod(0o755)
        try:
            os.rename(tmp, final)
        except OSError:  # another worker published the same binary first
            if not binary.is_file():
                raise
        _count("misses")
        evict(cache, keep=final)
        return binary
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
