"""InvBench (Wei et al.): LLM invariant synthesis judged by a verifier-based decision
procedure and by the verification speedup it brings.  See docs/invbench.md.

Modules, in data-flow order: `data`/`upstream` (instances) → `markers` (loop labels
shown as ``INVARIANT_MARKER_k();``) → `prompt` → `answer` (model text → q = ⟨ψ, ℓ⟩)
→ `validation` (ψ side-effect free, boolean, in scope) → `instrument` (d_a, d_b
programs) → `decision` (§3.2 rules, parallel runs) → `stages` (records).  Tables are
built by `aggregate/invbench.py` from the records alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from veribatch.tasks.base import DatasetError, Instance, RunConfig, Stage, Task
from veribatch.tasks.invbench import data
from veribatch.tasks.sampling import model_run_sampling, resolve_samples
from veribatch.tasks.verifier import AcceptedVerifiers
from veribatch.verifiers.result import DEFAULT_WALL_S

SPLIT_FOLDERS = {"Easy": "easy", "Hard": "hard", "Programs": "training"}


def _split_name(dataset: str) -> str:
    """The split a dataset spec names, without resolving (or downloading) its data."""
    if "/" in dataset and ":" not in dataset:
        return SPLIT_FOLDERS.get(Path(dataset).expanduser().name, "")
    return dataset.partition(":")[0]


def _resolve(dataset: str) -> tuple[str, Path | None]:
    """Dataset spec → (split, Dataset/ root or None for the sample).

    Accepts ``sample``, ``easy``/``hard``/``training`` (root from $VERIBATCH_INVBENCH_ROOT or
    the pinned upstream download), ``easy:/path/to/InvBench`` and a path to a split folder
    (``.../Dataset/Evaluation/Easy``)."""
    if "/" in dataset and ":" not in dataset:
        folder = Path(dataset).expanduser().resolve()
        name = SPLIT_FOLDERS.get(folder.name)
        if name is None or not folder.is_dir():
            raise DatasetError(f"{dataset}: expected an InvBench split folder named Easy, Hard or Programs")
        return name, data.dataset_root(folder.parent.parent)  # Easy → Evaluation → Dataset
    name, explicit = data.split_dataset_name(dataset)
    if name == "sample":
        return name, None
    return name, data.resolve_root(name, explicit)


class InvBenchTask(Task):
    name = "invbench"
    tables_module = "veribatch.tasks.invbench.tables"
    cli_module = "veribatch.tasks.invbench.cli"
    verifiers = AcceptedVerifiers("unreach-call", "C", default="z3")
    default_dataset = "sample"

    def datasets(self) -> dict[str, str]:
        return dict(data.DESCRIPTIONS)

    def load(self, dataset: str, *, limit: int | None = None) -> list[Instance]:
        name, root = _resolve(dataset)
        if root is None:
            return data.load_sample(limit=limit)
        return data.load_split(name, root, limit=limit)

    def dataset_hash(self, dataset: str) -> str:
        name, root = _resolve(dataset)
        return data.split_hash(name, root)

    def default_options(self) -> dict[str, Any]:
        return {
            "budget_s": DEFAULT_WALL_S,  # verifier budget of the baseline (and fallback decision timeout)
            "n_samples": 1,  # Best-of-N: 16 (temperature then defaults to 0.7)
            # decision timeouts: this run's baseline solve time | the paper's, upstream's
            # recorded UAutomizer time (timing.json, pinned) | the budget
            "timeout_source": "baseline",
            "memory_mb": None,  # per query; None: the verifier's declared memory (resolved at plan)
            "cpu_limit_s": None,  # per query; None: no CPU-time cap (the benchmark is wall-clock)
            # §5.4 arm (no --model): invariants of the run's own baseline | upstream's
            # Training/invariants.json (UAutomizer's, the paper's setting; training split only)
            "verifier_invariants": "baseline",
            "runtime": "native",  # native | apptainer
            "image": "",  # apptainer image of the verifier
            "generate_batch": 16,
            # ours (one request, loop-head markers, two-line answer) | wonda (wonda's prompt
            # fetched at a pinned commit: one request per marker, body-start markers, JSON)
            "prompt": "ours",
        }

    def default_sampling(self, config_model: str | None) -> dict[str, Any]:
        if config_model is None:
            return {}
        from veribatch.tasks.invbench.stages import MAX_TOKENS

        return model_run_sampling(MAX_TOKENS)

    def resolve_config(self, config: RunConfig) -> RunConfig:
        """Record the verifier's own version and the effective temperature in the config, so a
        new verifier or sampling makes a new run id (and the manifest shows what was used)."""
        from dataclasses import replace

        if config.options.get("timeout_source") not in ("baseline", "reference", "budget"):
            raise ValueError(
                f"timeout_source={config.options.get('timeout_source')!r}: "
                "expected baseline, reference or budget"
            )
        source = config.options.get("verifier_invariants", "baseline")
        if source not in ("baseline", "upstream"):
            raise ValueError(f"verifier_invariants={source!r}: expected baseline or upstream")
        if source == "upstream" and config.model is None and _split_name(config.dataset) != "training":
            raise ValueError(
                "verifier_invariants=upstream feeds back InvBench's Training/invariants.json, which "
                f"only the training split has (dataset {config.dataset!r}); use --dataset training"
            )
        from veribatch.tasks.invbench.prompt import PROMPTS

        prompt = config.options.get("prompt", PROMPTS[0])
        if prompt not in PROMPTS:
            raise ValueError(f"prompt={prompt!r}: expected one of {', '.join(PROMPTS)}")
        if prompt != PROMPTS[0] and config.model is None:
            raise ValueError(f"prompt={prompt} applies to a model run (--model); the reference arm asks no model")
        if prompt == PROMPTS[0]:  # the default is not recorded, so default runs keep their ids
            config = replace(config, options={k: v for k, v in config.options.items() if k != "prompt"})
        else:
            from veribatch.tasks.invbench import wonda_prompt

            wonda_prompt.load()  # fetched and checked at plan time: a bad file stops the run here
        for key in ("memory_mb", "cpu_limit_s"):
            value = config.options.get(key)
            if value not in (None, "") and float(value) <= 0:
                raise ValueError(f"{key}={value!r}: expected a positive number")
        if config.options.get("memory_mb") in (None, ""):
            from veribatch.tasks.verifier import query_memory_mb

            # resolved here, so the run id and the manifest carry the limit the queries get
            config = replace(config, options={**config.options, "memory_mb": query_memory_mb(config)})
        # InvBench: greedy for one sample, T=0.7 for Best-of-N (§5.6); recorded explicitly.
        config = resolve_samples(config)
        if config.verifier_version:
            return config
        from veribatch.tasks.verifier import verifier_for

        return replace(config, verifier_version=verifier_for(config).version)

    def versions(self, config: RunConfig) -> dict[str, str]:
        from veribatch.tasks.invbench.prompt import prompt_version

        return {"prompt": prompt_version(config.options.get("prompt", "ours"))} if config.model is not None else {}

    def stages(self, config: RunConfig) -> list[Stage]:
        from veribatch.tasks.invbench.stages import build_stages

        return build_stages(config)
