"""The stages of CE-Bench runs.

Build (dataset = a LaM4Inv source; one instance per program):

- ``collect`` (cpu): normalise the program, re-check every raw candidate and run the OMT
  queries (`counterexamples.collect`): one ``program`` record and one ``counterexample``
  record per deduplicated state.
- ``label`` (cpu): instrument each counterexample and run the verifier under the budget
  (100 s by default): its label and evidence (`label.label_of`).  Resumable per program
  like any stage; the aggregate step turns both stages' records into the dataset.

Evaluate (dataset = a built dataset; one instance per labelled counterexample):

- ``generate`` (gpu, only with a model): one prompt per counterexample in the run's strategy.
- ``judge`` (cpu): the answer parsed to GENUINE/SPURIOUS (or a named reason it cannot be),
  compared with the label; plus the reference rows — the labelling verifier, always-GENUINE
  and always-SPURIOUS — which need no model.

Every per-instance problem (a program the normaliser rejects, a candidate that is not C, a
verifier crash, an unparsable answer) becomes a record with a status; only infrastructure
failures escape as exceptions.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from veribatch.tasks.base import Instance, InstanceResult, Record, RunConfig, Stage, StageContext
from veribatch.tasks.cebench.counterexamples import (
    CATEGORIES,
    PAPER_NAMES,
    collect,
    extremal_usage,
    extremal_variables,
)
from veribatch.tasks.cebench.lam4inv import Candidate
from veribatch.tasks.generate import ARM_MODEL, Generate
from veribatch.tasks.verifier import query_memory_mb, verifier_for

if TYPE_CHECKING:
    from veribatch.inference.types import Completion, Request, Sampling

log = logging.getLogger(__name__)

REFERENCE_ARMS = ("verifier", "always-GENUINE", "always-SPURIOUS")


def _safe(name: str) -> str:
    return name.replace("/", "__")


# ------------------------------------------------------------------ collect


def collect_instance(inst: Instance, config: RunConfig) -> list[Record]:
    from veribatch.tasks.cebench.program import ProgramError, normalise

    p = inst.payload
    file = p["file"]
    t0 = time.monotonic()
    logd = p.get("log") or {}
    skips = [dict(s, kind=s.get("kind", "source")) for s in p.get("skips", [])]
    skips += [dict(s) for s in logd.get("skips", [])]
    head: Record = {
        "kind": "program", "ce_id": "", "program": file, "log_file": p.get("log_file"),
        "status": "ok", "reason": None,
        "n_candidates": len(logd.get("candidates", [])),
        "final_invariant": logd.get("final_invariant"),
        "lam4inv_time_s": logd.get("time_s"), "lam4inv_proposals": logd.get("proposals"),
    }
    if p.get("program") is None or not p.get("log"):
        head.update(status="skipped", reason="; ".join(s["reason"] for s in skips) or "no program or log")
        return [_finish(head, skips, [], t0)]
    try:
        prog = normalise(p["program"], file)
    except ProgramError as e:
        skips.append({"file": file, "line": None, "kind": "program_unsupported", "reason": str(e)})
        head.update(status="skipped", reason=str(e))
        return [_finish(head, skips, [], t0)]
    candidates = [Candidate(c["expr"], int(c["line"])) for c in logd.get("candidates", [])]
    got = collect(prog, candidates, logd.get("final_invariant"), log_file=str(p.get("log_file")),
                  final_line=logd.get("final_line"),
                  timeout_ms=int(float(config.options.get("solver_timeout_s", 60.0)) * 1000),
                  rlimit=int(config.options.get("solver_rlimit", 5_000_000)),
                  inductive_rule=str(config.options.get("inductive_rule", "lam4inv")),
                  precondition=str(config.options.get("precondition", "exact")),
                  omt_variables=str(config.options.get("omt_variables", "visible")))
    skips += [s.to_json() for s in got.skips]
    head.update(precondition=got.precondition if got.precondition is not None else prog.precondition,
                guard=prog.guard, invariant_check=got.invariant_check,
                candidates_checked=got.candidates_checked,
                candidates_failing_consecution=got.candidates_failing_consecution,
                candidates_failing_initiation=got.candidates_failing_initiation,
                variables_json=json.dumps(prog.variables), program_text=prog.text())
    ces: list[Record] = []
    index = dict.fromkeys(CATEGORIES, 0)
    for ce in got.counterexamples:
        k = index[ce.category]
        index[ce.category] += 1
        ces.append({
            "kind": "counterexample", "ce_id": f"{file}/{ce.category}/{k:03d}", "program": file,
            "category": ce.category, "paper_category": PAPER_NAMES[ce.category],
            "state_json": json.dumps(ce.state), "state_c": prog.state_expr(ce.state),
            "origins_json": json.dumps(ce.origins, sort_keys=True), "n_origins": len(ce.origins),
            "bounded_by_type": any(o.get("bounded_by_type") for o in ce.origins),
            "n_vars": len(ce.state), "n_extremal": len(extremal_variables(ce.state, prog.variables)),
            "extremal_usage": extremal_usage(ce.state, prog.variables),
        })
    if not ces and head["status"] == "ok":
        head["status"] = "no_counterexamples"
    return [_finish(head, skips, ces, t0)] + ces


def _finish(head: Record, skips: list[dict[str, Any]], ces: list[Record], t0: float) -> Record:
    for cat in CATEGORIES:
        head[f"n_{cat}"] = sum(1 for c in ces if c["category"] == cat)
    head["n_counterexamples"] = len(ces)
    head["skips_json"] = json.dumps(skips)
    head["n_skips"] = len(skips)
    head["collect_time_s"] = round(time.monotonic() - t0, 3)
    return head


def run_collect(instances: list[Instance], ctx: StageContext) -> Iterator[InstanceResult]:
    for inst in instances:
        recs = collect_instance(inst, ctx.config)
        ctx.progress()
        yield InstanceResult(inst.id, recs)


# ------------------------------------------------------------------ label


def _limits(config: RunConfig) -> Any:
    from veribatch.verifiers.result import Limits

    return Limits(wall_s=float(config.options["budget_s"]), memory_mb=query_memory_mb(config))


def label_instance(inst: Instance, collected: list[Record], ctx: StageContext, verifier: Any) -> list[Record]:
    from veribatch.tasks.cebench.instrument import instrument, prompt_program
    from veribatch.tasks.cebench.label import label_of
    from veribatch.tasks.cebench.program import ProgramError, normalise
    from veribatch.verifiers.base import Query

    config = ctx.config
    file = inst.payload["file"]
    head: Record = {"kind": "program", "ce_id": "", "program": file, "status": "ok"}
    prog_rec = next((r for r in collected if r.get("kind") == "program"), None)
    ces = [r for r in collected if r.get("kind") == "counterexample"]
    if prog_rec is None:
        return [{**head, "status": "collect_missing", "n_counterexamples": 0}]
    if prog_rec.get("status") == "skipped" or not ces:
        return [{**head, "status": str(prog_rec.get("status")), "n_counterexamples": 0}]
    try:
        prog = normalise(inst.payload["program"], file)
    except ProgramError as e:  # collect accepted it: the normaliser changed under a resume
        return [{**head, "status": "program_error", "reason": str(e), "n_counterexamples": len(ces)}]
    work = ctx.scratch_dir() / "label" / _safe(file)
    work.mkdir(parents=True, exist_ok=True)
    limits = _limits(config)
    out: list[Record] = []
    for ce in ces:
        state = json.loads(ce["state_json"])
        ins = instrument(prog, state, ce["category"])
        path = work / (ce["ce_id"].replace("/", "_") + ".c")
        path.write_text(ins.program)
        res = verifier.run(Query(files=(path,), property="unreach-call", data_model="ILP32"), limits, work)
        lab = label_of(res)
        out.append({
            "kind": "counterexample", "ce_id": ce["ce_id"], "program": file, "category": ce["category"],
            "site": ins.site, "label": lab.label, "evidence": lab.evidence, "evidence_json": lab.evidence_json,
            "verifier": verifier.name, "verifier_version": res.tool_version, "verifier_status": str(res.status),
            "verifier_reason": lab.note or res.reason, "termination_reason": res.termination_reason,
            "verifier_time_s": round(res.wall_s, 3), "verifier_cpu_s": round(res.cpu_s, 3),
            "budget_s": limits.wall_s, "instrumented": ins.program,
            "instrumented_sha256": hashlib.sha256(ins.program.encode()).hexdigest(),
            "prompt_program": prompt_program(prog, ce["category"]), "log_path": res.log_path,
        })
    head["n_counterexamples"] = len(out)
    for lab_name in ("GENUINE", "SPURIOUS", "UNKNOWN"):
        head[f"n_{lab_name}"] = sum(1 for r in out if r["label"] == lab_name)
    head["verifier_time_s"] = round(sum(r["verifier_time_s"] for r in out), 3)
    head["budget_s"] = limits.wall_s
    return [head, *out]


def run_label(instances: list[Instance], ctx: StageContext) -> Iterator[InstanceResult]:
    collected = ctx.upstream("collect")
    verifier = verifier_for(ctx.config)
    for inst in instances:
        recs = label_instance(inst, collected.get(inst.id, []), ctx, verifier)
        ctx.progress()
        yield InstanceResult(inst.id, recs)


# ------------------------------------------------------------------ generate


class CEBenchGenerate(Generate):
    """One prompt per counterexample in the run's strategy (greedy, one answer)."""

    # the column order CE-Bench's generate records have always had (`Generate.layout`)
    layout = ("arm", "status", "model_spec", "strategy", "prompt_template", "generation_time_s")

    def max_tokens(self, config: RunConfig) -> int:
        from veribatch.tasks.cebench.prompt import MAX_TOKENS

        return MAX_TOKENS.get(config.strategy, MAX_TOKENS["zero-shot"])

    def request(self, inst: Instance, config: RunConfig, sampling: Sampling,
                upstream: list[Record]) -> Request | Record:
        from veribatch.tasks.cebench.prompt import build_request

        return build_request(inst.id, config.strategy, inst.payload["prompt_program"],
                             json.loads(inst.payload["state_json"]), sampling)

    def columns(self, inst: Instance, config: RunConfig, completion: Completion) -> Record:
        from veribatch.tasks.cebench.prompt import template_hash

        return {"strategy": config.strategy, "prompt_template": template_hash(config.strategy)}


GENERATE = CEBenchGenerate()


# ------------------------------------------------------------------ judge


def judge_instance(inst: Instance, gen: list[Record] | None, config: RunConfig) -> list[Record]:
    from veribatch.tasks.cebench.answer import parse_answer

    truth = str(inst.payload["label"])
    common = {"category": inst.payload["category"], "label": truth, "strategy": config.strategy,
              "uid": inst.payload["uid"], "program": inst.payload["program"]}
    out: list[Record] = []
    if config.model is not None:
        rec: Record = {**common, "arm": ARM_MODEL, "model": config.model}
        if not gen:
            rec.update(outcome="generation_missing", predicted=None, correct=False, time_s=None)
        else:
            g = gen[0]
            parsed = parse_answer(g.get("completion_text"),
                                  engine_error=g.get("completion_error") if g.get("status") != "ok" else None)
            rec.update(outcome=parsed.outcome, predicted=parsed.label, correct=parsed.label == truth,
                       time_s=g.get("generation_time_s"), finish_reason=g.get("finish_reason"),
                       completion_tokens=g.get("completion_tokens"),
                       answer=(g.get("completion_text") or "")[:2000])
        out.append(rec)
    vtime = inst.meta.get("verifier_time_s")
    for arm in REFERENCE_ARMS:
        if arm == "verifier":  # the label is its verdict; its time is the labelling run's
            predicted, t = truth, float(vtime) if vtime is not None else None
        else:
            predicted, t = arm.split("-", 1)[1], 0.0
        out.append({**common, "arm": arm, "model": arm, "strategy": "-",  # no prompt involved
                    "outcome": "ok", "predicted": predicted, "correct": predicted == truth, "time_s": t})
    return out


def run_judge(instances: list[Instance], ctx: StageContext) -> Iterator[InstanceResult]:
    generated = ctx.upstream("generate") if ctx.config.model else {}
    for inst in instances:
        recs = judge_instance(inst, generated.get(inst.id), ctx.config)
        ctx.progress()
        yield InstanceResult(inst.id, recs)


# ------------------------------------------------------------------ stages


def build_stages(config: RunConfig, *, built: bool) -> list[Stage]:
    """`built`: the dataset is a built CE-Bench (evaluate), else a LaM4Inv source (build)."""
    if not built:
        budget = float(config.options["budget_s"])
        mem_gb = max(1, -(-query_memory_mb(config) // 1024))
        return [
            Stage("collect", "cpu", run_collect, cpus_per_task=1, mem_gb=2, seconds_per_instance=60.0,
                  verdict_column="status", time_column="collect_time_s", record_key=("kind", "ce_id")),
            # ~8 counterexamples per program, each up to the budget
            Stage("label", "cpu", run_label, needs=("collect",), cpus_per_task=1, mem_gb=mem_gb,
                  seconds_per_instance=8 * budget, verdict_column="label", time_column="verifier_time_s",
                  time_limit_column="budget_s", record_key=("kind", "ce_id")),
        ]
    stages: list[Stage] = []
    needs: tuple[str, ...] = ()
    if config.model:
        stages.append(GENERATE.stage(config))
        needs = ("generate",)
    stages.append(Stage("judge", "cpu", run_judge, needs=needs, cpus_per_task=1, mem_gb=1,
                        seconds_per_instance=0.1, verdict_column="predicted", time_column="time_s",
                        record_key=("arm",)))
    return stages

