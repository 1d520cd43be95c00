"""`python -m veribatch.verifiers.judge --program P --input I [--expected E]`: one judged run as JSON.

This is the command line `JudgeTool` hands to the verifier runner, so a judge call
gets the same outer limits, logs and cache as every other verifier.
`python -m veribatch.verifiers.judge --probe` prints which sandbox this node offers, and why.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from veribatch.verifiers.judge.compare import outputs_match
from veribatch.verifiers.judge.compile import CompileError, effective_flags
from veribatch.verifiers.judge.run import Program, run_program
from veribatch.verifiers.judge.sandbox import (
    MODES,
    SandboxUnavailable,
    detect_sandbox,
    kernel_userns_report,
    sandbox_report,
)

OUTPUT_EXCERPT = 2000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m veribatch.verifiers.judge")
    ap.add_argument("--probe", action="store_true", help="print the sandbox this node offers")
    ap.add_argument("--program", type=Path)
    ap.add_argument("--input", type=Path)
    ap.add_argument("--expected", type=Path)
    ap.add_argument("--lang", choices=["cpp", "python"])
    ap.add_argument("--time", type=float, default=2.0, help="CPU seconds for the program")
    ap.add_argument("--memory", type=int, default=256, help="MB for the program")
    ap.add_argument("--cache-dir", type=Path)
    ap.add_argument("--sandbox", choices=MODES, default="auto",
                    help="isolation: auto (bwrap, else apptainer), or unsafe (none; recorded)")
    a = ap.parse_args(argv)
    if a.probe:
        try:
            box = detect_sandbox(a.sandbox)
        except SandboxUnavailable as e:
            print(json.dumps({"sandbox": None, "refused": str(e), **kernel_userns_report()},
                             indent=1))
            return 1
        flags, note = effective_flags(box)
        print(json.dumps({**sandbox_report(box), "cxx_flags": " ".join(flags),
                          "flags_note": note}, indent=1))
        return 0
    if a.program is None or a.input is None:
        ap.error("--program and --input are required (or --probe)")
    report: dict[str, object]
    try:
        box = detect_sandbox(a.sandbox)
        run = run_program(Program.of(a.program, a.lang), a.input, time_s=a.time,
                          memory_mb=a.memory, cache_dir=a.cache_dir, sandbox=box)
    except SandboxUnavailable as e:
        report = {"verdict": "ERROR", "reason": f"sandbox refused: {e}"}
    except CompileError as e:
        report = {"verdict": "CE", "reason": str(e)[-2000:]}
    else:
        report = asdict(run)
        report["verdict"] = str(run.verdict)
        report["output"] = run.output[:OUTPUT_EXCERPT]
        if a.expected is not None:
            expected = a.expected.read_text(errors="replace")
            report["matches_expected"] = outputs_match(run.output, expected)
    print("VERIBATCH-JUDGE " + json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
