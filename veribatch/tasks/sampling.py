"""How many samples a model run draws and how: the same rules for every task.

``launch <task> --n K`` and ``-o n_samples=K`` are one knob, kept as the task option
``n_samples`` so the run id carries it once; when the user gives no temperature, a model
run records one explicitly — greedy for one sample, 0.7 for several (the papers'
Best-of-N and pass@k settings) — so a changed default can never reuse an old run.  A task
whose paper fixes its own sampling sets it first, in its `resolve_config` (REFUTE: the
authors' harness's 0.2 / top_p 0.95 for chat models), and this rule leaves it alone.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from veribatch.tasks.base import RunConfig

if TYPE_CHECKING:  # inference is imported only by the stages that generate
    from veribatch.inference.types import Sampling


def model_run_sampling(max_tokens: int) -> dict[str, Any]:
    """A model run's sampling when the user gives none (`Task.default_sampling`): the task's
    token budget and seed 0, written into the config so the run id and manifest say what
    was used."""
    return {"max_tokens": max_tokens, "seed": 0}


def check_sampling(config: RunConfig) -> None:
    """Refuse sampling no engine can honour, at plan time and for every task (a model run
    or not): ``--n``/``n_samples`` and ``--max-tokens`` at least 1, ``--temperature`` and
    ``top_p`` numbers with temperature >= 0 (0 = greedy) and 0 < top_p <= 1.  Without this
    a negative temperature or zero samples reach the engine — or silently produce nothing."""
    s, o = config.sampling, config.options
    checks: list[tuple[str, Any, str]] = [
        ("--n", s.get("n"), "count"), ("-o n_samples", o.get("n_samples"), "count"),
        ("--max-tokens", s.get("max_tokens"), "count"),
        ("--temperature", s.get("temperature"), "temperature"), ("top_p", s.get("top_p"), "top_p"),
    ]
    for flag, value, rule in checks:
        if value is None:
            continue
        if rule == "count":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{flag} {value}: must be a whole number of at least 1")
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise ValueError(f"{flag} {value}: must be a number")
        if rule == "temperature" and value < 0:
            raise ValueError(f"{flag} {value}: must be at least 0 (0 = greedy decoding)")
        if rule == "top_p" and not 0 < value <= 1:
            raise ValueError(f"{flag} {value}: must be in (0, 1]")


def resolve_samples(config: RunConfig) -> RunConfig:
    """Fold ``--n`` into ``n_samples`` (a contradiction is an error) and record the temperature."""
    n_cli = config.sampling.get("n")
    if n_cli is not None:
        n_opt = int(config.options.get("n_samples", 1))
        if n_opt not in (1, int(n_cli)):
            raise ValueError(f"--n {n_cli} contradicts -o n_samples={n_opt}")
        config = replace(config, sampling={k: v for k, v in config.sampling.items() if k != "n"},
                         options={**config.options, "n_samples": int(n_cli)})
    if config.model is not None and "temperature" not in config.sampling:
        n = int(config.options.get("n_samples", 1))
        config = replace(config, sampling={**config.sampling, "temperature": 0.0 if n == 1 else 0.7})
    return config


def sampling_for(config: RunConfig, max_tokens: int) -> Sampling:
    """The engine's sampling for a resolved run; `max_tokens` is the task's default."""
    from veribatch.inference.types import Sampling

    s = dict(config.sampling)
    n = int(config.options.get("n_samples", 1))
    return Sampling(n=n, temperature=float(s.get("temperature", 0.0 if n == 1 else 0.7)),
                    top_p=float(s.get("top_p", 1.0)), max_tokens=int(s.get("max_tokens", max_tokens)),
                    seed=int(s.get("seed", 0)), stop=tuple(s.get("stop", ())))
