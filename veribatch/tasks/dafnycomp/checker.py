"""Checking one candidate program with Dafny 4.10: syntax (`dafny resolve`), then proof
(`dafny verify`), cached by content — and telling the user how to get Dafny when it is not here.

- syntax-correct, paper protocol (§4.1, Table 1): the program *parses* (``dafny resolve``
  reports no parse error); the resolve-based column (parse + types, with the strict
  integrity check) is kept as an extra, named column;
- verified, paper protocol: plain ``dafny verify`` (what the paper ran: the per-obligation
  limit and the cores, nothing else) reports no errors, no time-outs and no out-of-resource;
  the strict protocol also needs the integrity check and no proof that Dafny itself flags as
  using contradictory assumptions: a second ``dafny verify --warn-contradictory-assumptions``
  (`contradiction_check`), run only for a candidate the paper protocol verified and the
  integrity check passed — the only ones it can change — whose verdict must agree (the
  flag's proof-dependency tracking could in principle change what the solver proves within
  the limit; `strict_verify_status` says).  ``dafny verify`` runs only when resolve succeeded.
- Dafny other than 4.10.x: refused for a run (the paper used 4.10; later versions changed
  messages and defaults), unless ``-o allow_other_dafny=true``, which says loudly that the
  figures are not comparable with the paper's.

Both queries go through `verifiers.registry.get_verifier` with a result cache
(`verifiers.cache`): the key is the program's content, Dafny's version (and image digest)
and the options, so a resumed shard, a duplicate sample or a second run with the same
candidates never verifies twice.  The per-obligation limit (``--verification-time-limit``)
and the cores Dafny may use are task options; the wall limit of a whole program is
``budget_s``, enforced from outside by the runner.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from veribatch.tasks.base import RunConfig
from veribatch.tasks.dafnycomp.failure_modes import OTHER, classify
from veribatch.tasks.verifier import query_memory_mb, verifier_for

if TYPE_CHECKING:
    from veribatch.verifiers.result import Limits

RESOLVE_LIMIT_S = 120.0
MAX_ERRORS_KEPT = 50

DAFNY_HINT = """\
Dafny 4.10 is not available here, so the verify stage (syntax-correct and verified rates) \
cannot run. Get it either way:
  native:    install the .NET 8 runtime, then unzip \
https://github.com/dafny-lang/dafny/releases/download/v4.10.0/dafny-4.10.0-x64-ubuntu-20.04.zip \
and put its dafny/ folder on PATH (or set VERIBATCH_DAFNY=/path/to/dafny/dafny); \
or `dotnet tool install --global dafny --version 4.10.0`
  apptainer: `launch images build dafny` (containers/dafny.def; a first build prints the \
archive's sha256 to pin there), then add `-o runtime=apptainer -o image=images/dafny.sif`
Then run the same command again (a new run id: Dafny's version is part of it). \
`-o verify=off` runs only the Dafny-free stages (strip, extraction, integrity) without this error."""


PAPER_DAFNY = "4.10."
CONTRADICTORY_FLAG = "--warn-contradictory-assumptions"


class DafnyUnavailableError(ValueError):
    """`-o verify=on` was asked for and Dafny cannot be run, or the Dafny found is not 4.10.x
    and other versions were not allowed (launch exits 2)."""


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def check_paper_version(version: str, allow_other: bool) -> str | None:
    """None for a 4.10.x Dafny; else the loud warning (allowed) or `DafnyUnavailableError`."""
    if version.startswith(PAPER_DAFNY):
        return None
    msg = (f"Dafny {version} found, but DafnyComp's paper used Dafny 4.10.x: verdicts, messages "
           "(Table 2) and defaults differ between versions, so this run is NOT comparable with "
           "the paper's figures.")
    if not allow_other:
        raise DafnyUnavailableError(f"{msg} Install 4.10.0 (below), or pass -o allow_other_dafny=true "
                                    f"to run anyway.\n{DAFNY_HINT}")
    return "WARNING: " + msg


def dafny_version(config: RunConfig) -> tuple[str | None, str]:
    """(Dafny's version, "") when it can run here, else (None, why not)."""
    from veribatch.verifiers.base import ToolNotFoundError

    try:
        return verifier_for(config).version, ""
    except (ToolNotFoundError, FileNotFoundError, ValueError, RuntimeError, OSError) as e:
        return None, str(e)


def budget_s(config: RunConfig) -> float:
    """The wall limit of one `dafny verify` (``-o budget_s``, filled in at plan time)."""
    return float(config.options["budget_s"])


def query_limits(config: RunConfig, wall_s: float | None = None) -> Limits:
    """The limits of one call of the run's verifier: `wall_s` (default: the run's budget)
    and the memory `-o memory_mb` names, else the tool's declared memory."""
    from veribatch.verifiers.result import Limits

    return Limits(wall_s=budget_s(config) if wall_s is None else wall_s,
                  memory_mb=query_memory_mb(config))


def resolve_verify_option(config: RunConfig) -> RunConfig:
    """`verify` = auto → on (Dafny found; its version recorded) or unavailable; on without
    Dafny → `DafnyUnavailableError`; off → the Dafny-free stages only."""
    want = str(config.options.get("verify", "auto"))
    if want not in ("auto", "on", "off", "unavailable"):
        raise ValueError(f"verify={want!r}: expected auto, on or off")
    if want in ("off", "unavailable"):
        return replace(config, verifier_version="")
    version, why = dafny_version(config)
    if version is None:
        if want == "on":
            raise DafnyUnavailableError(f"{why}\n{DAFNY_HINT}")
        return replace(config, verifier_version="", options={**config.options, "verify": "unavailable"})
    warning = check_paper_version(version, _truthy(config.options.get("allow_other_dafny", False)))
    if warning:
        import sys

        print("!" * 78 + f"\n{warning}\n" + "!" * 78, file=sys.stderr)
    return replace(config, verifier_version=version, options={**config.options, "verify": "on"})


def dafny_options(config: RunConfig) -> tuple[str, ...]:
    """The paper protocol's `dafny verify` options: the per-obligation limit and the cores."""
    o = config.options
    return (f"--verification-time-limit:{int(o.get('obligation_time_limit_s', 30))}",
            f"--cores:{int(o.get('cores', 1))}")


def strict_dafny_options(config: RunConfig) -> tuple[str, ...]:
    """The strict protocol's: the paper's and Dafny's contradictory-assumption warnings."""
    return (*dafny_options(config), CONTRADICTORY_FLAG)


def contradiction_check(path: Path, config: RunConfig, verifier: Any, log_dir: Path) -> dict[str, Any]:
    """`dafny verify --warn-contradictory-assumptions` on a program: its verdict and the
    warnings (the strict protocol's vacuity check)."""
    from veribatch.verifiers.base import Query
    from veribatch.verifiers.result import Status

    result = verifier.run(Query((path,), property="dafny-verify", options=strict_dafny_options(config)),
                          query_limits(config), log_dir)
    warnings = list(result.extras.get("warnings") or [])
    return {
        "strict_verify_status": str(result.status),
        "strict_dafny_verified": result.status is Status.TRUE,
        "strict_verify_time_s": result.wall_s,
        "strict_warning_kinds": json.dumps(sorted({w.get("kind", "other") for w in warnings})),
        "contradictions": json.dumps([{"file": w.get("file"), "line": w.get("line"), "message": w.get("message")}
                                      for w in warnings if w.get("kind") == "contradictory"]),
    }


def check_program(path: Path, config: RunConfig, verifier: Any, log_dir: Path) -> dict[str, Any]:
    """Resolve, then (if that succeeded) verify one program file; the record fields."""
    from veribatch.verifiers.base import Query
    from veribatch.verifiers.result import Status

    budget = budget_s(config)
    resolved = verifier.run(Query((path,), property="dafny-resolve"),
                            query_limits(config, min(RESOLVE_LIMIT_S, budget)), log_dir)
    out: dict[str, Any] = {
        "resolve_status": str(resolved.status),
        "resolve_phase": resolved.extras.get("phase"),  # "parse": an ERROR that is a syntax error
        "resolve_time_s": resolved.wall_s,
        "syntax_ok": resolved.status is Status.TRUE,
        "parse_ok": bool(resolved.extras.get("parse_ok", False)) and resolved.status is not Status.ERROR,
        "verify_status": None,
        "verify_time_s": None,
        "dafny_verified": False,
        "dafny_version": resolved.tool_version,
        "budget_s": budget,
        "log_path": resolved.log_path,
    }
    final = resolved
    if out["syntax_ok"]:
        verified = verifier.run(Query((path,), property="dafny-verify", options=dafny_options(config)),
                                query_limits(config), log_dir)
        final = verified
        out.update(verify_status=str(verified.status), verify_time_s=verified.wall_s,
                   dafny_verified=verified.status is Status.TRUE, log_path=verified.log_path,
                   obligations_verified=verified.extras.get("verified"),
                   timeouts=verified.extras.get("timeouts"),
                   out_of_resource=verified.extras.get("out_of_resource"))
    errors = list(final.extras.get("errors") or [])
    warnings = list(final.extras.get("warnings") or []) + (
        list(resolved.extras.get("warnings") or []) if final is not resolved else [])
    primary, modes = classify(errors)
    if not out["dafny_verified"] and primary is None:
        primary = OTHER  # a wall-time kill, a crash: no error line to classify
    out.update(
        dafny_reason=final.reason,
        phase=final.extras.get("phase"),
        n_errors=len(errors),
        errors=json.dumps(errors[:MAX_ERRORS_KEPT]),
        warning_kinds=json.dumps(sorted({w.get("kind", "other") for w in warnings})),
        dafny_failure_mode=None if out["dafny_verified"] else primary,
        dafny_failure_modes=json.dumps(modes),
        total_dafny_time_s=round(float(out["resolve_time_s"] or 0.0) + float(out["verify_time_s"] or 0.0), 4),
    )
    return out
