"""Test helper: C conditions and snippets judged by gcc itself (C semantics, not ours)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from veribatch.tasks.cebench.program import LoopProgram, c_literal


def gcc_run(main_body: str, globals_: str = "") -> int:
    """Compile and run ``int main(void) { main_body }`` with the native gcc (32-bit int, as ILP32); its exit code."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not installed")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = Path(tmp) / "t.c", Path(tmp) / "t"
        src.write_text(f"{globals_}\nint main(void) {{\n{main_body}\n}}\n")
        subprocess.run([gcc, "-O0", "-w", "-fwrapv", "-o", str(exe), str(src)], check=True, timeout=60)
        return subprocess.run([str(exe)], timeout=30).returncode


def declarations(prog: LoopProgram, state: dict[str, int]) -> str:
    return "\n".join(f"  {prog.variables.get(v, 'int')} {v} = {c_literal(x, prog.variables.get(v, 'int'))};"
                     for v, x in state.items())


def c_holds(prog: LoopProgram, expr: str, state: dict[str, int]) -> bool:
    """Does the C condition `expr` hold in `state`?  gcc decides (C semantics, not ours)."""
    return gcc_run(declarations(prog, state) + f"\n  return ({expr}) ? 0 : 1;") == 0
