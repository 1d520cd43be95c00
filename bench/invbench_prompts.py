"""Parse rate of a model's answers on InvBench's shipped sample: ``-o prompt=wonda`` against
our default prompt, with the embedded verifier.

    python bench/invbench_prompts.py OUT_DIR [--model hf:PATH] [--train-s S]

Without ``--model`` it builds the tiny Qwen2 smoke model (`inference.tiny_model`) trained on
count_up.c and nested.c only: wonda's three per-marker requests (JSON answers) and our two
prompts (two-line answers), each answered with the invariant ``0 <= 1``.  It then runs the
12 sample programs under both prompts (local executor, ``budget_s=10``,
``timeout_source=budget``, ``max_tokens`` 64) and prints per prompt: requests, answers,
answers parsed (a candidate came out: parsed/total markers for wonda, parsed/total
programs for ours), the statuses, and the run id.  A tiny model answers junk to prompts it
was not trained on; the figure checks the pipeline and each format's reader, it says
nothing about a real model.  wonda's prompt comes from ``$VERIBATCH_WONDA_PROMPT`` if set
(a folder holding the pinned ``wonda.yaml``), else from its pinned commit online.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

TRAIN = ("count_up.c", "nested.c")
ANSWER = "0 <= 1"


def tiny_model(out: Path, train_s: float) -> Path:
    from veribatch.inference.tiny_model import MANIFEST, build_tiny_qwen2
    from veribatch.tasks.invbench import data, wonda_prompt
    from veribatch.tasks.invbench.markers import mark
    from veribatch.tasks.invbench.prompt import user_prompt

    programs = {i.payload["file"]: i.payload["program"] for i in data.load_sample()}
    wonda = wonda_prompt.load()
    pairs: list[tuple[Any, str]] = []
    for f in TRAIN:
        body = mark(programs[f], filename=f, placement="body")
        for k in body.labels:
            request = [["system", wonda.system], ["user", wonda.user(body.text.rstrip(), f"INVARIANT_MARKER_{k}")]]
            pairs.append((request, "```json\n" + json.dumps({"marker": f"INVARIANT_MARKER_{k}", "content": ANSWER},
                                                            separators=(",", ":")) + "\n```"))
        pairs.append((user_prompt(mark(programs[f], filename=f).text), f"location: INVARIANT_MARKER_1\ninvariant: {ANSWER}"))
    model = build_tiny_qwen2(out / "model", pairs, max_train_s=train_s)
    info = json.loads((model / MANIFEST).read_text())
    print(f"tiny model: {len(pairs)} pairs, learned {info['all_pairs_learned']}, {info['steps']} steps, {info['build_s']} s")
    return model


def run(out: Path, model: str, prompt: str) -> dict[str, Any]:
    from veribatch.aggregate.records import load_run
    from veribatch.launch.run_control import ExecChoice, launch_run, plan_run

    options = ["budget_s=10", "timeout_source=budget"] + (["prompt=wonda"] if prompt == "wonda" else [])
    plan = plan_run("invbench", dataset="sample", model=model, options=options, sampling={"max_tokens": 64})
    done = launch_run(plan, out / f"run-{prompt}", ExecChoice("local", workers=1), progress=False)
    if not done.ok:
        raise SystemExit(f"{prompt}: the run failed: {done}")
    _, stages = load_run(done.rd.root)
    gen, verify = stages["generate"].frame, stages["verify"].frame
    cand = verify[verify["kind"] == "candidate"]
    parsed = int((~cand["status"].isin(["unparsable", "engine_error"])).sum())
    return {"run_id": plan.run_id, "requests": len(gen), "answers": len(cand), "parsed": parsed,
            "statuses": {str(k): int(v) for k, v in cand["status"].value_counts().items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--model", help="a --model spec (default: the tiny model, trained here)")
    ap.add_argument("--train-s", type=float, default=400.0, help="the tiny model's training cap")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    model = args.model or f"hf:{tiny_model(args.out, args.train_s)}"
    results = {prompt: run(args.out, model, prompt) for prompt in ("wonda", "ours")}
    for prompt, r in results.items():
        print(f"{prompt:6} parsed {r['parsed']}/{r['answers']} answers ({r['requests']} requests) "
              f"{r['statuses']}  run {r['run_id']}")
    (args.out / "parse_rate.json").write_text(json.dumps({"model": model, "results": results}, indent=1))


if __name__ == "__main__":
    main()
