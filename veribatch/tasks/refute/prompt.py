"""REFUTE prompts, one template per strategy (``prompts/*.txt``, written for veribatch).

They follow the paper's setups (§4.2, §4.3, App. A): the problem as the harness formats it
(statement, limits, input/output format, example, note), the wrong code, and per strategy
the correct code (oracle, RandSearch-oracle), three solved demos with rationales
(few-shot), the code-execution protocol (agentic), or a brute force + generator request
(RandSearch).  Two deliberate differences from the authors' templates: answers are fenced
code blocks (read by the shared `tasks.extract`) instead of XML, and RandSearch-oracle shows
the wrong and the correct code, as the paper describes (the harness's template sent the
statement only).

Everything goes in one user message: some chat templates reject a system role, and every
OpenAI-compatible server accepts a user turn.  `template_version(strategy)` hashes the
files a strategy uses; it is part of the run identity (`Task.versions`).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from string import Template
from typing import Any

from veribatch.tasks.refute.data import parse_lang

PROMPTS = Path(__file__).resolve().parent / "prompts"
STRATEGY_FILES: dict[str, tuple[str, ...]] = {
    "zero-shot": ("zero_shot.txt", "problem.txt", "answer_standard.txt"),
    "few-shot": ("few_shot.txt", "problem.txt", "answer_standard.txt", "demo.txt", "demos.json"),
    "oracle": ("oracle.txt", "problem.txt", "answer_standard.txt"),
    "agentic": ("agentic.txt", "problem.txt", "agentic_feedback.txt"),
    "randsearch": ("randsearch.txt", "problem.txt"),
    "randsearch-oracle": ("randsearch_oracle.txt", "problem.txt"),
    "blind": ("blind.txt", "problem.txt"),
}
FENCE = {"cpp": "cpp", "python": "python"}


@functools.cache
def _read(name: str) -> str:
    return (PROMPTS / name).read_text()


def template_version(strategy: str) -> str:
    h = hashlib.sha256()
    for name in STRATEGY_FILES[strategy]:
        h.update(name.encode() + b"\0" + _read(name).encode() + b"\0")
    return h.hexdigest()[:12]


def _fill(name: str, **values: Any) -> str:
    return Template(_read(name)).substitute({k: "" if v is None else v for k, v in values.items()})


def _block(text: str | None) -> str:
    """Code or example text ending in exactly one newline, as it sits inside a fence."""
    return (text or "").rstrip("\n") + "\n"


def problem_text(p: Mapping[str, Any]) -> str:
    tl = p.get("time_limit")
    ml = p.get("memory_limit")
    note = f"\n## Note\n{p['note']}\n" if p.get("note") else ""
    text = _fill("problem.txt", statement=p["statement"],
                 time_limit=f"{int(tl)} ms" if tl is not None else "not given",
                 memory_limit=f"{int(ml)} MB" if ml is not None else "not given",
                 input=p["input"], output=p["output"], example_input=_block(p.get("example_input")),
                 example_output=_block(p.get("example_output")), note=note)
    return text.replace("$$$", "$$")  # Codeforces' triple-dollar math, as the harness does


def _code_fields(p: Mapping[str, Any]) -> dict[str, str]:
    wrong_lang = parse_lang(p["wrong_code_lang"]) or "cpp"
    correct_lang = "cpp" if p.get("correct_cpp") else "python"
    return {"wrong_lang": str(p["wrong_code_lang"]), "wrong_fence": FENCE[wrong_lang],
            "wrong_code": _block(p["wrong_code"]),
            "correct_lang": "C++" if correct_lang == "cpp" else "Python 3",
            "correct_fence": FENCE[correct_lang],
            "correct_code": _block(p.get("correct_cpp") or p.get("correct_python"))}


@functools.cache
def demos_text() -> str:
    parts = []
    for k, d in enumerate(json.loads(_read("demos.json")), start=1):
        parts.append(_fill("demo.txt", k=k, problem=problem_text(d), rationale=d["rationale"],
                           answer_code=d["answer"], **_code_fields(d)))
    return "".join(parts)


def user_prompt(strategy: str, p: Mapping[str, Any], options: Mapping[str, Any]) -> str:
    """The (first) user message for `strategy` on problem payload `p`."""
    fields: dict[str, Any] = {"problem": problem_text(p), **_code_fields(p),
                              "answer": _read("answer_standard.txt").strip(),
                              "search_s": f"{float(options.get('search_s') or 120):g}"}
    if strategy == "zero-shot":
        return _fill("zero_shot.txt", **fields)
    if strategy == "few-shot":
        return _fill("few_shot.txt", demos=demos_text(), **fields)
    if strategy == "oracle":
        return _fill("oracle.txt", **fields)
    if strategy == "randsearch":
        return _fill("randsearch.txt", **fields)
    if strategy == "randsearch-oracle":
        return _fill("randsearch_oracle.txt", **fields)
    if strategy == "blind":
        return _fill("blind.txt", problem=fields["problem"])
    if strategy == "agentic":
        return _fill("agentic.txt", feedback_chars=options["feedback_chars"],
                     max_executions=options["max_executions"],
                     execution_s=f"{float(options['execution_s']):g}",
                     max_resubmissions=options["max_resubmissions"], **fields)
    raise ValueError(f"no prompt for strategy {strategy!r}")


def feedback(what: str, output: str, left: str) -> str:
    """An agentic turn's reply: what happened, the (cut) output, what is left."""
    return _fill("agentic_feedback.txt", what=what, output=_block(output), left=left)
