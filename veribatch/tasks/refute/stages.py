"""The stages of a REFUTE run (aggregate is `launch`'s):

- ``generate`` (gpu; model runs of every strategy but agentic): one prompt per problem,
  `n_samples` completions, with per-request generation times;
- ``agent`` (gpu; agentic): the multi-turn conversations with sandboxed code execution
  (`tasks.refute.agent`), transcripts in the run directory;
- ``judge`` (cpu): every attempt judged in the sandbox (`verifiers.judge`):
  zero-shot / few-shot / oracle / agentic — run the model's program, judge its input;
  RandSearch / RandSearch-oracle — search with the model's generator against the model's
  brute force / the correct solution, then judge the input found.
  Without a model it runs the reference rows, labelled as what they are:
  ``blind-random`` (§4.1: a random generator written from the statement alone — only the
  sample ships one per problem — run against the correct solution for `filter_s`; a
  problem without one, e.g. all hub data, runs the example fuzzer instead and its row is
  ``fuzzer-random-filter``, never ``blind-random``) and ``trivial-randsearch-oracle`` (the
  oracle RandSearch with the trivial example fuzzer, `tasks.refute.fuzz`, for `search_s`).
  With ``-o filter=true`` (``launch refute filter``) only the blind row runs; with a model,
  the model writes the blind generator from the statement alone.

Every per-attempt problem is a record with a named reason (``no_program``,
``invalid_input``, ``sandbox_refused``...); only infrastructure failures escape.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
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
from veribatch.tasks.generate import Generate, batches, open_run_engine
from veribatch.tasks.refute import answer
from veribatch.tasks.refute.prompt import AGENTIC, messages, template_version
from veribatch.tasks.sampling import sampling_for

if TYPE_CHECKING:
    from veribatch.inference.types import Completion, Request, Sampling

log = logging.getLogger(__name__)

STANDARD = ("zero-shot", "few-shot", "oracle")
SEARCH = ("randsearch", "randsearch-oracle")
ARM_BLIND = "blind-random"
ARM_FUZZ_FILTER = "fuzzer-random-filter"
"""The §4.1 filter's row where the problem has no blind generator: the example fuzzer
(`tasks.refute.fuzz`) searched for `filter_s` — not a generator written from the statement."""
ARM_TRIVIAL = "trivial-randsearch-oracle"
REFERENCE_MODEL = "reference (no model)"


def prompt_strategy(config: RunConfig) -> str:
    return "blind" if config.options.get("filter") else config.strategy


def arms(config: RunConfig) -> list[str]:
    """The arms of a run, in record order.  Without a model the first one is the §4.1 blind
    row, named per problem by `blind_arm` (`ARM_BLIND` or `ARM_FUZZ_FILTER`)."""
    if config.model:
        return [ARM_BLIND if config.options.get("filter") else config.strategy]
    return [ARM_BLIND] if config.options.get("filter") else [ARM_BLIND, ARM_TRIVIAL]


def blind_arm(inst: Instance) -> str:
    return ARM_BLIND if inst.payload.get("x_blind_generator") else ARM_FUZZ_FILTER


# ---------------------------------------------------------------- generate

MAX_TOKENS = 8192
"""A chat model run's default answer budget (`RefuteTask.default_sampling`; reasoning models
get `tasks.refute.REASONING_MAX_TOKENS`).  The harness set no cap for chat models: the
providers' maximum output for the paper's two (Claude 3.5 Sonnet, DeepSeek V3) is 8192
tokens, so this cap binds no answer they could give; 2048 cut RandSearch answers (a brute
force and a generator) short.  The engine interface needs a number."""


class RefuteGenerate(Generate):
    """One prompt per problem in the run's strategy (the §4.1 blind one under ``-o filter``),
    `n_samples` answers; ``truncated`` marks an answer cut at max_tokens."""

    default_max_tokens = MAX_TOKENS
    # the column order REFUTE's generate records have always had (`Generate.layout`)
    layout = ("arm", "strategy", "status", "truncated", "model_spec", "generation_time_s", "prompt_version")

    def request(self, inst: Instance, config: RunConfig, sampling: Sampling,
                upstream: list[Record]) -> Request | Record:
        from veribatch.inference.types import Message, Request

        strategy = prompt_strategy(config)
        return Request(id=f"{inst.id}#{strategy}", sampling=sampling,
                       messages=tuple(Message(m["role"], m["content"])
                                      for m in messages(strategy, inst.payload, config.options)))

    def columns(self, inst: Instance, config: RunConfig, completion: Completion) -> Record:
        strategy = prompt_strategy(config)
        return {"strategy": strategy, "truncated": completion.finish_reason == "length",
                "prompt_version": template_version(strategy, config.options)}

    def arm(self, config: RunConfig) -> str:
        return arms(config)[0]

    def seconds_per_instance(self, config: RunConfig) -> float:
        return 60.0 * int(config.options.get("n_samples", 1))


GENERATE = RefuteGenerate()


# ---------------------------------------------------------------- agent


def run_agent(instances: list[Instance], ctx: StageContext) -> Iterator[InstanceResult]:
    from veribatch.tasks.refute.agent import run_conversations
    from veribatch.tasks.refute.problem import judge_limits, sandbox
    from veribatch.verifiers.judge import SandboxUnavailable

    config = ctx.config
    assert config.model is not None
    try:
        box = sandbox(config)
    except SandboxUnavailable as e:
        for inst in instances:
            ctx.progress()
            yield InstanceResult(inst.id, [{"arm": config.strategy, "strategy": config.strategy, "sample_index": -1,
                                            "status": "sandbox_refused", "error": str(e)}])
        return
    batch = max(1, int(config.options.get("generate_batch", 16)) // max(1, int(config.options.get("n_samples", 1))))
    with open_run_engine(ctx) as engine:
        for chunk in batches(instances, batch):
            recs = run_conversations(chunk, config, engine, sampling_for(config, MAX_TOKENS), run_dir=ctx.run_dir,
                                     scratch=ctx.scratch_dir(), box=box, limits=judge_limits(config),
                                     cache=None)
            for inst in chunk:
                ctx.progress()
                yield InstanceResult(inst.id, recs[inst.id])


# ---------------------------------------------------------------- judge


def _base(inst: Instance, config: RunConfig, arm: str) -> Record:
    m = inst.meta
    return {"kind": "attempt", "arm": arm, "strategy": prompt_strategy(config) if config.model else arm,
            "model": config.model or REFERENCE_MODEL, "split": inst.split,
            "problem_rating": m.get("problem_rating"), "author_rating": m.get("author_rating"),
            "fail_tc": m.get("fail_tc"), "wrong_lang": m.get("wrong_lang")}


def _search_fields(res: Any | None, time_s: float | None) -> Record:
    if res is None:
        return {"search_reason": None, "search_iterations": None, "search_distinct": None,
                "search_invalid_skipped": None, "search_s": None, "search_limit_s": time_s}
    return {"search_reason": res.reason, "search_iterations": res.iterations,
            "search_distinct": res.distinct, "search_invalid_skipped": res.invalid_skipped,
            "search_s": round(res.elapsed_s, 3), "search_limit_s": time_s}


def randsearch_failure(judged: Any, found: bool) -> str | None:
    """The paper's RandSearch failure modes (§4.3): None for a success."""
    if judged.success:
        return None
    if found:
        if judged.reason in ("invalid_input", "validator_timeout", "empty_input"):
            return "invalid_input"
        if judged.reason == "same_output":
            return "wrong_brute_force"
        return "judge_error" if judged.outcome == "error" else judged.reason
    if judged.reason in ("nothing_found", "no_new_inputs"):
        return "nothing_found"
    if judged.reason.startswith("generator_"):
        return "generator_error"
    if judged.reason.startswith("brute_"):
        return "brute_error"
    return judged.reason


def _search_and_judge(sol: Any, generator: Any, reference: Any, *, time_s: float, limits: Any,
                      box: Any, validator: Any | None) -> tuple[Any, Any]:
    from veribatch.tasks.refute.counterexample import judge_input, judgement
    from veribatch.tasks.refute.search import random_search

    res = random_search(sol.wrong, reference, generator, time_s=time_s, limits=limits,
                        cache_dir=None, sandbox=box, validator=validator)
    if res.found is None:
        j = judgement(res.reason if res.reason != "found" else "nothing_found", res.detail)
        j.sandbox, j.sandbox_unsafe = box.kind, box.unsafe
        return res, j
    return res, judge_input(sol, res.found, limits, cache_dir=None, sandbox=box,
                            validated=validator is not None)


def judge_reference(inst: Instance, config: RunConfig, arm: str, sol: Any, work: Path, box: Any,
                    limits: Any) -> Record:
    from veribatch.tasks.refute.fuzz import ExampleFuzzer, seed_for
    from veribatch.tasks.refute.problem import program

    rec = _base(inst, config, arm)
    fuzzer = ExampleFuzzer(inst.payload.get("example_input") or "", seed_for(f"{inst.id}#{arm}"))
    if arm in (ARM_BLIND, ARM_FUZZ_FILTER):
        arm = rec["arm"] = blind_arm(inst)
        time_s = float(config.options["filter_s"])
        blind = inst.payload.get("x_blind_generator")
        gen = program(work, "blind_generator", "python", blind) if blind else fuzzer.draw
        rec["generator_source"] = "dataset blind generator" if blind else "trivial example fuzzer"
    else:
        time_s = float(config.options["search_s"])
        gen = fuzzer.draw
        rec["generator_source"] = "trivial example fuzzer"
    res, j = _search_and_judge(sol, gen, sol.correct, time_s=time_s, limits=limits, box=box,
                               validator=sol.validator)
    rec.update(sample_index=0, answer_outcome="reference", generation_time_s=0.0,
               **_search_fields(res, time_s), **j.to_record(),
               randsearch_failure=randsearch_failure(j, res.found is not None))
    return rec


def judge_model(inst: Instance, config: RunConfig, gen_rec: Record, sol: Any, work: Path, box: Any,
                limits: Any) -> Record:
    from veribatch.tasks.refute.counterexample import judge_generator, judgement
    from veribatch.tasks.refute.problem import program

    strategy = config.strategy
    arm = arms(config)[0]
    k = int(gen_rec.get("sample_index") or 0)
    rec = _base(inst, config, arm)
    rec.update(sample_index=k, generation_time_s=gen_rec.get("generation_time_s"))
    if strategy in AGENTIC and not config.options.get("filter"):
        for key in ("turns", "executions", "resubmissions", "validation_failures", "transcript",
                    "truncated_turns"):
            rec[key] = gen_rec.get(key)
        rec["agent_status"] = gen_rec.get("status")
        code = answer.Code(str(gen_rec.get("answer_outcome")), gen_rec.get("generator_lang"),
                           gen_rec.get("generator_code"))
        if gen_rec.get("status") in ("engine_error", "sandbox_refused"):
            code = answer.Code(str(gen_rec.get("status")), None, None)
        rec["truncated"] = bool(gen_rec.get("truncated"))
        brute = None
    else:
        if gen_rec.get("status") != "ok":
            rec.update(answer_outcome="engine_error", **_search_fields(None, None),
                       **judgement("no_program", f"engine error: {gen_rec.get('completion_error')}").to_record())
            return rec
        text, finish = gen_rec.get("completion_text"), gen_rec.get("finish_reason")
        rec["truncated"] = finish == "length"
        if strategy == "randsearch" and not config.options.get("filter"):
            brute, code = answer.randsearch(text, finish)
            rec["brute_outcome"], rec["brute_lang"] = brute.outcome, brute.lang
        else:
            brute, code = None, answer.program(text, finish)
    rec.update(answer_outcome=code.outcome, generator_lang=code.lang)
    if not code.usable:
        j = judgement("no_program", f"answer outcome: {code.outcome}")
        j.sandbox, j.sandbox_unsafe = box.kind, box.unsafe
        rec.update(**_search_fields(None, None), **j.to_record(),
                   randsearch_failure="no_program" if strategy in SEARCH else None)
        return rec
    tag = f"s{k}"
    gen = program(work, f"generator_{tag}", code.lang or "python", code.code or "")
    if config.options.get("filter"):
        time_s = float(config.options["filter_s"])
        res, j = _search_and_judge(sol, gen, sol.correct, time_s=time_s, limits=limits, box=box,
                                   validator=sol.validator)
        rec.update(**_search_fields(res, time_s), **j.to_record(), generator_source="model",
                   randsearch_failure=randsearch_failure(j, res.found is not None))
        return rec
    if strategy in SEARCH:
        if strategy == "randsearch":
            assert brute is not None
            if not brute.usable:
                j = judgement("no_program", f"brute force: {brute.outcome}")
                j.sandbox, j.sandbox_unsafe = box.kind, box.unsafe
                rec.update(**_search_fields(None, None), **j.to_record(), randsearch_failure="no_program")
                return rec
            reference = program(work, f"brute_{tag}", brute.lang or "python", brute.code or "")
        else:
            reference = sol.correct
        time_s = float(config.options["search_s"])
        validator = sol.validator if config.options.get("search_validate") else None
        res, j = _search_and_judge(sol, gen, reference, time_s=time_s, limits=limits, box=box,
                                   validator=validator)
        rec.update(**_search_fields(res, time_s), **j.to_record(),
                   randsearch_failure=randsearch_failure(j, res.found is not None))
        return rec
    j = judge_generator(sol, gen, limits, cache_dir=None, sandbox=box)
    rec.update(**_search_fields(None, None), **j.to_record(), randsearch_failure=None)
    return rec


def _refused(inst: Instance, config: RunConfig, arm: str, why: str) -> Record:
    from veribatch.tasks.refute.counterexample import judgement

    rec = _base(inst, config, arm)
    rec.update(sample_index=0, answer_outcome=None, **_search_fields(None, None),
               **judgement("sandbox_refused", why).to_record())
    return rec


def run_judge(instances: list[Instance], ctx: StageContext) -> Iterator[InstanceResult]:
    from veribatch.tasks.refute.problem import judge_limits, sandbox, solutions
    from veribatch.verifiers.judge import SandboxUnavailable

    config = ctx.config
    upstream: dict[str, list[Record]] = {}
    if config.model:
        upstream = ctx.upstream("agent" if needs_agent(config) else "generate")
    limits = judge_limits(config)
    try:
        box = sandbox(config)
        refused = None
    except SandboxUnavailable as e:
        box, refused = None, str(e)
    flags: Record = {"cxx_flags": None, "cxx_flags_note": None, "sandbox_note": None}
    if box is not None:
        from veribatch.verifiers.judge import effective_flags

        used, note = effective_flags(box)
        flags = {"cxx_flags": " ".join(used), "cxx_flags_note": note,
                 "sandbox_note": "; ".join(box.notes) or None}  # e.g. why kind "none" ran
    for inst in instances:
        work = ctx.scratch_dir() / "judge" / instance_dirname(inst.id)
        recs: list[Record] = []
        if refused is not None:
            recs = [_refused(inst, config, blind_arm(inst) if arm == ARM_BLIND and not config.model
                             else arm, refused) for arm in arms(config)]
        elif config.model:
            sol = solutions(inst, work)
            gens = upstream.get(inst.id) or []
            if not gens:
                from veribatch.tasks.refute.counterexample import judgement

                rec = _base(inst, config, arms(config)[0])
                rec.update(sample_index=-1, answer_outcome="generation_missing",
                           **_search_fields(None, None),
                           **judgement("no_program", "no generate record for this instance").to_record())
                recs.append(rec)
            for g in sorted(gens, key=lambda r: int(r.get("sample_index") or 0)):
                t0 = time.monotonic()
                rec = judge_model(inst, config, g, sol, work, box, limits)
                recs.append({**rec, "attempt_s": round(time.monotonic() - t0, 3)})
        else:
            sol = solutions(inst, work)
            for arm in arms(config):
                t0 = time.monotonic()
                rec = judge_reference(inst, config, arm, sol, work, box, limits)
                recs.append({**rec, "attempt_s": round(time.monotonic() - t0, 3)})
        ctx.progress()
        yield InstanceResult(inst.id, [{**r, **flags} for r in recs])


def needs_agent(config: RunConfig) -> bool:
    return config.model is not None and config.strategy in AGENTIC and not config.options.get("filter")


def build_stages(config: RunConfig) -> list[Stage]:
    o = config.options
    search_s, filter_s = float(o["search_s"]), float(o["filter_s"])
    run_s, gen_s = float(o["run_s"]), float(o["generator_s"])
    n = int(o.get("n_samples", 1)) if config.model else len(arms(config))
    judge_key = ("arm", "sample_index")
    stages: list[Stage] = []
    needs: tuple[str, ...] = ()
    if config.model and needs_agent(config):
        per_conv = int(o["max_executions"]) * float(o["execution_s"]) + 6 * (gen_s + run_s) + 120
        stages.append(Stage("agent", "gpu", run_agent, gpus_per_task=1, cpus_per_task=2, mem_gb=4,
                            seconds_per_instance=n * per_conv, verdict_column="status",
                            time_column="generation_time_s", record_key=("sample_index",)))
        needs = ("agent",)
    elif config.model:
        stages.append(GENERATE.stage(config))
        needs = ("generate",)
    if config.options.get("filter"):
        per = filter_s + 4 * run_s
    elif not config.model:
        per = filter_s + search_s + 8 * run_s
    elif config.strategy in SEARCH:
        per = search_s + (5 + 2) * run_s
    else:
        per = gen_s + (5 + 2) * run_s
    cpus = 2 if (not config.model or config.strategy in SEARCH or o.get("filter")) else 1
    stages.append(Stage("judge", "cpu", run_judge, needs=needs, cpus_per_task=cpus,
                        mem_gb=max(2, int(o["memory_mb"]) * 2 // 1024 + 1),
                        seconds_per_instance=n * per + 30, verdict_column="outcome",
                        time_column="attempt_s", record_key=judge_key))
    return stages
