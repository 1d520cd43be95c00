"""CE-Bench ("Spurious or Genuine?"): build a labelled benchmark of loop-invariant
counterexamples from LaM4Inv's real logs, then ask models whether each is reachable.
See docs/cebench.md.

One task, two kinds of run, told apart by the dataset (`data.resolve`):

* **build** — dataset = a LaM4Inv source (``sample``, ``lam4inv``, a folder): stages
  ``collect`` → ``label``; the aggregate step writes the versioned dataset (parquet +
  card) into ``RUN/dataset/`` and prints the card and the reference rows.
  ``launch cebench`` with nothing else builds the shipped sample.
* **evaluate** — dataset = a built dataset (its folder, or the build run's directory):
  ``generate`` (with ``--model``) → ``judge``; tables RQ1–RQ4 with the reference rows.
  The dataset's content hash is the run's ``dataset_hash``, so it is part of the run id.

Modules, in data-flow order: `lam4inv` (log/program format) / `upstream` / `data` →
`program` (SV-COMP normal form, P and B) → `counterexamples` (§3.1) → `instrument`
(§3.2.1) → `label` (§3.2.2) → `dataset` (reading a built benchmark back; the aggregate
step writes it: `aggregate/cebench_dataset.py`, `aggregate/cebench_card.py`) → `prompt` →
`answer` → `stages`.  Tables: `aggregate/cebench.py`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from veribatch.tasks.base import Instance, RunConfig, Stage, Task
from veribatch.tasks.cebench import data
from veribatch.tasks.verifier import AcceptedVerifiers


class CEBenchTask(Task):
    name = "cebench"
    tables_module = "veribatch.tasks.cebench.tables"
    cli_module = "veribatch.tasks.cebench.cli"
    default_dataset = "sample"
    strategies = ("zero-shot", "one-shot", "cot")
    verifiers = AcceptedVerifiers("unreach-call", "C", default="z3")

    def datasets(self) -> dict[str, str]:
        return dict(data.DESCRIPTIONS)

    def load(self, dataset: str, *, limit: int | None = None) -> list[Instance]:
        where = data.resolve(dataset)
        if isinstance(where, Path):
            return data.load_built(where, limit=limit)
        return data.load_source(where, limit=limit)

    def dataset_hash(self, dataset: str) -> str:
        from veribatch.tasks.cebench import dataset as built

        where = data.resolve(dataset)
        if isinstance(where, Path):
            return built.dataset_hash(where)
        return data.source_hash(where)

    def is_build(self, config: RunConfig) -> bool:
        """Decided once at plan time (`resolve_config` fills ``options["mode"]``), so shard
        workers never need to look at the dataset again."""
        mode = config.options.get("mode", "auto")
        if mode == "auto":
            return not isinstance(data.resolve(config.dataset), Path)
        return mode == "build"

    def default_options(self) -> dict[str, Any]:
        return {
            "mode": "auto",           # build | evaluate, from the dataset (filled at plan time)
            "budget_s": 100.0,        # labelling verifier's wall-time limit per counterexample (§3.2.2)
            "memory_mb": None,        # per query; None: the verifier's declared memory (resolved at plan)
            "solver_rlimit": 5_000_000,  # Z3 resource units per collection query (deterministic)
            "solver_timeout_s": 60.0,    # wall-time safety net per collection query
            # construction options (docs/cebench.md, "Construction options"); both in the run id
            "inductive_rule": "lam4inv",  # lam4inv (LaM4Inv's check order) | consecution
            "precondition": "exact",      # exact (symbolic execution) | lam4inv (its textual reading)
            "omt_variables": "visible",   # visible (every loop-head variable) | invariant | formula
            "runtime": "native",      # native | apptainer (verifier)
            "image": "",              # apptainer image of the verifier
            "generate_batch": 16,
        }

    def default_sampling(self, config_model: str | None) -> dict[str, Any]:
        return {"seed": 0} if config_model is not None else {}

    def resolve_config(self, config: RunConfig) -> RunConfig:
        """Build runs record the verifier's version; evaluation runs refuse to build and
        record greedy decoding (T = 0, §4) and the strategy's token budget explicitly."""
        from veribatch.tasks.cebench.prompt import MAX_TOKENS

        where = data.resolve(config.dataset)
        mode = "build" if not isinstance(where, Path) else "evaluate"
        if isinstance(where, Path):  # one spelling per dataset folder: RUN, RUN/dataset, relative...
            config = replace(config, dataset=str(where.resolve()))
        if config.options.get("mode", "auto") not in ("auto", mode):
            raise ValueError(f"-o mode={config.options['mode']} but {config.dataset!r} is a "
                             + ("LaM4Inv source (build)" if mode == "build" else "built dataset (evaluate)"))
        config = replace(config, options={**config.options, "mode": mode})
        from veribatch.tasks.verifier import query_memory_mb

        # resolved here (an int, as the queries get it), so the run id and the manifest carry it
        config = replace(config, options={**config.options, "memory_mb": query_memory_mb(config)})
        if mode == "build":
            from veribatch.tasks.cebench.counterexamples import check_options

            check_options(str(config.options.get("inductive_rule", "lam4inv")),
                          str(config.options.get("precondition", "exact")),
                          str(config.options.get("omt_variables", "visible")))
            if config.model is not None:
                raise ValueError(
                    f"--model evaluates a built CE-Bench dataset, but {config.dataset!r} is a LaM4Inv "
                    "source: build it first (`launch cebench build --source ...`), then pass "
                    "--dataset RUN_DIR (or its dataset/ folder)")
            if config.strategy != self.strategies[0]:
                raise ValueError("--strategy applies to evaluation runs (a built dataset with --model)")
            if config.verifier_version:
                return config
            from veribatch.tasks.verifier import verifier_for

            return replace(config, verifier_version=verifier_for(config).version)
        if config.model is not None:
            sampling = dict(config.sampling)
            sampling.setdefault("temperature", 0.0)
            sampling.setdefault("max_tokens", MAX_TOKENS[config.strategy])
            config = replace(config, sampling=sampling)
        # The labelling verifier of an evaluation is the dataset's, named in its card.
        return config

    def versions(self, config: RunConfig) -> dict[str, str]:
        from veribatch.tasks.cebench.answer import PARSER_VERSION
        from veribatch.tasks.cebench.prompt import template_hash

        if self.is_build(config):
            from veribatch.tasks.cebench.counterexamples import collection_version

            return {"collection": collection_version(
                str(config.options.get("inductive_rule", "lam4inv")),
                str(config.options.get("precondition", "exact")),
                str(config.options.get("omt_variables", "visible")))}
        if config.model is None:
            return {}
        return {"prompt": template_hash(config.strategy), "parser": PARSER_VERSION}

    def stages(self, config: RunConfig) -> list[Stage]:
        from veribatch.tasks.cebench.stages import build_stages

        return build_stages(config, built=not self.is_build(config))
