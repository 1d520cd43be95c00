"""What an OpenAI-compatible provider accepts, declared per model family, not guessed per request.

The papers' hosted models sit behind endpoints that speak the same ``/v1/chat/completions``
but refuse different parameters: OpenAI's o-series (o1, o3, o3-mini, o4-mini) answer HTTP 400
to ``max_tokens`` (they take ``max_completion_tokens``) and to any ``temperature``/``top_p``
other than their fixed default; they take ``reasoning_effort`` (REFUTE's best row is
"o3-mini (high)").  A run that sent the same body to every model would turn each o-series
request into an error and its table into zeros.  So each family says, once, here:

- which token-limit parameter it takes (`token_limit`);
- whether ``temperature``/``top_p``/``seed`` are sent (`sampling`, `seed`); where they are
  not, the provider's default decoding is used, as the authors' harnesses did for reasoning
  models, and the record says what was not sent (`Completion.sampling["sent"]`);
- which ``reasoning_effort`` values it takes (`reasoning_efforts`; empty: the parameter is
  refused at plan time rather than sent);
- whether it answers more than one sample per request (`max_n`).

The family is chosen from the served model's name (`rules_for`); anything unknown (a vLLM
server, `launch serve`, a local proxy) is `GENERIC`, which sends what vLLM's server takes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from veribatch.inference.types import Sampling

ENGINE_OPTIONS = ("reasoning_effort",)
"""Run options (``-o KEY=VALUE``) that belong to the engine, not the task: part of the run id
and passed to `open_engine` as keyword arguments."""


@dataclass(frozen=True)
class ProviderRules:
    family: str
    token_limit: str = "max_tokens"  # "max_tokens" | "max_completion_tokens"
    sampling: bool = True  # temperature and top_p are sent
    seed: bool = True
    reasoning_efforts: tuple[str, ...] = ()
    max_n: int | None = None  # None: any n
    source: str = ""  # where the rule is documented

    def body(self, model: str, messages: list[dict[str, str]], s: Sampling,
             reasoning_effort: str | None = None) -> dict[str, Any]:
        """The JSON body of one chat-completions request for this family."""
        body: dict[str, Any] = {"model": model, "messages": messages, "n": s.n}
        if self.sampling:
            body["temperature"] = s.temperature
            body["top_p"] = s.top_p
        if s.max_tokens:
            body[self.token_limit] = s.max_tokens
        if self.seed:
            body["seed"] = s.seed
        if s.stop:
            body["stop"] = list(s.stop)
        if reasoning_effort is not None:
            body["reasoning_effort"] = reasoning_effort
        return body

    def check(self, model: str, s: Sampling | None = None,
              reasoning_effort: str | None = None) -> None:
        """Raise ValueError for what this family would refuse (said before any request)."""
        if reasoning_effort is not None and reasoning_effort not in self.reasoning_efforts:
            took = ", ".join(self.reasoning_efforts) or "no reasoning_effort"
            raise ValueError(f"openai:{model} ({self.family}) takes {took}; "
                             f"not reasoning_effort={reasoning_effort}")
        if s is not None and self.max_n is not None and s.n > self.max_n:
            raise ValueError(f"openai:{model} ({self.family}) answers at most n={self.max_n} "
                             f"samples per request, not {s.n}")


GENERIC = ProviderRules("openai-compatible", source="vLLM's OpenAI server; `launch serve`")

FAMILIES: tuple[tuple[re.Pattern[str], ProviderRules], ...] = (
    # o1/o3/o4 and gpt-5: max_completion_tokens only; temperature/top_p other than 1 refused.
    (re.compile(r"^(openai/)?(o\d+(-mini|-pro)?|gpt-5[\w.-]*)([-:@].*)?$"),
     ProviderRules("openai-reasoning", token_limit="max_completion_tokens", sampling=False,
                   reasoning_efforts=("low", "medium", "high"),
                   source="OpenAI reasoning guide: max_completion_tokens, reasoning_effort; "
                          "400 'Unsupported parameter' for max_tokens/temperature")),
    # gpt-4o, gpt-4.1...: max_tokens is deprecated in favour of max_completion_tokens.
    (re.compile(r"^(openai/)?(gpt-4|chatgpt-)"),
     ProviderRules("openai-chat", token_limit="max_completion_tokens",
                   source="OpenAI chat API reference: max_tokens deprecated")),
    # DeepSeek-R1 (deepseek-reasoner): temperature/top_p accepted but without effect.
    (re.compile(r"^(deepseek-reasoner|deepseek-ai/deepseek-r1)", re.I),
     ProviderRules("deepseek-reasoner", sampling=False, seed=False,
                   source="DeepSeek reasoning model guide: temperature/top_p not supported")),
    # Gemini 2.5 through Google's OpenAI compatibility: reasoning_effort maps to a thinking budget.
    (re.compile(r"^(models/)?gemini-2\.5", re.I),
     ProviderRules("gemini-2.5", seed=False, reasoning_efforts=("low", "medium", "high"),
                   source="Gemini OpenAI compatibility: reasoning_effort, max_tokens")),
    # Claude through Anthropic's OpenAI SDK compatibility: n must be 1, seed ignored.
    (re.compile(r"^claude-", re.I),
     ProviderRules("anthropic-claude", seed=False, max_n=1,
                   source="Anthropic OpenAI SDK compatibility: n must be 1")),
)


def rules_for(model: str) -> ProviderRules:
    """The declared rules of the family `model` (a served model name) belongs to."""
    for pattern, rules in FAMILIES:
        if pattern.search(model):
            return rules
    return GENERIC


def engine_options(spec: str | None, options: dict[str, Any]) -> dict[str, Any]:
    """The engine options among a run's options, checked against the engine's rules.

    Raises ValueError (a plan-time error) for an engine option on an engine that takes
    none, or a value the model's family refuses."""
    found = {k: options[k] for k in ENGINE_OPTIONS if options.get(k) is not None}
    if not found:
        return {}
    kind, _, name = (spec or "").partition(":")
    if kind != "openai":
        keys = ", ".join(found)
        raise ValueError(f"-o {keys}: an openai: engine option; --model is {spec or 'none'}")
    rules_for(name).check(name, reasoning_effort=found.get("reasoning_effort"))
    return found
