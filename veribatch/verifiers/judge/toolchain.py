"""The programs the judge runs model code with: the C++ compiler and the Python interpreter.

A leaf module: where they are and what version they say they are, nothing about how a
program is compiled (`compile`) or run (`run`).  The sandbox needs only their locations
(it binds their installation prefixes read-only), and it must not depend on the modules
that run programs inside it — they depend on it.
"""

from __future__ import annotations

import functools
import os
import shutil

from veribatch.verifiers.base import ToolNotFoundError, read_version


def compiler_path(required: bool = True) -> str | None:
    """g++ from $VERIBATCH_CXX or PATH (None when absent and not `required`)."""
    env = os.environ.get("VERIBATCH_CXX")
    if env:
        return env
    found = shutil.which("g++")
    if not found and required:
        raise ToolNotFoundError(f"g++ not found on PATH ({os.environ.get('PATH', '')}) "
                                "and $VERIBATCH_CXX is not set")
    return found


def compiler() -> str:
    path = compiler_path()
    assert path is not None
    return path


@functools.cache
def compiler_version(cxx: str) -> str:
    return read_version([cxx, "--version"]).splitlines()[0].strip()


def judge_python(required: bool = True) -> str | None:
    """The interpreter for Python solutions: $VERIBATCH_JUDGE_PYTHON, else the system python3.

    The system one, not this venv's: the sandboxed user must be able to execute it,
    and solutions must not see the toolkit's site-packages.
    """
    env = os.environ.get("VERIBATCH_JUDGE_PYTHON")
    if env:
        return env
    for cand in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(cand, os.X_OK):
            return cand
    found = shutil.which("python3")
    if not found and required:
        raise ToolNotFoundError("python3 not found in /usr/bin, /usr/local/bin or PATH")
    return found
