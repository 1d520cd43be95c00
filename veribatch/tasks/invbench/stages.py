"""The three stages of an InvBench run: baseline → generate → verify (aggregate is `launch`'s).

- ``baseline`` (cpu): the verifier alone on each program under the budget — verdict, solve
  time (the per-instance timeout of ``verify``) and the invariants the verifier found.
- ``generate`` (gpu, only with a model): one prompt per instance, `n_samples` completions;
  under ``-o prompt=wonda`` one prompt per loop marker (markers at the body start), each
  record carrying its ``marker`` label.
- ``verify`` (cpu): each completion is parsed, validated and, if valid and new, decided by
  d_a ∥ d_b (`tasks.invbench.decision`).  Without a model the candidate is the set of
  verifier invariants of the program, supplied together (§5.4) — the baseline's own
  (``-o verifier_invariants=baseline``) or UAutomizer's from the training set's
  ``invariants.json`` (``=upstream``, the paper's setting) — labelled
  ``arm="verifier-invariant"`` with generation time 0; never presented as model output.

Every query reads the program as the dataset gives it (the original text, which both
verifiers take), so the baseline's time is the time on the benchmark's file and the
lines in a verifier's reasons and invariants are the file's own; d_a/d_b are the
front end's re-print of the instrumented program.

Every per-instance problem (a program the C front end rejects, an unparsable answer, an
invalid predicate, a crashing verifier) becomes a record with a status; only
infrastructure failures escape as exceptions (the shard is then retried).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veribatch.inference.types import Completion, Request, Sampling
from veribatch.tasks.base import (
    Instance,
    InstanceResult,
    Record,
    RunConfig,
    Stage,
    StageContext,
    granted_cpus,
    instance_dirname,
)
from veribatch.tasks.generate import ARM_MODEL, Generate
from veribatch.tasks.invbench.answer import Answer, parse_answer, parse_json_answer
from veribatch.tasks.invbench.decision import CandidateRun, run_candidates
from veribatch.tasks.invbench.instrument import InstrumentationError, instrument_all
from veribatch.tasks.invbench.markers import MarkedProgram, Placement, mark
from veribatch.tasks.invbench.prompt import build_request, build_wonda_requests, prompt_version
from veribatch.tasks.invbench.to_scope import to_scope
from veribatch.tasks.invbench.validation import Valid, validate
from veribatch.tasks.verifier import query_cores, query_memory_mb, verifier_for
from veribatch.verifiers.result import DEFAULT_WALL_S, Status

log = logging.getLogger(__name__)

# The paper gives no limit; its strongest models (o3, gpt-5, gpt-oss-120b) reason before
# answering and their reasoning tokens count against it: 256 cut them off mid-thought.
# 8192 is what the gpt-oss reproduction harness on InvBench (wonda) gives them.
MAX_TOKENS = 8192
ARM_VERIFIER = "verifier-invariant"
ENGINE_ERROR = "engine error"


# Memory and cores per query are the verifier's declared facts (`Tool.memory_mb`: UAutomizer's
# 16 GB of InvBench's harness; `Tool.query_cores`: 2 for UAutomizer's JVM and solvers), read
# through `tasks.verifier`; `-o memory_mb` overrides the first.


def _limits(config: RunConfig, wall_s: float) -> Any:
    """The benchmark is wall-clock (§4): no CPU-time cap unless ``-o cpu_limit_s`` asks for one
    (UAutomizer uses 1.0-2.3x as much CPU as wall time; a cap equal to the wall limit would
    stop it at ~60 % of its budget)."""
    from veribatch.verifiers.result import Limits

    cpu = config.options.get("cpu_limit_s")
    return Limits(wall_s=wall_s, cpu_s=math.inf if cpu in (None, "") else float(cpu), memory_mb=query_memory_mb(config))


def _query(path: Path) -> Any:
    from veribatch.verifiers.base import Query

    return Query(files=(path,), property="unreach-call", data_model="ILP32")


def wonda(config: RunConfig) -> bool:
    """``-o prompt=wonda``: wonda's prompt, markers and answers (`prompt`, `wonda_prompt`)."""
    return config.options.get("prompt") == "wonda"


def placement(config: RunConfig) -> Placement:
    """Where markers stand and ψ is checked: wonda's body start, else our loop head."""
    return "body" if wonda(config) else "head"


def _marked(instance: Instance, where: Placement = "head") -> MarkedProgram | str:
    """The program with markers, or the front end's error message."""
    from veribatch.verifiers.cfront import CParseError

    try:
        return mark(instance.payload["program"], filename=instance.payload["file"], placement=where)
    except CParseError as e:
        return str(e)


def _original(instance: Instance) -> str:
    """The program as the dataset gives it: what the baseline verifies and what d_a/d_b are
    instrumented from (both verifiers read SV-COMP files as they are)."""
    return str(instance.payload["program"])


# ---------------------------------------------------------------- baseline


def run_baseline(instances: list[Instance], ctx: StageContext) -> Iterator[InstanceResult]:
    config = ctx.config
    budget = float(config.options["budget_s"])
    verifier = verifier_for(config)
    limits = _limits(config, budget)
    granted = granted_cpus()
    for inst in instances:
        work = ctx.scratch_dir() / "baseline" / instance_dirname(inst.id)
        work.mkdir(parents=True, exist_ok=True)
        program = work / inst.payload["file"]
        program.write_text(_original(inst))
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
            "cpus_needed": query_cores(config),
            "cpus_granted": granted,
            "expected_verdict": expected,
            "verdict_conflict": bool(res.status.decided and expected and str(res.status) != expected),
            # the published label came from a UAutomizer run that checked no specification
            "label_without_specification": "label_without_specification" in (inst.meta.get("quirks") or ""),
            "reference_time_s": inst.meta.get("reference_time_s"),
            "reference_tool": inst.meta.get("reference_tool"),
            "invariants": json.dumps(invariants),
            "n_invariants": len(invariants),
            "log_path": res.log_path,
        }
        if rec["verdict_conflict"]:
            log.warning("%s: %s says %s, the dataset records %s", inst.id, verifier.name, res.status, expected)
        ctx.progress()
        yield InstanceResult(inst.id, [rec])


# ---------------------------------------------------------------- generate


class InvBenchGenerate(Generate):
    """One prompt per program, its loops marked (`markers`); under ``-o prompt=wonda`` one
    per loop marker.  A program the C front end rejects gets a ``program_parse_error``
    record and no request; so does a program without loops under ``prompt=wonda`` (there is
    no marker to ask about: ``no_loop``)."""

    default_max_tokens = MAX_TOKENS

    def request(self, inst: Instance, config: RunConfig, sampling: Sampling,
                upstream: list[Record]) -> Request | list[Request] | Record:
        marked = _marked(inst, placement(config))
        if isinstance(marked, str):
            return {"arm": ARM_MODEL, "status": "program_parse_error", "error": marked,
                    "model": config.model, "sample_index": -1, **({"marker": -1} if wonda(config) else {})}
        if not wonda(config):
            return build_request(inst.id, marked.text, sampling)
        if not marked.labels:
            return {"arm": ARM_MODEL, "status": "no_loop", "error": "the program has no loop to mark",
                    "model": config.model, "sample_index": -1, "marker": -1}
        return build_wonda_requests(inst.id, marked.text, marked.labels, sampling)

    def request_key(self, config: RunConfig) -> tuple[str, ...]:
        return ("marker",) if wonda(config) else ()

    def request_columns(self, inst: Instance, config: RunConfig, request: Request) -> Record:
        if not wonda(config):
            return {}
        return {"marker": int(request.id.rsplit("#marker", 1)[1])}

    def columns(self, inst: Instance, config: RunConfig, completion: Completion) -> Record:
        return {"prompt_template": prompt_version(config.options.get("prompt", "ours"))}


GENERATE = InvBenchGenerate()


# ---------------------------------------------------------------- verify

TIMEOUT_SOURCES = ("baseline", "reference", "budget")


@dataclass
class Candidate:
    """One candidate q before validation: a model completion, or a set of verifier invariants.

    `invariants` holds (loop label, ψ) pairs; a model answer has one, the §5.4 arm a set."""

    index: int
    answer: str
    invariants: list[tuple[int, str]] = field(default_factory=list)
    problem: str | None = None  # why there is no q: the record's reason
    problem_status: str = "unparsable"  # unparsable | engine_error | not_at_loop_head
    dropped: list[str] = field(default_factory=list)  # verifier invariants left out, and why
    pruned: list[str] = field(default_factory=list)  # parts out of scope removed (`to_scope`)
    columns: Record = field(default_factory=dict)  # record columns of its own (wonda: marker, sample)


def _candidates_from_wonda(gen: list[Record], labels: list[int]) -> list[Candidate]:
    """One candidate per (marker, sample): the answer to the request about marker k is read as
    wonda's JSON and, when its marker is k, is a candidate at loop k.  Candidates are
    numbered 0.. in (marker, sample) order (``candidate_index``, what ``duplicate_of`` and
    ``winner_index`` name); each record keeps its marker and sample index."""
    out: list[Candidate] = []
    for i, r in enumerate(sorted(gen, key=lambda r: (int(r.get("marker", -1)), int(r.get("sample_index", 0))))):
        text = r.get("completion_text") or ""
        marker = int(r["marker"]) if r.get("marker") is not None else -1
        cols: Record = {"marker": marker, "sample_index": int(r.get("sample_index", -1)), "candidate_index": i}
        if r.get("status") != "ok":
            why = r.get("completion_error") or r.get("error")
            out.append(Candidate(i, text, problem=f"{ENGINE_ERROR}: {why}", problem_status="engine_error", columns=cols))
            continue
        if marker not in labels:  # not one of this program's loops: the records do not fit it
            out.append(Candidate(i, text, problem=f"marker {marker} is not a loop of the program (loops: {labels})",
                                 columns=cols))
            continue
        parsed = parse_json_answer(text, marker)
        if isinstance(parsed, Answer):
            out.append(Candidate(i, text, [(parsed.label, parsed.predicate)], columns=cols))
        else:
            out.append(Candidate(i, text, problem=parsed.reason, columns=cols))
    return out


def _candidates_from_model(gen: list[Record], labels: list[int]) -> list[Candidate]:
    out: list[Candidate] = []
    for r in sorted(gen, key=lambda r: r.get("sample_index", 0)):
        text = r.get("completion_text") or ""
        if r.get("status") != "ok":
            why = r.get("completion_error") or r.get("error")
            out.append(Candidate(int(r.get("sample_index", -1)), text, problem=f"{ENGINE_ERROR}: {why}",
                                 problem_status="engine_error"))
            continue
        parsed = parse_answer(text, labels)
        if isinstance(parsed, Answer):
            out.append(Candidate(int(r["sample_index"]), text, [(parsed.label, parsed.predicate)]))
        else:
            out.append(Candidate(int(r["sample_index"]), text, problem=parsed.reason))
    return out


def _verifier_invariants(config: RunConfig, base: Record, inst: Instance) -> tuple[str, list[dict[str, Any]]]:
    """(source, invariants) for the §5.4 arm: the baseline's own, or upstream's UAutomizer ones."""
    if config.options.get("verifier_invariants", "baseline") == "upstream":
        return "upstream", list(json.loads(inst.meta.get("reference_invariants") or "[]"))
    return "baseline", list(json.loads(base.get("invariants") or "[]"))


def _candidate_from_verifier(invariants: list[dict[str, Any]], marked: MarkedProgram) -> Candidate:
    """All of a program's loop invariants as ONE candidate, supplied together (§5.4).

    An invariant is placed at its ``loop`` when the verifier named one (the embedded z3),
    else at the loop whose keyword is on its ``line`` in the original program (UAutomizer's
    results and InvBench's ``invariants.json`` give lines).  Entries at no loop head
    (Ultimate also reports function entries) are left out with the reason."""
    by_line = {line: label for label, line in marked.lines.items()}
    cand = Candidate(0, json.dumps(invariants, sort_keys=True))
    for inv in invariants:
        loop = inv.get("loop")
        if loop is None and inv.get("line") is not None:
            loop = by_line.get(int(inv["line"]))
        if loop not in marked.labels:
            where = f"loop {inv['loop']}" if inv.get("loop") is not None else f"line {inv.get('line')}"
            cand.dropped.append(f"{where}: not a loop head of the program")
            continue
        # Ultimate's names out of scope at the loop head (`cond`, SSA names, quantifiers over
        # them) are dead there: removed, which keeps ψ an invariant (`to_scope`)
        scoped = to_scope(str(inv.get("invariant", "")), marked.scopes[int(loop)])
        cand.pruned.extend(f"loop {loop}: {part}" for part in scoped.removed)
        if scoped.predicate is None:
            cand.dropped.append(f"loop {loop}: nothing left in scope at the loop head")
            continue
        cand.invariants.append((int(loop), scoped.predicate))
    if not cand.invariants:
        cand.problem, cand.problem_status = "no invariant at a loop head: " + "; ".join(cand.dropped), "not_at_loop_head"
    return cand


def _decision_timeout(config: RunConfig, base: Record, inst: Instance) -> tuple[float, str]:
    """The decision timeout of an instance and where it came from.

    The paper's is "the problem's original solving time by UAutomizer" (§4):
    ``timeout_source=reference`` (upstream's timing.json).  The default, ``baseline``, is this
    run's own baseline solve time, which is the same quantity measured on the user's
    hardware and verifier; an unsolved baseline (or a missing reference) falls back to the
    budget, labelled ``budget-fallback``."""
    budget = float(config.options["budget_s"])
    source = config.options.get("timeout_source", "baseline")
    if source == "baseline" and base.get("solved"):
        return float(base["baseline_time_s"]), "baseline"
    if source == "reference" and inst.meta.get("reference_time_s") is not None:
        return float(inst.meta["reference_time_s"]), "reference"
    return budget, "budget" if source == "budget" else "budget-fallback"


def _speedup_numerator(timeout_source: str, base: Record, inst: Instance) -> tuple[float | None, str]:
    """The speedup's baseline time, from the source the decision timeout came from: the
    published time under ``reference``, else this run's baseline (None when unsolved)."""
    if timeout_source == "reference":
        return float(inst.meta["reference_time_s"]), "reference"
    return (float(base["baseline_time_s"]) if base.get("solved") else None), "baseline"


def _status_of(res: Any) -> str | None:
    if res is None:
        return None
    return "CANCELLED" if res.termination_reason == "cancelled" else str(res.status)


def _validated(cand: Candidate, marked: MarkedProgram, rec: Record) -> list[tuple[int, str]] | None:
    """The canonical (loop, ψ) pairs of a candidate, or None (the record says why).

    A model answer is invalid as soon as its ψ is; from a verifier set only the invalid
    members are left out (each is an invariant on its own: a subset stays correct)."""
    valid: list[tuple[int, str]] = []
    problems: list[str] = []
    kind = ""
    for label, predicate in cand.invariants:
        checked = validate(predicate, marked.scopes[label])
        if isinstance(checked, Valid):
            valid.append((label, checked.canonical))
        else:
            kind = kind or checked.kind
            problems.append(f"loop {label}: {checked.reason}")
    if len(cand.invariants) == 1 and not valid:
        rec.update(status=f"invalid_{kind}", reason=problems[0].split(": ", 1)[1])
        return None
    cand.dropped.extend(problems)
    if not valid:
        rec.update(status=f"invalid_{kind}", reason="; ".join(cand.dropped))
        return None
    return valid


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
    where = placement(config)
    marked = _marked(inst, where)
    if isinstance(marked, str):
        return [{**head, "status": "program_parse_error", "error": marked}]
    if config.model:
        if not gen:
            return [{**head, "status": "generation_missing"}]
        if wonda(config) and not marked.labels:
            return [{**head, "status": "no_loop", "error": "the program has no loop to mark"}]
        raw = (_candidates_from_wonda if wonda(config) else _candidates_from_model)(gen, marked.labels)
        # each request's own generation time (inference.types.Completion.latency_s); with N
        # samples the candidates exist once the request's last sample is done
        generation_time = max(float(r.get("generation_time_s") or 0.0) for r in gen)
    else:
        source, invariants = _verifier_invariants(config, base, inst)
        head["invariant_source"] = source
        # no invariants (an unsafe program, a proof by complete unrolling): no candidate at all
        raw = [_candidate_from_verifier(invariants, marked)] if invariants else []
        generation_time = 0.0  # the verifier's own invariants cost no generation (see docs)
    timeout, timeout_source = _decision_timeout(config, base, inst)
    head.update(generation_time_s=generation_time, timeout_s=timeout, timeout_source=timeout_source,
                n_candidates=len(raw))

    work = ctx.scratch_dir() / "verify" / instance_dirname(inst.id)
    work.mkdir(parents=True, exist_ok=True)
    program = _original(inst)
    cand_recs: list[Record] = []
    runs: list[CandidateRun] = []
    by_run: dict[int, Record] = {}
    seen: dict[tuple[tuple[int, str], ...], int] = {}
    for cand in raw:
        rec: Record = {"kind": "candidate", "arm": arm, "split": inst.split, "model": head["model"],
                       "sample_index": cand.index, "answer": cand.answer[:4000], **cand.columns}
        cand_recs.append(rec)
        if cand.problem is not None:
            rec.update(status=cand.problem_status, reason=cand.problem)
            continue
        if len(cand.invariants) == 1:
            rec.update(label=cand.invariants[0][0], predicate=cand.invariants[0][1])
        valid = _validated(cand, marked, rec)
        rec.update(n_invariants=len(cand.invariants), n_dropped=len(cand.dropped), n_pruned=len(cand.pruned))
        if cand.pruned:
            rec["pruned"] = "; ".join(cand.pruned)
        if cand.dropped and "reason" not in rec:
            rec["reason"] = "left out: " + "; ".join(cand.dropped)
        if valid is None:
            continue
        rec["labels"] = ",".join(str(label) for label, _ in valid)
        rec["canonical"] = valid[0][1] if len(valid) == 1 else json.dumps(valid)
        key = tuple(sorted(valid))
        if key in seen:
            rec.update(status="duplicate", duplicate_of=seen[key])
            continue
        seen[key] = cand.index
        try:
            progs = instrument_all(program, valid, filename=inst.payload["file"], placement=where)
        except InstrumentationError as e:
            rec.update(status="instrumentation_error", reason=str(e))
            continue
        pa, pb = work / f"cand{cand.index}_check.c", work / f"cand{cand.index}_use.c"
        pa.write_text(progs.check_invariant)
        pb.write_text(progs.use_invariant)
        run = CandidateRun(index=cand.index, program_a=pa, program_b=pb)
        runs.append(run)
        by_run[cand.index] = rec
    head["n_valid"] = len(runs)
    # d_a ∥ d_b as the paper ran them needs a core set per query, as many as the baseline
    # had; with fewer (a laptop, the local executor's cap, N=16 on a 32-CPU shard) only as
    # many queries run at once as the shard has core sets for — at least one — so that each
    # has about the baseline's CPUs, not all of the shard's (`decision._run_sequentially`)
    cores = query_cores(config)
    needed = 2 * len(runs) * cores
    granted = granted_cpus()
    sequential = bool(runs) and granted < needed
    slots = max(1, granted // cores)
    head.update(cpus_needed=needed, cpus_granted=granted, cpus_per_query=cores,
                schedule="sequential" if sequential else "parallel",
                queries_at_once=min(slots, 2 * len(runs)) if sequential else 2 * len(runs))
    if runs:
        run_candidates(verifier, runs, _limits(config, timeout), work, make_query=_query,
                       sequential=sequential, slots=slots)
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
            d_a_after_decision=run.d_a_after_decision,
            decision=run.decision,
            rule=run.rule,
            decision_time_s=run.decision_time_s,
        )
        if run.decision in ("TRUE", "FALSE") and (
            winner is None or (run.decision_time_s or 0.0) < (winner.decision_time_s or 0.0)
        ):
            winner = run  # the fastest conclusive candidate
    # §4 "% correct invariant": some candidate's ψ proved invariant within the timeout,
    # whichever rule decided and whichever candidate won (d_a is settled, see decision.py)
    head["correct_invariant"] = any(r.status_a == Status.TRUE for r in runs)
    if not runs:
        head.update(status="no_valid_candidate", decision=None, speedup=None)
        return [head, *cand_recs]
    decided = winner is not None
    # Undecided: every candidate ran to its end, so the instance took as long as the slowest.
    chosen = winner or max(runs, key=lambda r: r.decision_time_s or 0.0)
    total = generation_time + float(chosen.decision_time_s or 0.0)
    # §4: speedup = baseline time / (this instance's generation time + its decision time).
    # The baseline time comes from where the decision timeout came from: with
    # timeout_source=reference both are the published UAutomizer time (queries cut at one
    # machine's time are not compared with another's); this run's own baseline is kept beside
    numerator, numerator_source = _speedup_numerator(timeout_source, base, inst)
    speedup = numerator / total if decided and numerator is not None and total > 0 else None
    own = baseline_time / total if decided and head["baseline_solved"] and total > 0 else None
    head.update(speedup_baseline_source=numerator_source, speedup_vs_run_baseline=own)
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
    budget = float(config.options.get("budget_s", DEFAULT_WALL_S))
    n = int(config.options.get("n_samples", 1)) if config.model else 1
    query_gb = max(1, math.ceil(query_memory_mb(config) / 1024))
    cores = query_cores(config)
    stages = [Stage("baseline", "cpu", run_baseline, cpus_per_task=cores, mem_gb=query_gb,
                    seconds_per_instance=budget, verdict_column="status",
                    time_column="baseline_time_s", time_limit_column="budget_s")]
    needs: tuple[str, ...] = ("baseline",)
    if config.model:
        stages.append(GENERATE.stage(config))
        needs = ("baseline", "generate")
    stages.append(Stage("verify", "cpu", run_verify, needs=needs,
                        cpus_per_task=min(2 * n * cores, 32),
                        mem_gb=min(2 * n * query_gb, 64), seconds_per_instance=budget,
                        verdict_column="decision", time_column="total_time_s",
                        time_limit_column="timeout_s", record_filter={"kind": "instance"}))
    return stages
