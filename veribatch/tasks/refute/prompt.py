"""REFUTE prompts: the authors' templates by default, ours as the named variant ``veribatch``.

``-o prompts=authors`` (default): the templates of the authors' harness
(`tasks.refute.harness_prompts`, fetched at a pinned commit and checked by sha256), put
together as the harness does (``refute/utils/models.py``): a system message (the
strategy's ``<method>_system.txt``; for a reasoning model its ``reasoning_<method>_system.txt``
where the harness has one — so RandSearch gives non-reasoning models the three examples
with expert rationales, §4.3, and reasoning models none) and a human message (the
``<method>_human.txt`` line, the problem as ``desc_problem`` formats it, then the code).
Answers are the harness's XML actions (``print_fail_case`` / ``solve_brute`` /
``generate_tc``), read by `tasks.refute.answer`.  Two things the harness has no template
for use ours: the agentic protocol (§4.2; with ``agentic-few-shot`` the harness's few-shot
examples with their rationales are given first, §5's "agentic with demos") and the §4.1
blind generator.  One departure, on purpose: the harness's oracle RandSearch sent the
statement only although its human line announces the buggy and the correct code; here
both are given, as the paper describes.

``-o prompts=veribatch``: our own templates (``prompts/*.txt``, fenced code blocks, three
demos we wrote), everything in one user message.

``-o system_role=false`` folds the system message into the user message, for chat templates
that reject a system role.  `template_version` hashes what a strategy's prompt is made of
(the pinned sha256 of the authors' files, the text of ours, how they are put together); it
is part of the run identity (`Task.versions`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from string import Template
from typing import Any

from veribatch.tasks.refute import harness_prompts
from veribatch.tasks.refute.data import parse_lang

PROMPTS = Path(__file__).resolve().parent / "prompts"
STRATEGY_FILES: dict[str, tuple[str, ...]] = {
    "zero-shot": ("zero_shot.txt", "problem.txt", "answer_standard.txt"),
    "few-shot": ("few_shot.txt", "problem.txt", "answer_standard.txt", "demo.txt", "demos.json"),
    "oracle": ("oracle.txt", "problem.txt", "answer_standard.txt"),
    "agentic": ("agentic.txt", "problem.txt", "agentic_feedback.txt"),
    "agentic-few-shot": ("agentic.txt", "problem.txt", "agentic_feedback.txt", "demo.txt",
                         "demos.json", "agentic_demos.txt"),
    "randsearch": ("randsearch.txt", "problem.txt"),
    "randsearch-oracle": ("randsearch_oracle.txt", "problem.txt"),
    "blind": ("blind.txt", "problem.txt"),
}
FENCE = {"cpp": "cpp", "python": "python"}
PROMPT_SETS = ("authors", "veribatch")
HARNESS_METHOD = {"zero-shot": "zero_shot", "few-shot": "few_shot", "oracle": "zero_shot_oracle",
                  "randsearch": "randsearch", "randsearch-oracle": "randsearch_oracle"}
"""Our strategy → the harness's ``--method`` (its template file stem)."""
AGENTIC = ("agentic", "agentic-few-shot")
PROMPT_COMPOSITION_VERSION = "1"
"""Bump when the way templates are put together (below) changes."""


@functools.cache
def _read(name: str) -> str:
    return (PROMPTS / name).read_text()


def harness_files(strategy: str, reasoning: bool) -> tuple[str, str]:
    """(system, human) template names the harness uses for `strategy` (`BaseLLM.__init__`):
    the ``reasoning_`` system prompt for a reasoning model where one exists."""
    method = HARNESS_METHOD["few-shot" if strategy == "agentic-few-shot" else strategy]
    system = f"{method}_system.txt"
    if reasoning and harness_prompts.exists(f"reasoning_{system}"):
        system = f"reasoning_{system}"
    return system, f"{method}_human.txt"


def _ours(strategy: str, prompts: str) -> tuple[str, ...]:
    if prompts == "veribatch" or strategy not in HARNESS_METHOD:
        files = STRATEGY_FILES[strategy]
        if prompts == "authors" and strategy == "agentic-few-shot":  # demos: the harness's
            files = tuple(f for f in files if f not in ("demo.txt", "demos.json"))
        return files
    return ()


def _theirs(strategy: str, prompts: str, reasoning: bool) -> tuple[str, ...]:
    if prompts != "authors":
        return ()
    if strategy in HARNESS_METHOD:
        return harness_files(strategy, reasoning)
    if strategy == "agentic-few-shot":
        return (harness_files(strategy, reasoning)[0],)
    return ()


def prompt_set(options: Mapping[str, Any]) -> str:
    prompts = str(options.get("prompts") or "authors")
    if prompts not in PROMPT_SETS:
        raise ValueError(f"prompts={prompts!r}: expected one of {', '.join(PROMPT_SETS)}")
    return prompts


def template_version(strategy: str, options: Mapping[str, Any] | None = None) -> str:
    """``authors@<commit>:<hash>`` or ``veribatch:<hash>``: the hash covers every file the
    strategy's prompt is made of (the authors' by their pinned sha256, ours by content), the
    reasoning-model choice and whether a system role is used."""
    o = options or {}
    prompts = prompt_set(o)
    reasoning = bool(o.get("reasoning") is True)
    h = hashlib.sha256(f"composition={PROMPT_COMPOSITION_VERSION}\0".encode())
    for name in _ours(strategy, prompts):
        h.update(name.encode() + b"\0" + _read(name).encode() + b"\0")
    for name in _theirs(strategy, prompts, reasoning):
        h.update(b"authors/" + name.encode() + b"\0" + harness_prompts.file_sha256(name).encode() + b"\0")
    if prompts == "authors":
        h.update(f"system_role={bool(o.get('system_role', True))}".encode())
        return f"authors@{harness_prompts.commit()[:7]}:{h.hexdigest()[:12]}"
    return f"veribatch:{h.hexdigest()[:12]}"


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


def desc_problem(p: Mapping[str, Any]) -> str:
    """The problem as the harness's ``desc_problem`` formats it (``utils/dataset_parser.py``),
    character for character: its headings, ``Time Limit: <ms>ms``, the example in fences,
    ``$$$`` → ``$$``."""
    desc = ""
    if p.get("statement") is not None:
        desc += f"## Statement \n{p['statement']}\n\n"
    with contextlib.suppress(KeyError, TypeError, ValueError):  # the harness's bare except
        desc += f"Time Limit: {int(p['time_limit'])}ms\n\n"
    if "memory_limit" in p:  # the harness printed whatever the column held
        desc += f"Memory Limit: {p['memory_limit']} megabytes\n\n"
    for key, head in (("input", "Input Format"), ("output", "Output Format")):
        if p.get(key) is not None:
            desc += f"## {head} \n{p[key]}\n\n"
    for key, head in (("example_input", "Example Input"), ("example_output", "Example Output")):
        if p.get(key) is not None:
            desc += f"## {head} \n```\n{p[key]}\n```\n\n"
    if p.get("note") is not None:
        desc += f"## Note \n{p['note']}\n\n"
    return desc.replace("$$$", "$$")


def _correct_code(p: Mapping[str, Any]) -> str:
    return str(p.get("correct_cpp") or p.get("correct_python") or "")


def harness_human(strategy: str, p: Mapping[str, Any], prefix: str) -> str:
    """The human message as the harness's `VanillaLLM` / `VanillaOracleLLM` build it (the
    oracle RandSearch message also carries both codes: see the module docstring)."""
    text = f"{prefix}\n\n{desc_problem(p)}"
    if strategy in ("oracle", "randsearch-oracle"):
        return (f"{text}\n\n## Buggy Code\n```\n{p['wrong_code']}\n```\n\n"
                f"## Correct Code\n```\n{_correct_code(p)}\n```")
    return f"{text}\n## Code\n```\n{p['wrong_code']}\n```"


def harness_examples(reasoning: bool) -> str:
    """The harness's few-shot examples with their expert rationales (from the first
    ``# Example`` heading of its few-shot system prompt to the end)."""
    text = harness_prompts.read(harness_files("few-shot", reasoning)[0])
    start = text.find("# Example")
    return text[start:] if start >= 0 else text


def messages(strategy: str, p: Mapping[str, Any], options: Mapping[str, Any]) -> list[dict[str, str]]:
    """The first messages (``{"role", "content"}``) for `strategy` on problem payload `p`."""
    prompts = prompt_set(options)
    reasoning = options.get("reasoning") is True
    system: str | None = None
    if prompts == "veribatch" or strategy not in (*HARNESS_METHOD, "agentic-few-shot"):
        user = user_prompt(strategy, p, options)
    elif strategy == "agentic-few-shot":
        system = _fill("agentic_demos.txt", examples=harness_examples(reasoning))
        user = user_prompt("agentic", p, options)
    else:
        sys_name, human_name = harness_files(strategy, reasoning)
        system = harness_prompts.read(sys_name)
        user = harness_human(strategy, p, harness_prompts.read(human_name))
    if system is None:
        return [{"role": "user", "content": user}]
    if not options.get("system_role", True):
        return [{"role": "user", "content": f"{system}\n\n{user}"}]
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def user_prompt(strategy: str, p: Mapping[str, Any], options: Mapping[str, Any]) -> str:
    """The (first) user message of our own templates (``prompts=veribatch``) for `strategy`."""
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
    if strategy in AGENTIC:
        demos = (_fill("agentic_demos.txt", examples=demos_text()) + "\n\n"
                 if strategy == "agentic-few-shot" else "")
        return demos + _fill("agentic.txt", feedback_chars=options["feedback_chars"],
                     max_executions=options["max_executions"],
                     execution_s=f"{float(options['execution_s']):g}",
                     max_resubmissions=options["max_resubmissions"], **fields)
    raise ValueError(f"no prompt for strategy {strategy!r}")


def feedback(what: str, output: str, left: str) -> str:
    """An agentic turn's reply: what happened, the (cut) output, what is left."""
    return _fill("agentic_feedback.txt", what=what, output=_block(output), left=left)
