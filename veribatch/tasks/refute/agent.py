"""The agentic strategy (§4.2): a multi-turn conversation with code execution.

The model may run code up to `max_executions` times (each at most `execution_s` seconds,
its output cut to `feedback_chars` characters — the paper's 10, 30 s and 2000), then
submits a program that prints the counterexample.  A submission whose input breaks a
constraint (the validator rejects it, or the program fails) is answered with that
feedback, and the model may resubmit up to `max_resubmissions` (5) times.  The judge stage
judges the last submission; the agent never learns whether the wrong solution fails.

The conversation goes through the engine interface only (`inference.types.Request` with
the whole message history), so `hf:`, `vllm:`, `launch serve` or any OpenAI-compatible
endpoint drives it.  Conversations of a shard advance in lockstep — every active
conversation's next turn is one `generate` batch — and every turn is cached
(`inference.cache`), so a resumed shard replays finished turns instead of asking again.
Every executed program runs in the judge's sandbox.  Each conversation's transcript (all
messages, each execution and its verdict) is written to the run directory.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from veribatch.tasks.base import Instance, RunConfig, instance_dirname
from veribatch.tasks.refute import answer
from veribatch.tasks.refute.prompt import feedback, messages

TRANSCRIPT_VERSION = 1


@dataclass
class Conversation:
    inst: Instance
    sample: int
    messages: list[dict[str, str]]
    work: Path
    executions: int = 0
    resubmissions: int = 0
    validation_failures: int = 0
    turns: int = 0
    truncated_turns: int = 0  # replies cut at max_tokens
    last_truncated: bool = False
    status: str = "running"  # running | submitted | validation_failed | out_of_turns | engine_error
    submission: answer.Code | None = None
    generation_time_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return self.status == "running"


def _cut(text: str, n: int) -> str:
    return text if len(text) <= n else text[:n] + f"\n[... cut at {n} characters]"


def execute(conv: Conversation, act: answer.Action, o: dict[str, Any], box: Any, cache: Path | None) -> str:
    """Run the agent's code in the sandbox; the reply message."""
    from veribatch.tasks.refute.problem import program
    from veribatch.verifiers.judge import CompileError, run_program

    conv.executions += 1
    n = conv.executions
    prog = program(conv.work, f"exec{n}", act.code.lang or "python", act.code.code or "")
    t0 = time.monotonic()
    try:
        run = run_program(prog, (act.stdin or "").encode(), time_s=float(o["execution_s"]),
                          wall_s=float(o["execution_s"]) + 1, memory_mb=int(o["memory_mb"]),
                          cache_dir=cache, output_cap=1 << 20, sandbox=box)
        verdict = str(run.verdict)
        out = run.output + (f"\n[stderr]\n{run.stderr}" if run.stderr.strip() else "")
        what = f"Execution {n}: {verdict}" + (f" ({run.reason})" if run.reason else "") + "."
    except CompileError as e:
        verdict, out, what = "CE", str(e), f"Execution {n}: compile error."
    conv.events.append({"turn": conv.turns, "kind": "execute", "lang": prog.lang,
                        "verdict": verdict, "stdin_bytes": len(act.stdin or ""),
                        "seconds": round(time.monotonic() - t0, 3)})
    left = int(o["max_executions"]) - conv.executions
    return feedback(what, _cut(out, int(o["feedback_chars"])),
                    f"{left} execution(s) left." if left else "No executions left: submit now.")


def check_submission(conv: Conversation, code: answer.Code, o: dict[str, Any], sol: Any,
                     limits: Any, box: Any, cache: Path | None) -> str | None:
    """None when the submission prints a valid input; otherwise the feedback to give."""
    from veribatch.tasks.refute.counterexample import Judgement, run_generator, validate
    from veribatch.tasks.refute.problem import program

    if not code.usable:
        return "No program found in your submission: give one code block (```python or ```cpp)."
    prog = program(conv.work, f"submit{conv.resubmissions + conv.validation_failures + 1}",
                   code.lang or "python", code.code or "")
    out = run_generator(prog, limits, cache_dir=cache, sandbox=box)
    if isinstance(out, Judgement):
        return f"Your program did not print an input ({out.reason}): {_cut(out.detail, int(o['feedback_chars']))}"
    rejected = validate(sol.validator, out, limits, cache_dir=cache, sandbox=box)
    if rejected is not None:
        return (f"The input your program printed breaks a constraint ({rejected.reason}): "
                f"{_cut(rejected.detail, int(o['feedback_chars']))}")
    return None


def _transcript(conv: Conversation, run_dir: Path, folder: Path) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{conv.inst.id.replace('/', '__')}.s{conv.sample}.json"
    body = {"transcript_version": TRANSCRIPT_VERSION, "instance_id": conv.inst.id,
            "sample": conv.sample, "status": conv.status, "turns": conv.turns,
            "executions": conv.executions, "resubmissions": conv.resubmissions,
            "messages": conv.messages, "events": conv.events,
            "submission": asdict(conv.submission) if conv.submission else None}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(body, indent=1))
    tmp.replace(path)
    return str(path.relative_to(run_dir))


def run_conversations(
    instances: Sequence[Instance], config: RunConfig, engine: Any, sampling: Any, *,
    run_dir: Path, scratch: Path, box: Any, limits: Any, cache: Path | None,
) -> dict[str, list[dict[str, Any]]]:
    """Drive every (instance, sample) conversation to its end; records per instance id."""
    from veribatch.inference.types import Message, Request, Sampling
    from veribatch.tasks.refute.problem import solutions

    o = dict(config.options)
    n = int(o.get("n_samples", 1))
    convs: list[Conversation] = []
    sols = {}
    for inst in instances:
        work = scratch / "agent" / instance_dirname(inst.id)
        sols[inst.id] = solutions(inst, work)
        first = messages(config.strategy, inst.payload, o)
        convs += [Conversation(inst, k, [dict(m) for m in first], work / f"s{k}") for k in range(n)]
    max_turns = int(o["max_turns"])
    while any(c.active for c in convs):
        active = [c for c in convs if c.active]
        reqs = [Request(id=f"{c.inst.id}#{config.strategy}#s{c.sample}#t{c.turns}",
                        messages=tuple(Message(m["role"], m["content"]) for m in c.messages),
                        sampling=Sampling(n=1, temperature=sampling.temperature, top_p=sampling.top_p,
                                          max_tokens=sampling.max_tokens, seed=sampling.seed + c.sample,
                                          stop=sampling.stop))
                for c in active]
        batch = int(o.get("generate_batch", 16))
        for start in range(0, len(reqs), batch):
            outs = engine.generate(reqs[start : start + batch])
            for conv, comps in zip(active[start : start + batch], outs, strict=True):
                _advance(conv, comps[0], o, sols[conv.inst.id], limits, box, cache, max_turns)
    records: dict[str, list[dict[str, Any]]] = {}
    for c in convs:
        sub = c.submission
        records.setdefault(c.inst.id, []).append({
            "arm": config.strategy, "strategy": config.strategy, "sample_index": c.sample,
            "status": c.status, "answer_outcome": sub.outcome if sub else "no_submission",
            "generator_lang": sub.lang if sub else None, "generator_code": sub.code if sub else None,
            "turns": c.turns, "executions": c.executions, "resubmissions": c.resubmissions,
            "validation_failures": c.validation_failures,
            "truncated_turns": c.truncated_turns,
            "truncated": c.last_truncated and c.status != "submitted",
            "generation_time_s": round(c.generation_time_s, 6), "prompt_tokens": c.prompt_tokens,
            "completion_tokens": c.completion_tokens, "model_spec": config.model,
            "transcript": _transcript(c, run_dir, scratch / "transcripts"),
        })
    return records


def _advance(conv: Conversation, comp: Any, o: dict[str, Any], sol: Any, limits: Any, box: Any,
             cache: Path | None, max_turns: int) -> None:
    conv.turns += 1
    conv.generation_time_s += float(comp.latency_s or 0.0)
    conv.prompt_tokens += int(comp.prompt_tokens or 0)
    conv.completion_tokens += int(comp.completion_tokens or 0)
    if comp.error:
        conv.status = "engine_error"
        conv.events.append({"turn": conv.turns, "kind": "engine_error", "error": comp.error})
        return
    conv.messages.append({"role": "assistant", "content": comp.text})
    conv.last_truncated = comp.finish_reason == "length"
    conv.truncated_turns += int(conv.last_truncated)
    act = answer.action(comp.text, comp.finish_reason)
    reply: str
    if act.kind == "execute":
        if conv.executions >= int(o["max_executions"]):
            reply = "No executions left. Submit your program now (ACTION: SUBMIT)."
        elif not act.code.usable:
            reply = f"No code to run ({act.code.outcome}): give one ```python or ```cpp block."
        else:
            reply = execute(conv, act, o, box, cache)
    elif act.kind == "submit":
        conv.submission = act.code
        problem = check_submission(conv, act.code, o, sol, limits, box, cache)
        conv.events.append({"turn": conv.turns, "kind": "submit", "accepted": problem is None,
                            "feedback": problem})
        if problem is None:
            conv.status = "submitted"
            return
        conv.validation_failures += 1
        if conv.resubmissions >= int(o["max_resubmissions"]):
            conv.status = "validation_failed"
            return
        conv.resubmissions += 1
        left = int(o["max_resubmissions"]) - conv.resubmissions + 1
        reply = f"{problem}\nFix it and submit again ({left} submission(s) left)."
    else:
        reply = ("Reply with code and end with `ACTION: EXECUTE` to run it, or with the program "
                 "that prints the failing input and `ACTION: SUBMIT`.")
    if conv.turns >= max_turns:
        conv.status = "out_of_turns"
        return
    conv.messages.append({"role": "user", "content": reply})
