"""REFUTE (Sinha et al., "Can Language Models Falsify?"): write an input on which a wrong
Codeforces solution fails, judged in a sandbox against the correct one.  See docs/refute.md.

Modules, in data-flow order: `data`/`upstream` (instances from the sample, a local export or
the hub at a pinned revision) → `prompt` (one template per strategy) → `answer` (model text →
programs, via `tasks.extract`) → `agent` (the multi-turn strategy) → `problem` + `fuzz` (what
the judge runs) → `stages` (records); the judge itself is `verifiers.judge`.  Tables are built
by `aggregate/refute.py` from the records alone.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from veribatch.tasks.base import Instance, RunConfig, Stage, Task
from veribatch.tasks.refute import data
from veribatch.tasks.sampling import model_run_sampling, resolve_samples
from veribatch.tasks.verifier import AcceptedVerifiers

STRATEGIES = ("zero-shot", "few-shot", "oracle", "agentic", "agentic-few-shot", "randsearch",
              "randsearch-oracle")

# Reasoning models (the paper's: o3-mini (high), DeepSeek R1, Gemini 2.0 Flash Thinking) get
# the harness's `reasoning_*` system prompts and a token budget that holds their thinking:
# the harness asked R1 and o3-mini for max_tokens 50000; 2048 cut them off into `no_program`.
# `-o reasoning=auto` recognises them by name (word-bounded, case-insensitive).
REASONING_NAME = re.compile(
    r"(?<![a-z0-9])(o1|o3|o4)(-mini|-pro)?(?![a-z0-9])|deepseek-r1|(?<![a-z0-9])r1(?![a-z0-9])|"
    r"r1-distill|qwq|thinking|reasoner|gpt-oss|magistral|qwen3", re.IGNORECASE)
REASONING_MAX_TOKENS = 50000

# The harness's sampling (utils/get_model_client.py): chat models through ChatOpenAI with
# temperature 0.2 and top_p 0.95, whatever the number of samples (so a one-sample run here is
# sampled too, seed recorded, not greedy); R1 and o3-mini with neither set, i.e. the providers'
# defaults — temperature 1 and top_p 1 for OpenAI's and DeepSeek's APIs (o-series models accept
# no other).  A value the user gives (`--temperature`) is kept.
HARNESS_SAMPLING = {False: {"temperature": 0.2, "top_p": 0.95}, True: {"temperature": 1.0, "top_p": 1.0}}

# The harness asked o3-mini for reasoning_effort "high" (the paper's best row is "o3-mini
# (high)"); a run of that model through an openai: endpoint sends the same unless the user
# says otherwise (`-o reasoning_effort=low`): an engine option, so part of the run id.
HARNESS_REASONING_EFFORT = {re.compile(r"(?<![a-z0-9])o3-mini(?![a-z0-9])", re.IGNORECASE): "high"}

# Limits per dataset when the user sets none.  The hub data gets the paper's/harness's:
# RandSearch 2 min (§4.3), the §4.1 filter 1 min, 20 s per run, 1 min for the model's program.
# The shipped sample's problems are tiny, and `launch refute` must finish in minutes on a
# laptop: its searches and runs are shorter (recorded in the run's options like any other).
LIMIT_DEFAULTS = {
    "hub": {"search_s": 120.0, "filter_s": 60.0, "run_s": 20.0, "generator_s": 60.0},
    "sample": {"search_s": 10.0, "filter_s": 5.0, "run_s": 5.0, "generator_s": 10.0},
}


class RefuteTask(Task):
    name = "refute"
    tables_module = "veribatch.tasks.refute.tables"
    cli_module = "veribatch.tasks.refute.cli"
    default_dataset = "sample"
    strategies = STRATEGIES
    verifiers = AcceptedVerifiers("judge", "C++", default="judge")

    def datasets(self) -> dict[str, str]:
        return dict(data.DESCRIPTIONS)

    def load(self, dataset: str, *, limit: int | None = None) -> list[Instance]:
        return data.load(dataset, limit=limit)

    def dataset_hash(self, dataset: str) -> str:
        return data.dataset_hash(dataset)

    def default_options(self) -> dict[str, Any]:
        return {
            "search_s": None,        # RandSearch limit (None: the dataset's, see LIMIT_DEFAULTS)
            "filter_s": None,        # §4.1 blind random generator limit
            "run_s": None,           # each solution / validator run
            "generator_s": None,     # the model's input-printing program
            "runs": 5,               # runs of the wrong solution per input (nondeterminism)
            "memory_mb": 2048,       # per program; protects the node (the harness set none)
            "sandbox": "auto",       # auto | bwrap | apptainer | unsafe
            "image": "",             # apptainer judge image (containers/judge.def)
            "n_samples": 1,          # attempts per problem (pass@k)
            "max_executions": 10,    # agentic (§4.2)
            "execution_s": 30.0,
            "feedback_chars": 2000,
            "max_resubmissions": 5,
            "max_turns": 24,
            "search_validate": False,  # validate each RandSearch input (the harness did not)
            "compare": "per-token",  # per-token | harness (YES/NO mode only if every jury token is)
            "filter": False,         # the §4.1 construction filter (`launch refute filter`)
            "generate_batch": 16,
            "prompts": "authors",    # authors (the harness's templates, pinned) | veribatch (ours)
            "system_role": True,     # false: the system prompt goes into the user message
            "reasoning": "auto",     # auto (by model name) | true | false: reasoning_* prompts, budget
        }

    def default_sampling(self, config_model: str | None) -> dict[str, Any]:
        if config_model is None:
            return {}
        from veribatch.tasks.refute.stages import MAX_TOKENS

        return model_run_sampling(REASONING_MAX_TOKENS if is_reasoning_model(config_model) else MAX_TOKENS)

    def resolve_config(self, config: RunConfig) -> RunConfig:
        """Dataset limits, effective temperature, the judge's version; refuses (exit 2) where
        ``sandbox=auto`` finds no isolation on the planning node — except for a run of
        shipped programs only (no model, the sample: `problem.shipped_programs_only`), which
        runs with the node's own isolation and records so."""
        o = dict(config.options)
        kind = "sample" if config.dataset == "sample" else "hub"
        for key, value in LIMIT_DEFAULTS[kind].items():
            if o.get(key) is None:
                o[key] = value
        if o["compare"] not in ("per-token", "harness"):
            raise ValueError(f"compare={o['compare']!r}: expected per-token or harness")
        if o["sandbox"] not in ("auto", "bwrap", "apptainer", "unsafe"):
            raise ValueError(f"sandbox={o['sandbox']!r}: expected auto, bwrap, apptainer or unsafe")
        o["reasoning"] = resolve_reasoning(o.get("reasoning"), config.model)
        sampling = _budget(config, o["reasoning"])
        if config.model is not None:
            sampling = {**HARNESS_SAMPLING[o["reasoning"]], **sampling}
            kind, _, name = config.model.partition(":")
            for pattern, effort in HARNESS_REASONING_EFFORT.items():
                if kind == "openai" and o.get("reasoning_effort") is None and pattern.search(name):
                    o["reasoning_effort"] = effort
        config = resolve_samples(replace(config, options=o, sampling=sampling))
        # the node's refusal first: it needs no network, and no template makes it go away
        if o["sandbox"] == "auto":
            from veribatch.tasks.refute.problem import sandbox
            from veribatch.verifiers.judge import SandboxUnavailable

            try:
                sandbox(config)  # shipped programs only may fall back to the node's isolation
            except SandboxUnavailable as e:
                raise ValueError(str(e)) from None
        if config.model is not None:
            from veribatch.tasks.refute.prompt import prompt_set

            if prompt_set(o) == "authors":  # fetched and checked here: offline fails at plan time
                from veribatch.tasks.refute import harness_prompts

                harness_prompts.fetch()
        if not config.verifier_version:
            config = replace(config, verifier_version=judge_version(config))
        return config

    def versions(self, config: RunConfig) -> dict[str, str]:
        from veribatch.tasks.refute.answer import PARSER_VERSION
        from veribatch.tasks.refute.prompt import template_version
        from veribatch.tasks.refute.stages import prompt_strategy

        v = {"judge": JUDGE_RULES_VERSION}
        if config.model is not None:
            v.update(prompt=template_version(prompt_strategy(config), config.options),
                     parser=PARSER_VERSION)
        else:
            v["reference"] = REFERENCE_VERSION
        return v

    def stages(self, config: RunConfig) -> list[Stage]:
        from veribatch.tasks.refute.stages import build_stages

        return build_stages(config)


def is_reasoning_model(model: str | None) -> bool:
    return bool(model) and REASONING_NAME.search(str(model).split(":", 1)[-1]) is not None


def resolve_reasoning(value: Any, model: str | None) -> bool:
    """`-o reasoning` → a bool recorded in the run's options (so in its identity)."""
    if isinstance(value, bool):
        return value
    low = str(value if value is not None else "auto").strip().lower()
    if low == "auto":
        return is_reasoning_model(model)
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"reasoning={value!r}: expected auto, true or false")


def _budget(config: RunConfig, reasoning: bool) -> dict[str, Any]:
    """The default token budget follows the resolved reasoning choice (`default_sampling`
    saw only the model name); a budget the user set is kept — unless it equals the other
    default exactly, which this cannot tell apart from no choice."""
    from veribatch.tasks.refute.stages import MAX_TOKENS

    s = dict(config.sampling)
    if config.model is None:
        return s
    if reasoning and s.get("max_tokens") == MAX_TOKENS:
        s["max_tokens"] = REASONING_MAX_TOKENS
    elif not reasoning and s.get("max_tokens") == REASONING_MAX_TOKENS:
        s["max_tokens"] = MAX_TOKENS
    return s


JUDGE_RULES_VERSION = "refute-judge-1"
"""Bump when the judgement rules change (comparison, run order, reasons)."""
REFERENCE_VERSION = "fuzz-2"
"""Bump when the reference rows' generators or labels change (`tasks.refute.fuzz`; 2: the
filter row without a blind generator is `fuzzer-random-filter`)."""


def judge_version(config: RunConfig) -> str:
    """Compiler, interpreter and C++ flags the judge will use (part of the run identity)."""
    from veribatch.verifiers.judge import toolchain_version

    return toolchain_version()
