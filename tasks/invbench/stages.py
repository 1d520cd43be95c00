"""The three stages of an InvBench run: baseline → generate → verify (aggregate is `launch`'s).

- ``baseline`` (cpu): the verifier alone on each program under the budget — verdict, solve
  time (the per-instance timeout of ``verify``) and the invariants the verifier found.
- ``generate`` (gpu, only with a model): one prompt per instance, `n_samples` completions.
- ``verify`` (cpu): each completion is parsed, validated and, if valid and new, decided by
  d_a ∥ d_b (`tasks.invbench.decision`).  Without a model the candidates are the
  baseline's own invariants, labelled ``arm="verifier-invariant"`` (§5.4), with generation
  time 0 — they are never presented as model output.

Every per-instance problem (a program the C front end rejects, an unparsable answer, an
invalid predicate, a crashing verifier) becomes a record with a status; only
infrastructure failures escape as exceptions (the shard is then retried).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tasks.base import Instance, InstanceResult, Record, RunConfig, Stage, StageContext
from tasks.invbench.answer import Answer, parse_answer
from tasks.invbench.decision import CandidateRun, run_candidates
from tasks.invbench.instrument import InstrumentationError, instrument
from tasks.invbench.markers import MarkedProgram, mark
from tasks.invbench.prompt import build_request, template_hash
from tasks.invbench.validation import Valid, validate

log = logging.getLogger(__name__)

ARM_MODEL = "model"
ARM_VERIFIER = "verifier-invariant"
ENGINE_ERROR = "engine error"


def _safe_name(instance_id: str) -> str:
    return instance_id.replace("/", "__")


def _limits(config: RunConfig, wall_s: float) -> Any:
    from verifiers.result import Limits

    return Limits(wall_s=wall_s, memory_mb=int(config.options.get("memory_mb", 4096)))


def verifier_for(config: RunConfig) -> Any:
    """The run's verifier (name, runtime and image from the config)."""
    from verifiers.registry import get_verifier

    image = config.options.get("image") or None
    return get_verifier(
        config.verifier,
        runtime=str(config.options.get("runtime", "native")),
        image=Path(image) if image else None,
    )


def _query(path: Path) -> Any:
    from verifiers.base import Query

    return Query(files=(path,), property="unreach-call", data_model="ILP32")


def _marked(instance: Instance) -> MarkedProgram | str:
    """The program with markers, or the front end's error message."""
    from verifiers.cfront import CParseError

    try:
        return mark(instance.payload["program"], filename=instance.payload["file"])
    except CParseError as e:
        return str(e)


def _program_for_tools(instance: Instance) -> str:
    """The program every query of this instance sees: the front end's re-print (so the
    baseline and d_a/d_b differ only by the instrumentation), or the original text."""
    from verifiers import cfront

    try:
        return cfront.to_source(cfront.parse(instance.payload["program"], filename=instance.payload["file"]))
    except cfront.CParseError:
        return instance.payload["program"]


# ---------------------------------------------------------------- baseline


def run_baseline(instances: list[Instance], ctx: StageContext) -> Iterator[InstanceResult]:
    config = ctx.config
    budget = float(config.options["budget_s"])
    verifier = verifier_for(config)
    limits = _limits(config, budget)
    for inst in instances:
        work = ctx.scratch_dir() / "baseline" / _safe_name(inst.id)
        work.mkdir(parents=True, exist_ok=True)
        program = work / inst.payload["file"]
        program.write_text(_program_for_tools(inst))
        res = verifier.run(_query(program), limits, work)
        invariants = res.extras.get("invariants") or []
        expected = inst.meta.get("expected_verdict")
        rec: Record = {
            "arm": "baseline",
            "split": inst.split,
            "verifier": verifier.name,
            "verifier_version": res.tool_version,
            "status": str(res.status),
            "solved": res.status.decided,
            "baseline_time_s": res.wall_s,
            "cpu_s": res.cpu_s,
            "peak_mem_mb": res.peak_mem_mb,
            "termination_reason": res.termination_reason,
            "reason": res.reason,
            "budget_s": budget,
            "expected_verdict": expected,
            "verdict_conflict": bool(res.status.decided and expected and str(res.status) != expected),
            "reference_time_s": inst.meta.get("reference_time_s"),
            "invariants": json.dumps(invariants),
            "n_invariants": len(invariants),
            "log_path": res.log_path,
        }
        if rec["verdict_conflict"]:
            log.warning("%s: %s says %s, the dataset records %s", inst.id, verifier.name, res.status, expected)
        ctx.progress()
        yield InstanceResult(inst.id, [rec])


# ---------------------------------------------------------------- generate


def sampling_for(config: RunConfig) -> Any:
    from inference.types import Sampling

    s = dict(config.sampling)
    n = int(config.options.get("n_samples", 1))
    return Sampling(
        n=n,
        temperature=float(s.get("temperature", 0.0 if n == 1 else 0.7)),
        top_p=float(s.get("top_p", 1.0)),
        max_tokens=int(s.get("max_tokens", 256)),
        seed=int(s.get("seed", 0)),
        stop=tuple(s.get("stop", ())),
    )


def run_generate(instances: list[Instance], ctx: StageContext) -> Iterator[InstanceResult]:
    from inference import completion_to_record, open_engine

    config = ctx.config
    assert config.model is not None
    sampling = sampling_for(config)
    requests, marked_ok, failed = [], [], []
    for inst in instances:
        m = _marked(inst)
        if isinstance(m, str):
            failed.append((inst, m))
        else:
            marked_ok.append(inst)
            requests.append(build_request(inst.id, m.text, sampling))
    for inst, err in failed:
        ctx.progress()
        yield InstanceResult(inst.id, [{"arm": ARM_MODEL, "status": "program_parse_error", "error": err,
                                        "model": config.model, "sample_index": -1}])
    if not requests:
        return
    cache_dir = ctx.run_dir / "cache" / "completions"
    batch = int(config.options.get("generate_batch", 16))
    with open_engine(config.model, cache_dir=cache_dir) as engine:
        for start in range(0, len(requests), batch):
            chunk = requests[start : start + batch]
            answers = engine.generate(chunk)
            for inst, req, comps in zip(marked_ok[start : start + batch], chunk, answers, strict=True):
                # The completion columns are inference's own (`completion_to_record`), so that
                # `replay:RUN` re-reads them from these records, not from a cache.
                recs = [
                    {
                        **completion_to_record(engine, req, c),
                        "arm": ARM_MODEL,
                        "status": "error" if c.error else "ok",
                        "model_spec": config.model,
                        "generation_time_s": c.latency_s,
                        "prompt_template": template_hash(),
                    }
                    for c in comps
                ]
                ctx.progress()
                yield InstanceResult(inst.id, recs)


# ---------------------------------------------------------------- verify


def _candidates_from_model(gen: list[Record], labels: list[int]) -> list[tuple[int, str, Answer | str]]:
    """(sample index, raw text, parsed answer or the reason it is unparsable)."""
    out: list[tuple[int, str, Answer | str]] = []
    for r in sorted(gen, key=lambda r: r.get("sample_index", 0)):
        if r.get("status") != "ok":
            why = r.get("completion_error") or r.get("error")
            out.append((int(r.get("sample_index", -1)), r.get("completion_text") or "", f"{ENGINE_ERROR}: {why}"))
            continue
        text = r["completion_text"]
        parsed = parse_answer(text, labels)
        out.append((int(r["sample_index"]), text, parsed if isinstance(parsed, Answer) else parsed.reason))
    return out


def _candidates_from_verifier(base: Record, labels: list[int]) -> list[tuple[int, str, Answer | str]]:
    out: list[tuple[int, str, Answer | str]] = []
    for i, inv in enumerate(json.loads(base.get("invariants") or "[]")):
        loop = inv.get("loop")
        text = json.dumps(inv, sort_keys=True)
        if loop not in labels:
            out.append((i, text, f"verifier invariant names loop {loop!r}, not one of {labels}"))
        else:
            out.append((i, text, Answer(int(loop), str(inv.get("invariant", "")))))
    return out


def _decision_timeout(config: RunConfig, base: Record, inst: Instance) -> float:
    budget = float(config.options["budget_s"])
    source = config.options.get("timeout_source", "baseline")
    if source == "baseline" and base.get("solved"):
        return float(base["baseline_time_s"])
    if source == "reference" and inst.meta.get("reference_time_s") is not None:
        return float(inst.meta["reference_time_s"])
    return budget


def _status_of(res: Any) -> str | None:
    if res is None:
        return None
    return "CANCELLED" if res.termination_reason == "cancelled" else str(res.status)


def verify_instance(
    inst: Instance, base: Record | None, gen: list[Record] | None, ctx: StageContext, verifier: Any
) -> list[Record]:
    config = ctx.config
    arm = ARM_MODEL if config.model else ARM_VERIFIER
    head: Record = {
        "kind": "instance",
        "arm": arm,
        "split": inst.split,
        "model": config.model or ARM_VERIFIER,
        "n_samples": int(config.options.get("n_samples", 1)) if config.model else 0,
        "expected_verdict": inst.meta.get("expected_verdict"),
    }
    if base is None:
        return [{**head, "status": "baseline_missing"}]
    baseline_time = float(base["baseline_time_s"])
    head.update(
        baseline_status=base["status"],
        baseline_solved=bool(base["solved"]),
        baseline_time_s=baseline_time,
    )
    marked = _marked(inst)
    if isinstance(marked, str):
        return [{**head, "status": "program_parse_error", "error": marked}]
    if config.model:
        if not gen:
            return [{**head, "status": "generation_missing"}]
        raw = _candidates_from_model(gen, marked.labels)
        generation_time = max(float(r.get("generation_time_s") or 0.0) for r in gen)
    else:
        raw = _candidates_from_verifier(base, marked.labels)
        generation_time = 0.0  # the baseline's own invariant costs no generation (see docs)
    timeout = _decision_timeout(config, base, inst)
    head.update(generation_time_s=generation_time, timeout_s=timeout, n_candidates=len(raw))

    work = ctx.scratch_dir() / "verify" / _safe_name(inst.id)
    work.mkdir(parents=True, exist_ok=True)
    program = _program_for_tools(inst)
    cand_recs: list[Record] = []
    runs: list[CandidateRun] = []
    by_run: dict[int, Record] = {}
    seen: dict[tuple[int, str], int] = {}
    for index, text, parsed in raw:
        rec: Record = {"kind": "candidate", "arm": arm, "split": inst.split, "model": head["model"],
                       "sample_index": index, "answer": text[:4000]}
        cand_recs.append(rec)
        if not isinstance(parsed, Answer):
            rec.update(status="engine_error" if parsed.startswith(ENGINE_ERROR) else "unparsable", reason=parsed)
            continue
        rec.update(label=parsed.label, predicate=parsed.predicate)
        checked = validate(parsed.predicate, marked.scopes[parsed.label])
        if not isinstance(checked, Valid):
            rec.update(status=f"invalid_{checked.kind}", reason=checked.reason)
            continue
        rec["canonical"] = checked.canonical
        key = (parsed.label, checked.canonical)
        if key in seen:
            rec.update(status="duplicate", duplicate_of=seen[key])
            continue
        seen[key] = index
        try:
            progs = instrument(program, parsed.label, checked.canonical, filename=inst.payload["file"])
        except InstrumentationError as e:
            rec.update(status="instrumentation_error", reason=str(e))
            continue
        pa, pb = work / f"cand{index}_check.c", work / f"cand{index}_use.c"
        pa.write_text(progs.check_invariant)
        pb.write_text(progs.use_invariant)
        run = CandidateRun(index=index, program_a=pa, program_b=pb)
        runs.append(run)
        by_run[index] = rec
    head["n_valid"] = len(runs)
    if runs:
        run_candidates(verifier, runs, _limits(config, timeout), work, make_query=_query)
    winner: CandidateRun | None = None
    for run in runs:
        rec = by_run[run.index]
        rec.update(
            status="killed" if run.killed else "verified",
            d_a_status=_status_of(run.d_a),
            d_b_status=_status_of(run.d_b),
            d_a_time_s=run.d_a.wall_s if run.d_a else None,
            d_b_time_s=run.d_b.wall_s if run.d_b else None,
            d_a_reason=run.d_a.reason if run.d_a else None,
            d_b_reason=run.d_b.reason if run.d_b else None,
            decision=run.decision,
            rule=run.rule,
            decision_time_s=run.decision_time_s,
        )
        if run.decision in ("TRUE", "FALSE") and (
            winner is None or (run.decision_time_s or 0.0) < (winner.decision_time_s or 0.0)
        ):
            winner = run  # the fastest conclusive candidate
    head["correct_invariant"] = any(r.status_a == "TRUE" for r in runs)
    if not runs:
        head.update(status="no_valid_candidate", decision=None, speedup=None)
        return [head, *cand_recs]
    decided = winner is not None
    # Undecided: every candidate ran to its end, so the instance took as long as the slowest.
    chosen = winner or max(runs, key=lambda r: r.decision_time_s or 0.0)
    total = generation_time + float(chosen.decision_time_s or 0.0)
    speedup = baseline_time / total if decided and head["baseline_solved"] and total > 0 else None
    head.update(
        status="decided" if decided else "undecided",
        decision=chosen.decision if decided else "UNKNOWN",
        rule=chosen.rule,
        winner_index=chosen.index if decided else None,
        decision_time_s=chosen.decision_time_s,
        total_time_s=total,
        speedup=speedup,
        verdict_matches_expected=(chosen.decision == head["expected_verdict"]) if decided else None,
    )
    return [head, *cand_recs]


def run_verify(instances: list[Instance], ctx: StageContext) -> Iterator[InstanceResult]:
    config = ctx.config
    baseline = ctx.upstream("baseline")
    generated = ctx.upstream("generate") if config.model else {}
    verifier = verifier_for(config)
    for inst in instances:
        found = baseline.get(inst.id)
        base = found[0] if found else None
        recs = verify_instance(inst, base, generated.get(inst.id), ctx, verifier)
        ctx.progress()
        yield InstanceResult(inst.id, recs)


def build_stages(config: RunConfig) -> list[Stage]:
    """Stage resources are floors (a SLURM profile may raise them): one verifier process in
    `baseline`, 2·N concurrent queries (d_a ∥ d_b per candidate) in `verify`."""
    budget = float(config.options.get("budget_s", 600.0))
    n = int(config.options.get("n_samples", 1)) if config.model else 1
    query_gb = max(1, math.ceil(int(config.options.get("memory_mb", 4096)) / 1024))
    stages = [Stage("baseline", "cpu", run_baseline, cpus_per_task=1, mem_gb=query_gb,
                    seconds_per_instance=budget, verdict_column="status",
                    time_column="baseline_time_s", time_limit_column="budget_s")]
    needs: tuple[str, ...] = ("baseline",)
    if config.model:
        # One GPU per generate task; a SLURM profile whose gpu partition sets
        # `gpus_per_task: 0` (CPU-only test clusters) overrides it.
        stages.append(Stage("generate", "gpu", run_generate, gpus_per_task=1, cpus_per_task=1,
                            mem_gb=2, seconds_per_instance=30.0, verdict_column="status",
                            time_column="generation_time_s", record_key=("sample_index",)))
        needs = ("baseline", "generate")
    stages.append(Stage("verify", "cpu", run_verify, needs=needs, cpus_per_task=min(2 * n, 32),
                        mem_gb=min(2 * n * query_gb, 64), seconds_per_instance=budget,
                        verdict_column="decision", time_column="total_time_s",
                        time_limit_column="timeout_s", record_filter={"kind": "instance"}))
    return stages
