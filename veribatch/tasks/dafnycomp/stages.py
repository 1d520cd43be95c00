"""The stages of a DafnyComp run: strip → [generate] → check → [verify] (aggregate is launch's).

- ``strip`` (cpu): the original program without its contract clauses (§3.3), with counts
  (declarations, clauses removed by keyword) and two self-checks per program (stripping is
  stable; every body is unchanged).
- ``generate`` (gpu, only with a model): the prompt on the stripped program, `n_samples`
  completions per instance.
- ``check`` (cpu, no Dafny): per candidate, the program extracted from the answer
  (`answer`) and the integrity check against the original (`integrity`).  Without a model
  the candidates are the two reference arms — ``original`` (the specs re-inserted: the
  benchmark's own program, which must verify) and ``stripped`` (no specs at all: shows what
  verifies without them; its integrity is ``trivial_spec`` by definition) — never presented
  as model output.
- ``verify`` (cpu, Dafny 4.10; only when Dafny can run, see `checker`): resolve, then
  verify each extracted program; syntax-correct and verified need the integrity check too.

Every per-candidate problem (an engine error, no program in the answer, a cheat, a program
Dafny rejects, a crash of Dafny) is a record with a status; only infrastructure failures
escape as exceptions (the shard is then retried by `launch resume`).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from veribatch.tasks.base import (
    Instance,
    InstanceResult,
    Record,
    RunConfig,
    Stage,
    StageContext,
    instance_dirname,
)
from veribatch.tasks.dafnycomp.answer import LANGUAGES, extract_program
from veribatch.tasks.dafnycomp.integrity import check as integrity_check
from veribatch.tasks.dafnycomp.strip import strip, strip_specs
from veribatch.tasks.dafnycomp.strip_reform import REFORM_KEYWORDS, strip_reform
from veribatch.tasks.dafnycomp.syntax import DafnySyntaxError, declarations
from veribatch.tasks.extract import Extraction, extract_code
from veribatch.tasks.generate import ARM_MODEL, Generate

if TYPE_CHECKING:
    from veribatch.inference.types import Completion, Request, Sampling

ARM_ORIGINAL = "original"
ARM_STRIPPED = "stripped"
REFERENCE_ARMS = (ARM_ORIGINAL, ARM_STRIPPED)
MAX_DETAIL = 4000
PROGRAM_FILE = "program.dfy"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _index(rec: Record) -> int:
    """A record's sample index (-1: an instance-level record; None reads as -1)."""
    v = rec.get("sample_index")
    return -1 if v is None else int(v)


def _base(inst: Instance) -> Record:
    return {"split": inst.split, "program": inst.payload["name"],
            "chain_length": inst.meta.get("chain_length")}


# ---------------------------------------------------------------- strip


def strip_mode(config: RunConfig) -> str:
    """`contracts` (§3.3, the default; absent from the options so default run ids stay) or
    `reform` (ReForm's scripts' line-based stripping, `strip_reform`)."""
    return str(config.options.get("strip", "contracts"))


def strip_record(inst: Instance, mode: str = "contracts") -> Record:
    if mode == "reform":
        return _reform_strip_record(inst)
    program = inst.payload["program"]
    rec: Record = {**_base(inst), "original_sha256": _sha(program)}
    try:
        result = strip_specs(program)
    except DafnySyntaxError as e:
        return {**rec, "status": "strip_error", "error": str(e)}
    bodies = [program[a:b] for d in declarations(program) if d.body for a, b in [d.body]]
    kept = [result.text[a:b] for d in declarations(result.text) if d.body for a, b in [d.body]]
    stable = strip(result.text) == result.text
    rec.update(
        status="ok" if stable and bodies == kept else "strip_mismatch",
        stripped=result.text,
        stripped_sha256=_sha(result.text),
        declarations=result.declarations,
        methods=result.kinds["method"],
        functions=result.kinds["function"] + result.kinds["predicate"],
        lemmas=result.kinds["lemma"],
        clauses_removed=result.clauses_removed,
        **{f"removed_{k}": result.removed[k] for k in ("requires", "ensures", "reads", "modifies", "decreases")},
        stable=stable,
        bodies_preserved=bodies == kept,
    )
    return rec


def _reform_strip_record(inst: Instance) -> Record:
    """The ReForm-style strip: bodies lose their invariants and asserts by design, so only
    stability (stripping again changes nothing) is required; `removed_<keyword>` counts the
    lines dropped per first word, `removed_comment` the comments."""
    program = inst.payload["program"]
    result = strip_reform(program)
    stable = strip_reform(result.text).text == result.text
    return {
        **_base(inst), "original_sha256": _sha(program),
        "status": "ok" if stable else "strip_mismatch",
        "strip": "reform",
        "stripped": result.text,
        "stripped_sha256": _sha(result.text),
        "declarations": result.declarations,
        "methods": result.kinds["method"],
        "functions": result.kinds["function"] + result.kinds["predicate"],
        "lemmas": result.kinds["lemma"],
        "clauses_removed": sum(result.removed[k] for k in REFORM_KEYWORDS),
        **{f"removed_{k}": result.removed[k] for k in (*REFORM_KEYWORDS, "comment")},
        "stable": stable,
        "bodies_preserved": False,
    }


def run_strip(instances: list[Instance], ctx: StageContext) -> Iterator[InstanceResult]:
    mode = strip_mode(ctx.config)
    for inst in instances:
        rec = strip_record(inst, mode)
        ctx.progress()
        yield InstanceResult(inst.id, [rec])


# ---------------------------------------------------------------- generate

MAX_TOKENS = 8192  # a model run's default answer budget (`DafnyCompTask.default_sampling`)


class DafnyCompGenerate(Generate):
    """The prompt on the stripped program (the ``strip`` stage's); an instance whose strip
    record is missing or not ``ok`` gets a record with that status and no request."""

    default_max_tokens = MAX_TOKENS
    reads = "strip"
    # the column order DafnyComp's generate records have always had (`Generate.layout`)
    layout = ("split", "program", "chain_length", "arm", "model_spec", "status", "generation_time_s",
              "prompt_template")

    def request(self, inst: Instance, config: RunConfig, sampling: Sampling,
                upstream: list[Record]) -> Request | Record:
        from veribatch.tasks.dafnycomp.prompt import build_request

        rec = (upstream or [None])[0]
        if rec is None or rec.get("status") != "ok":
            return {**_base(inst), "arm": ARM_MODEL, "model_spec": config.model, "sample_index": -1,
                    "status": "strip_missing" if rec is None else str(rec["status"])}
        return build_request(inst.id, rec["stripped"], sampling, strip_mode(config))

    def columns(self, inst: Instance, config: RunConfig, completion: Completion) -> Record:
        from veribatch.tasks.dafnycomp.prompt import template_hash

        return {**_base(inst), "prompt_template": template_hash(strip_mode(config))}

    def seconds_per_instance(self, config: RunConfig) -> float:
        return 60.0 * int(config.options.get("n_samples", 1))


GENERATE = DafnyCompGenerate()


# ---------------------------------------------------------------- check


def extract_mode(config: RunConfig) -> str:
    """`whole` (the default, absent from the options: the block declaring most of the
    original's declarations, `answer.extract_program`) or `first` (`-o extract=first`)."""
    return str(config.options.get("extract", "whole"))


def extract_first(text: str | None, finish_reason: str | None) -> Extraction:
    """ReForm's scripts' rule (`extract_dafny_code`: the first ```dafny block): the first
    fenced Dafny block, whatever it declares.  Reasoning, bare answers and truncation are
    treated as by default, so only the choice between several blocks differs."""
    return extract_code(text, languages=LANGUAGES, pick="first", finish_reason=finish_reason,
                        bare_ok=True, reasoning=True)


def _candidates(config: RunConfig, strip_rec: Record, program: str,
                gen: list[Record] | None) -> list[dict[str, Any]]:
    """(arm, sample_index, answer text, finish reason, engine error) per candidate."""
    if config.model is None:
        return [{"arm": ARM_ORIGINAL, "sample_index": 0, "text": program, "reference": True},
                {"arm": ARM_STRIPPED, "sample_index": 0, "text": strip_rec["stripped"], "reference": True}]
    out = []
    for r in sorted(gen or [], key=_index):
        out.append({"arm": ARM_MODEL, "sample_index": _index(r),
                    "text": r.get("completion_text"), "finish_reason": r.get("finish_reason"),
                    "engine_error": (r.get("completion_error") or r.get("error") or r.get("status"))
                    if r.get("status") != "ok" else None,
                    "generation_time_s": r.get("generation_time_s")})
    return out


def check_candidates(inst: Instance, config: RunConfig, strip_rec: Record | None,
                     gen: list[Record] | None) -> list[Record]:
    model = config.model or "reference"
    head = {**_base(inst), "model": model, "declarations": (strip_rec or {}).get("declarations")}
    if strip_rec is None or strip_rec.get("status") != "ok":
        why = "strip_missing" if strip_rec is None else str(strip_rec.get("status"))
        return [{**head, "arm": ARM_MODEL if config.model else "reference", "sample_index": -1,
                 "check_status": why, "error": (strip_rec or {}).get("error")}]
    if config.model is not None and not gen:
        return [{**head, "arm": ARM_MODEL, "sample_index": -1, "check_status": "generation_missing"}]
    program = inst.payload["program"]
    names = [d.name for d in declarations(program)]
    out: list[Record] = []
    for cand in _candidates(config, strip_rec, program, gen):
        rec: Record = {**head, "arm": cand["arm"], "sample_index": cand["sample_index"],
                       "generation_time_s": cand.get("generation_time_s", 0.0 if cand.get("reference") else None)}
        if cand.get("engine_error"):
            out.append({**rec, "check_status": "engine_error", "extraction": None,
                        "error": str(cand["engine_error"])[:MAX_DETAIL]})
            continue
        if cand.get("reference"):
            code, extraction = cand["text"], "reference"
        else:
            ex = (extract_first(cand["text"], cand.get("finish_reason")) if extract_mode(config) == "first"
                  else extract_program(cand["text"], cand.get("finish_reason"), names))
            code, extraction = (ex.code if ex.usable else None), ex.outcome
        rec["extraction"] = extraction
        if code is None:
            out.append({**rec, "check_status": "no_program", "answer": (cand["text"] or "")[:MAX_DETAIL]})
            continue
        integ = integrity_check(program, code)
        out.append({**rec, "check_status": "ready", "candidate": code, "candidate_sha256": _sha(code),
                    "integrity": integ.status, "integrity_kinds": json.dumps(list(integ.kinds)),
                    "integrity_notes": json.dumps(list(integ.notes)),
                    "integrity_details": json.dumps(list(integ.details))[:MAX_DETAIL]})
    return out


def run_check(instances: list[Instance], ctx: StageContext) -> Iterator[InstanceResult]:
    config = ctx.config
    strips = ctx.upstream("strip")
    gens = ctx.upstream("generate") if config.model else {}
    for inst in instances:
        srec = (strips.get(inst.id) or [None])[0]
        recs = check_candidates(inst, config, srec, gens.get(inst.id))
        ctx.progress()
        yield InstanceResult(inst.id, recs)


# ---------------------------------------------------------------- verify

_CARRIED = ("split", "program", "chain_length", "model", "arm", "sample_index", "declarations",
            "extraction", "integrity", "integrity_kinds", "integrity_notes", "check_status",
            "generation_time_s", "candidate_sha256")


def outcome_of(integrity: str | None, checked: dict[str, Any]) -> str:
    """One word per candidate: what `launch regress` compares."""
    if integrity == "cheat":
        return "cheat"
    if integrity == "unchecked":
        return "unchecked"
    unreadable = checked["resolve_status"] == "ERROR" and checked.get("resolve_phase") == "parse"
    if (checked["resolve_status"] == "ERROR" and not unreadable) or checked.get("verify_status") == "ERROR":
        return "dafny_error"  # a parse error is ERROR for Dafny, but the model's syntax error here
    if not checked["syntax_ok"]:
        return "syntax_error"
    if checked["dafny_verified"]:
        return "verified"
    return "failed" if checked["verify_status"] == "FALSE" else "undecided"


def _contradictions(program: str, checked: Mapping[str, Any]) -> Counter[str]:
    """Dafny's contradictory-assumption warnings per declaration of `program`."""
    from veribatch.tasks.dafnycomp.strength import declarations_hit

    return declarations_hit(program, PROGRAM_FILE, json.loads(checked.get("contradictions") or "[]"))


class _Original:
    """The original program's own contradictory-assumption warnings (some originals contain
    `assume false`), verified once per instance (cached by content) when a candidate needs
    them."""

    def __init__(self, inst: Instance, ctx: StageContext, verifier: Any) -> None:
        self.inst, self.ctx, self.verifier = inst, ctx, verifier
        self._counts: Counter[str] | None = None

    def contradictions(self) -> Counter[str]:
        from veribatch.tasks.dafnycomp.checker import contradiction_check

        if self._counts is None:
            program = self.inst.payload["program"]
            work = self.ctx.scratch_dir() / "verify" / instance_dirname(self.inst.id) / "original-program"
            work.mkdir(parents=True, exist_ok=True)
            (work / PROGRAM_FILE).write_text(program)
            self._counts = _contradictions(program, contradiction_check(work / PROGRAM_FILE, self.ctx.config,
                                                                        self.verifier, work))
        return self._counts


def _strength(inst: Instance, candidate: str, work: Path, ctx: StageContext, verifier: Any) -> dict[str, Any]:
    """Dafny's verdict on the generated strength lemmas (`strength`)."""
    from veribatch.tasks.dafnycomp.checker import dafny_options, query_limits
    from veribatch.tasks.dafnycomp.strength import STRENGTH_FILE, strength_file, strength_verdict
    from veribatch.verifiers.base import Query

    sf = strength_file(inst.payload["program"], candidate, include=PROGRAM_FILE)
    if not sf.lemmas:
        return {"spec_as_strong": None, "strength_status": "no_lemmas", "strength_failed": "[]"}
    path = work / STRENGTH_FILE
    path.write_text(sf.text)
    result = verifier.run(Query((path,), property="dafny-verify", options=dafny_options(ctx.config)),
                          query_limits(ctx.config), work)
    out = strength_verdict(sf, result, STRENGTH_FILE)
    out["strength_not_compared"] = json.dumps(list(sf.not_compared))
    return out


def verify_candidate(inst: Instance, crec: Record, ctx: StageContext, verifier: Any,
                     original: _Original | None = None) -> Record:
    """Dafny's verdict on one candidate under both protocols: paper (Dafny alone: parses,
    verifies with plain `dafny verify`) and strict (also the integrity check, the same verdict
    with Dafny's contradictory-assumption warnings on and none beyond the original's, and — a
    column of its own — contracts as strong as the original's)."""
    from veribatch.tasks.dafnycomp.checker import check_program, contradiction_check

    rec: Record = {k: crec.get(k) for k in _CARRIED}
    if crec.get("check_status") != "ready":
        return {**rec, "outcome": "no_program", "syntax_ok": False, "parse_ok": False, "dafny_verified": False,
                "syntax_correct": False, "verified": False, "spec_as_strong": False}
    work = ctx.scratch_dir() / "verify" / instance_dirname(inst.id) / f"{crec['arm']}-{crec['sample_index']}"
    work.mkdir(parents=True, exist_ok=True)
    path = work / PROGRAM_FILE  # one name for every candidate: the cache keys on content
    path.write_text(crec["candidate"])
    checked = check_program(path, ctx.config, verifier, work)
    integrity, kinds = crec.get("integrity"), json.loads(crec.get("integrity_kinds") or "[]")
    # the flagged run only where it can change the strict verdict: verified and honest so far
    strict: dict[str, Any] = (contradiction_check(path, ctx.config, verifier, work)
                              if checked["dafny_verified"] and integrity == "ok" else {})
    contra = _contradictions(crec["candidate"], strict)
    if contra and integrity == "ok":
        from veribatch.tasks.dafnycomp.strength import newly_vacuous

        vacuous = newly_vacuous(contra, (original or _Original(inst, ctx, verifier)).contradictions())
        if vacuous:
            integrity, kinds = "cheat", sorted({*kinds, "vacuous_dafny"})
            rec["vacuous_declarations"] = json.dumps(vacuous)
    rec["integrity"], rec["integrity_kinds"] = integrity, json.dumps(kinds)
    honest = integrity == "ok"
    rec.update(checked)
    rec.update(strict)
    rec.update(
        outcome=outcome_of(integrity, checked),
        syntax_correct=bool(checked["syntax_ok"] and honest),
        verified=bool(checked["dafny_verified"] and honest and strict.get("strict_dafny_verified", True)),
        failure_mode=checked["dafny_failure_mode"] if honest else None,
    )
    if rec["verified"] and ctx.config.options.get("strength", True) not in (False, "false", "0", "off"):
        rec.update(_strength(inst, crec["candidate"], work, ctx, verifier))
    rec["spec_as_strong"] = bool(rec["verified"] and rec.get("spec_as_strong"))
    return rec


def run_verify(instances: list[Instance], ctx: StageContext) -> Iterator[InstanceResult]:
    from veribatch.tasks.verifier import verifier_for

    config = ctx.config
    cache = str(config.options.get("cache_dir") or "")
    verifier = verifier_for(config, cache_dir=Path(cache) if cache else ctx.run_dir / "cache" / str(config.verifier))
    checks = ctx.upstream("check")
    for inst in instances:
        crecs = sorted(checks.get(inst.id) or [], key=lambda r: (str(r.get("arm")), _index(r)))
        if not crecs:
            recs = [{**_base(inst), "arm": None, "sample_index": -1, "outcome": "check_missing",
                     "syntax_correct": False, "verified": False}]
        else:
            original = _Original(inst, ctx, verifier)
            recs = [verify_candidate(inst, c, ctx, verifier, original) for c in crecs]
        ctx.progress()
        yield InstanceResult(inst.id, recs)


# ---------------------------------------------------------------- stages


def build_stages(config: RunConfig) -> list[Stage]:
    """Resource floors (a SLURM profile may raise them): Dafny with its solver per candidate,
    one candidate at a time per shard (`cores` threads)."""
    n = int(config.options.get("n_samples", 1)) if config.model else len(REFERENCE_ARMS)
    key = ("arm", "sample_index")
    stages = [Stage("strip", "cpu", run_strip, mem_gb=1, seconds_per_instance=1.0,
                    verdict_column="status")]
    needs: tuple[str, ...] = ("strip",)
    if config.model:
        stages.append(GENERATE.stage(config))
        needs = ("strip", "generate")
    stages.append(Stage("check", "cpu", run_check, needs=needs, mem_gb=1,
                        seconds_per_instance=1.0 * n, verdict_column="integrity", record_key=key))
    if config.options.get("verify") == "on":
        from veribatch.tasks.dafnycomp.checker import budget_s
        from veribatch.tasks.verifier import query_memory_mb

        budget = budget_s(config)
        mem_gb = max(2, math.ceil(query_memory_mb(config) / 1024))
        stages.append(Stage("verify", "cpu", run_verify, needs=("check",),
                            cpus_per_task=int(config.options.get("cores", 1)), mem_gb=mem_gb,
                            seconds_per_instance=(budget + 30.0) * n, verdict_column="outcome",
                            time_column="total_dafny_time_s", time_limit_column="budget_s",
                            record_key=key))
    return stages
