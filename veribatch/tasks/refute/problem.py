"""A REFUTE instance as the judge sees it: program files and limits.

The correct solution is ``correct_cpp`` when present, else ``correct_python`` — the
harness's choice (``get_correct_sub``).  Files are written once per instance into a work
directory; C++ binaries come from the judge's content-addressed compile cache, so the
same wrong solution is compiled once however many attempts and runs judge it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from veribatch.tasks.base import Instance, RunConfig
from veribatch.tasks.refute.data import parse_lang


def _write(folder: Path, stem: str, lang: str, code: str) -> Any:
    from veribatch.verifiers.judge import Program

    path = folder / f"{stem}.{'cpp' if lang == 'cpp' else 'py'}"
    if not path.exists() or path.read_text() != code:
        path.write_text(code)
    return Program(path, lang)


def solutions(inst: Instance, folder: Path) -> Any:
    """`verifiers.judge.Solutions` for `inst`, its files under `folder`."""
    from veribatch.tasks.refute.counterexample import Solutions

    p = inst.payload
    folder.mkdir(parents=True, exist_ok=True)
    wrong_lang = parse_lang(p["wrong_code_lang"])
    assert wrong_lang is not None  # checked at load time
    if p.get("correct_cpp"):
        correct = _write(folder, "correct", "cpp", p["correct_cpp"])
    else:
        correct = _write(folder, "correct", "python", p["correct_python"])
    return Solutions(wrong=_write(folder, "wrong", wrong_lang, p["wrong_code"]),
                     correct=correct,
                     validator=_write(folder, "validator", "python", p["validator"]))


def program(folder: Path, stem: str, lang: str, code: str) -> Any:
    """A model-written program saved for the judge."""
    folder.mkdir(parents=True, exist_ok=True)
    return _write(folder, stem, lang, code)


def judge_limits(config: RunConfig) -> Any:
    from veribatch.tasks.refute.counterexample import JudgeLimits

    o = config.options
    return JudgeLimits(run_s=float(o["run_s"]), generator_s=float(o["generator_s"]),
                       memory_mb=int(o["memory_mb"]), runs=int(o["runs"]),
                       compare=str(o.get("compare") or "per-token"))


SHIPPED_ONLY_NOTE = (
    "no namespace isolation on this node ({why}); allowed because this run executes only "
    "programs shipped with veribatch (no model, the shipped sample): own temp dir, time/memory/"
    "output/process limits, uid 65534 when started as root; a model run refuses instead")


def shipped_programs_only(config: RunConfig) -> bool:
    """True when every program the run executes ships with veribatch: no model (so no
    model-written code) on the shipped sample (reviewed solutions, validators, generators).
    Only such a run may fall back to the node's own isolation when no sandbox exists."""
    return config.model is None and config.dataset == "sample"


def sandbox(config: RunConfig) -> Any:
    """The run's sandbox (raises `SandboxUnavailable` with a clear message when there is none).

    With ``sandbox=auto`` a run of shipped programs only (`shipped_programs_only`: the
    no-model default `make run` starts) falls back to what the node offers without
    namespaces — ``kind="none"``, ``unsafe=False``, a note saying why — so a fresh machine
    without bubblewrap runs it; its records and tables name that mechanism.  Model output
    never runs that way unless ``sandbox=unsafe`` is asked for."""
    from dataclasses import replace

    from veribatch.verifiers.judge import SandboxUnavailable, detect_sandbox

    image = str(config.options.get("image") or "") or None
    mode = str(config.options.get("sandbox", "auto"))
    try:
        return detect_sandbox(mode, image)
    except SandboxUnavailable as e:
        if mode != "auto" or not shipped_programs_only(config):
            raise
        why = str(e).split(": ", 1)[-1].split(". Kernel", 1)[0]
        # the "unsafe" mode's box (limits, privilege drop, net unshared where possible),
        # relabelled: it was not a user's explicit request, and these programs are ours
        host = detect_sandbox("unsafe", image)
        return replace(host, unsafe=False, notes=(SHIPPED_ONLY_NOTE.format(why=why),))
