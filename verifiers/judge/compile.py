"""C++ compilation for the judge: pinned flags, cached by content, under limits.

The cache key is sha256(compiler version, flags, source): the same solution is
compiled once per machine however many inputs it is run on (RandSearch runs one
solution on hundreds of inputs).  Binaries are published atomically (build in a
temp dir, then rename), so parallel workers never see a half-written one.
Compilation is not sandboxed (g++ opens no sockets), but it runs under time and
memory limits: template bombs in model-written code end as a `CompileError`.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from verifiers.base import ToolNotFoundError, read_version
from verifiers.result import Limits
from verifiers.runner import execute

CPP_FLAGS: tuple[str, ...] = ("-std=gnu++17", "-O2", "-pipe", "-DONLINE_JUDGE")
"""Pinned: REFUTE's solutions are Codeforces GNU C++17 submissions."""
COMPILE_LIMITS = Limits(wall_s=60.0, memory_mb=2048)


class CompileError(Exception):
    """The source does not compile; the message holds the compiler's diagnostics (truncated)."""


def compiler() -> str:
    """g++ from $VERIBATCH_CXX or PATH."""
    env = os.environ.get("VERIBATCH_CXX")
    if env:
        return env
    found = shutil.which("g++")
    if not found:
        raise ToolNotFoundError(f"g++ not found on PATH ({os.environ.get('PATH', '')}) "
                                "and $VERIBATCH_CXX is not set")
    return found


@functools.cache
def compiler_version(cxx: str) -> str:
    return read_version([cxx, "--version"]).splitlines()[0].strip()


def default_cache_dir() -> Path:
    base = os.environ.get("VERIBATCH_CACHE") or Path.home() / ".cache" / "veribatch"
    return Path(base) / "judge-bin"


def compile_cpp(
    source: Path | str, cache_dir: Path | None = None, *, limits: Limits = COMPILE_LIMITS
) -> Path:
    """Compile a C++ source file (a path) or text (a str) and return the cached binary."""
    text = Path(source).read_bytes() if isinstance(source, Path) else source.encode()
    cxx = compiler()
    version = compiler_version(cxx)
    key = hashlib.sha256(
        "\0".join([version, *CPP_FLAGS]).encode() + b"\0" + text
    ).hexdigest()
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    final = cache / key[:2] / key
    binary = final / "prog"
    if binary.is_file():
        return binary
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=final.parent))
    try:
        (tmp / "main.cpp").write_bytes(text)
        ex = execute([cxx, *CPP_FLAGS, "-o", "prog", "main.cpp"], limits, tmp / "compile.log",
                     cwd=tmp, output_cap=1 << 20)
        if ex.termination_reason != "exit" or ex.returncode != 0 or not (tmp / "prog").is_file():
            log = ex.error or ex.read_output()
            why = ex.termination_reason if ex.termination_reason != "exit" else "errors"
            raise CompileError(f"g++ failed ({why}):\n{log[-4000:]}")
        for p in (tmp, tmp / "prog"):
            p.chmod(0o755)
        try:
            os.rename(tmp, final)
        except OSError:  # another worker published the same binary first
            if not binary.is_file():
                raise
        return binary
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
