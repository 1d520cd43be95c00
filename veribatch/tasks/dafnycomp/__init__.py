"""DafnyComp (Veri-Code): regenerate the stripped specifications of multi-function Dafny
programs; checked with Dafny 4.10 for syntax and verification, scored by pass@k, failures
sorted into the paper's failure modes.  See docs/dafnycomp.md.

Modules, in data-flow order: `data`/`upstream` (instances) → `syntax` (declarations,
contracts, bodies) → `strip` (§3.3) → `prompt` → `answer` (the program in a completion)
→ `integrity` (the strict protocol; `contracts`: vacuous / trivial contracts by z3) →
`checker` (dafny resolve + verify, cached; the paper protocol is its verdict alone) →
`strength` (Dafny-proved "as strong as the original" lemmas) → `failure_modes` (Table 2) →
`stages` (records).  Tables are built by
`aggregate/dafnycomp.py` from the records alone.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from veribatch.tasks.base import Instance, RunConfig, Stage, Task
from veribatch.tasks.dafnycomp import data
from veribatch.tasks.sampling import model_run_sampling, resolve_samples
from veribatch.tasks.verifier import AcceptedVerifiers

STRIP_MODES = ("contracts", "reform")      # the default first
EXTRACT_MODES = ("whole", "first")


def _resolve(dataset: str) -> tuple[str, Path | None]:
    name, explicit = data.split_dataset_name(dataset)
    if name == "sample":
        return name, None
    return name, data.resolve_root(explicit)


class DafnyCompTask(Task):
    name = "dafnycomp"
    tables_module = "veribatch.tasks.dafnycomp.tables"
    cli_module = "veribatch.tasks.dafnycomp.cli"
    verifiers = AcceptedVerifiers("dafny-verify", "Dafny", default="dafny")
    default_dataset = "sample"

    def datasets(self) -> dict[str, str]:
        return dict(data.DESCRIPTIONS)

    def load(self, dataset: str, *, limit: int | None = None) -> list[Instance]:
        name, root = _resolve(dataset)
        if root is None:
            return data.load_sample(limit=limit)
        return data.load_folder(root, limit=limit)

    def dataset_hash(self, dataset: str) -> str:
        return data.dataset_hash(*_resolve(dataset))

    def default_options(self) -> dict[str, Any]:
        return {
            "verify": "auto",            # auto | on | off: the Dafny stage (auto: if Dafny runs here)
            "n_samples": 1,              # samples per instance; pass@k needs n >= k (Table 1: 8)
            "budget_s": 300.0,           # wall limit of one `dafny verify` (whole program)
            "obligation_time_limit_s": 30,  # --verification-time-limit (Dafny 4.10's default)
            "cores": 1,                  # --cores (and the verify stage's CPUs per task)
            "memory_mb": 8192,
            "runtime": "native",         # native | apptainer
            "image": "",                 # the dafny image (containers/dafny.def) for apptainer
            "cache_dir": "",             # verifier result cache (default: RUN/cache/dafny)
            "generate_batch": 16,
            "allow_other_dafny": False,  # run with a Dafny other than 4.10.x (not paper-comparable)
            "strength": True,            # Dafny-proved "spec as strong as the original" lemmas
            "strip": "contracts",        # contracts (§3.3) | reform (ReForm's scripts: also invariants, asserts, comments)
            "extract": "whole",          # whole (the most complete block) | first (ReForm's scripts' first ```dafny block)
        }

    def default_sampling(self, config_model: str | None) -> dict[str, Any]:
        if config_model is None:
            return {}
        from veribatch.tasks.dafnycomp.stages import MAX_TOKENS

        return model_run_sampling(MAX_TOKENS)

    def resolve_config(self, config: RunConfig) -> RunConfig:
        """The verifier is Dafny (its version, or why it cannot run, goes into the config, so
        a run with Dafny and one without have different ids); `--n` and `-o n_samples` are
        one knob; temperature 0 for one sample, 0.7 for several (recorded explicitly)."""
        from veribatch.tasks.dafnycomp.checker import resolve_verify_option

        config = resolve_samples(config)
        if config.model is None and int(config.options.get("n_samples", 1)) != 1:
            raise ValueError("n_samples applies to a model; the reference arms have one candidate each")
        for key, modes in (("strip", STRIP_MODES), ("extract", EXTRACT_MODES)):
            value = config.options.get(key, modes[0])
            if value not in modes:
                raise ValueError(f"{key}={value!r}: expected one of {', '.join(modes)}")
            if value == modes[0]:  # the default is not recorded, so default runs keep their ids
                config = replace(config, options={k: v for k, v in config.options.items() if k != key})
        return resolve_verify_option(config)

    def versions(self, config: RunConfig) -> dict[str, str]:
        from veribatch.tasks.dafnycomp.answer import EXTRACT_VERSION
        from veribatch.tasks.dafnycomp.failure_modes import FAILURE_MODES_VERSION
        from veribatch.tasks.dafnycomp.integrity import INTEGRITY_VERSION
        from veribatch.tasks.dafnycomp.prompt import template_hash
        from veribatch.tasks.dafnycomp.strength import STRENGTH_VERSION
        from veribatch.tasks.dafnycomp.strip import STRIP_VERSION
        from veribatch.tasks.dafnycomp.strip_reform import REFORM_STRIP_VERSION

        reform = config.options.get("strip") == "reform"
        out = {"strip": REFORM_STRIP_VERSION if reform else STRIP_VERSION, "integrity": INTEGRITY_VERSION,
               "failure_modes": FAILURE_MODES_VERSION, "strength": STRENGTH_VERSION}
        if config.model is not None:
            first = config.options.get("extract") == "first"
            out.update(prompt=template_hash("reform" if reform else "contracts"),
                       extract=EXTRACT_VERSION + ("+first-block" if first else ""))
        return out

    def unmet_requirements(self, config: RunConfig) -> str | None:
        if config.options.get("verify") == "unavailable":
            from veribatch.tasks.dafnycomp.checker import DAFNY_HINT, dafny_version

            _, why = dafny_version(config)
            return f"{why}\n{DAFNY_HINT}" if why else DAFNY_HINT
        return None

    def stages(self, config: RunConfig) -> list[Stage]:
        from veribatch.tasks.dafnycomp.stages import build_stages

        return build_stages(config)
