"""Planning a run: from CLI choices to a `RunConfig`, its run id and a shard assignment.

Planning writes no files: `--dry-run` prints exactly what a real launch would do.  The
assignment is fixed here (`launch.assignment`: instances sorted by id, shard k the
contiguous slice ``[k*n//S, (k+1)*n//S)``, or spread by the per-instance costs that
``$VERIBATCH_COSTS`` holds) and frozen into the run directory, so every stage of every
attempt on every node sees the same instances in shard k.
"""

from __future__ import annotations

import json
import os
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from veribatch.inference.providers import ENGINE_OPTIONS, engine_options
from veribatch.inference.redact import check_secret_value
from veribatch.inference.registry import local_model_problem, parse_spec
from veribatch.rundir.paths import AGGREGATE_STAGE
from veribatch.tasks.base import Instance, RunConfig, Stage, Task, UnknownNameError
from veribatch.tasks.sampling import check_sampling

from .assignment import Assignment, assign, contiguous, contiguous_bounds


class PlanError(ValueError):
    """A bad choice on the command line (unknown option, impossible shard count...)."""


# A run name is one directory inside the runs folder: an allow-list, so no '/', no '..', no
# leading '.', no whitespace or newline (the name is also written into sbatch scripts).
_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")


def check_run_name(name: str) -> str:
    """`name` if it names a directory directly inside the runs folder, else `PlanError`."""
    if not _RUN_NAME.fullmatch(name):
        raise PlanError(
            f"--run-name {name!r}: a run name is one directory inside the runs folder (--runs-dir "
            "chooses the folder): letters, digits and . _ + - only, starting with a letter or "
            "digit, at most 128 characters; not a path")
    return name


@dataclass
class Plan:
    config: RunConfig
    run_id: str
    stages: list[Stage]          # the task's stages, upstream first (aggregate is added by launch)
    instances: list[Instance]    # in shard order: shard k's (sorted by id) at shard_bounds()[k]
    assignment: Assignment | None = None   # None: contiguous by id

    @property
    def shards(self) -> int:
        return self.config.shards

    def shard_bounds(self) -> list[tuple[int, int]]:
        if self.assignment is None:
            return shard_bounds(len(self.instances), self.config.shards)
        return self.assignment.bounds()


def shard_bounds(n: int, shards: int) -> list[tuple[int, int]]:
    """Contiguous, deterministic, sizes differing by at most one."""
    return contiguous_bounds(n, shards)


def run_id_for(config: RunConfig) -> str:
    return f"{config.task}-{config.identity()[:12]}"


def _coerce(key: str, raw: str, default: Any) -> Any:
    """Parse `raw` to the type of the task's default for `key` (so `-o n=3` is an int)."""
    try:
        if isinstance(default, bool):
            low = raw.strip().lower()
            if low in {"1", "true", "yes", "on"}:
                return True
            if low in {"0", "false", "no", "off"}:
                return False
            raise ValueError("expected true/false")
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            return float(raw)
        if isinstance(default, str):
            return raw
        return json.loads(raw)  # lists, dicts, None: JSON on the command line
    except ValueError as e:
        kind = type(default).__name__ if default is not None else "JSON"
        raise PlanError(f"option {key}={raw!r}: not a valid {kind} ({e})") from None


def parse_options(task: Task, pairs: Sequence[str]) -> dict[str, Any]:
    """`key=value` pairs validated against `Task.default_options()`; defaults filled in.
    The engine's options (`inference.providers.ENGINE_OPTIONS`, e.g. ``reasoning_effort``)
    are accepted for every task and kept only when given, so a run without them keeps its id."""
    defaults = task.default_options()
    options = dict(defaults)
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise PlanError(f"option {pair!r}: expected key=value")
        if key in ENGINE_OPTIONS and key not in defaults:
            options[key] = raw.strip()
            continue
        if key not in defaults:
            known = ", ".join(sorted(defaults)) or "none"
            raise PlanError(f"unknown option {key!r} for task {task.name}; known options: {known}")
        options[key] = _coerce(key, raw, defaults[key])
    return options


def make_config(
    task: Task,
    *,
    dataset: str | None = None,
    model: str | None = None,
    sampling: Mapping[str, Any] | None = None,
    options: Sequence[str] = (),
    shards: int = 1,
    limit: int | None = None,
    strategy: str | None = None,
    verifier: str | None = None,
    sample: int | None = None,
    sample_seed: int = 0,
) -> RunConfig:
    dataset = dataset or task.default_dataset
    known = task.datasets()
    if dataset not in known and not _looks_like_path(dataset):
        raise UnknownNameError(
            f"unknown dataset {dataset!r} for task {task.name}; known datasets: "
            + ", ".join(sorted(known))
        )
    if shards < 1:
        raise PlanError(f"--shards must be at least 1, got {shards}")
    if limit is not None and limit < 1:
        raise PlanError(f"--limit must be at least 1, got {limit}")
    if sample is not None and (sample < 1 or limit is not None):
        raise PlanError(f"--sample {sample}: must be at least 1, and not with --limit (first K)")
    if model is not None:
        check_model_spec(model)  # an unknown engine or a missing path fails before any write
    merged = dict(task.default_sampling(model))
    merged.update({k: v for k, v in (sampling or {}).items() if v is not None})
    kwargs: dict[str, Any] = {}
    strategy = strategy or task.strategies[0]
    if strategy not in task.strategies:
        raise PlanError(f"unknown strategy {strategy!r} for task {task.name}; known strategies: "
                        + ", ".join(task.strategies))
    kwargs["strategy"] = strategy
    verifier = verifier or task.verifiers[0]
    if verifier not in task.verifiers:
        raise PlanError(f"unknown verifier {verifier!r} for task {task.name}; known verifiers: "
                        + ", ".join(task.verifiers))
    kwargs["verifier"] = verifier
    config = RunConfig(
        task=task.name,
        dataset=dataset,
        dataset_hash=task.dataset_hash(dataset),
        model=model,
        sampling=merged,
        shards=shards,
        limit=limit,
        sample=sample,
        sample_seed=sample_seed if sample is not None else 0,
        options=parse_options(task, options),
        **kwargs,
    )
    try:
        engine_options(model, dict(config.options))
    except ValueError as exc:
        raise PlanError(str(exc)) from None
    check_sampling(config)  # --n 0, --temperature -1, --max-tokens 0: refused for every task
    config = task.resolve_config(config)
    return replace(config, versions=dict(task.versions(config)))


def check_model_spec(model: str) -> None:
    """Fail at plan time — not after the baseline stage has run for an hour — on a model
    spec that cannot work: an unknown engine, a local model path (hf:/..., vllm:./...) that
    does not exist or is not a model folder (config.json and weights), a replay source
    that is not a directory, or an ``openai:`` key with surrounding whitespace."""
    kind, name = parse_spec(model)
    path = Path(name).expanduser()
    if kind == "openai":  # the key goes in a header: a '\r' fails every request, quoting it
        problem = check_secret_value("OPENAI_API_KEY", os.environ.get("OPENAI_API_KEY"))
        if problem:
            raise PlanError(f"--model {model}: {problem}")
    if kind == "replay":
        if not path.is_dir():
            raise PlanError(f"--model {model}: replay needs a run directory; {path} "
                            f"{'is not a directory' if path.exists() else 'does not exist'}")
    elif kind in ("hf", "vllm") and name.startswith(("/", ".", "~")) and not path.exists():
        raise PlanError(f"--model {model}: no model at {path} (a path, since it starts with "
                        "'/', '.' or '~'; a hub name looks like ORG/NAME)")
    elif kind in ("hf", "vllm") and path.exists():  # a local folder wins over a hub name
        problem = local_model_problem(kind, path)
        if problem:
            raise PlanError(f"--model {model}: {problem}")


def _looks_like_path(dataset: str) -> bool:
    return "/" in dataset or dataset.startswith(".")


_FROM_ENV = Path("$VERIBATCH_COSTS")


def make_plan(task: Task, config: RunConfig, costs: Path | None = _FROM_ENV) -> Plan:
    """The plan of `config`; `costs` the measured-costs file whose per-instance costs spread
    the instances over the shards (`launch.assignment`), by default ``$VERIBATCH_COSTS``
    (unset, or no per-instance costs for this run: contiguous by id)."""
    instances = sorted(task.load(config.dataset, limit=config.limit), key=lambda i: i.id)
    if config.sample is not None:
        try:
            instances = sample_instances(instances, config.sample, config.sample_seed)
        except ValueError as e:
            raise PlanError(f"dataset {config.dataset!r}: {e}") from None
    seen: set[str] = set()
    for inst in instances:
        if inst.id in seen:
            raise PlanError(f"dataset {config.dataset!r} has duplicate instance id {inst.id!r}")
        seen.add(inst.id)
    if not instances:
        raise PlanError(f"dataset {config.dataset!r} has no instances")
    if config.shards > len(instances):
        raise PlanError(
            f"--shards {config.shards} exceeds the {len(instances)} instances of {config.dataset!r}"
        )
    stages = task.stages(config)
    names = [s.name for s in stages]
    for i, s in enumerate(stages):
        if s.name == AGGREGATE_STAGE or names.count(s.name) > 1:
            raise PlanError(f"task {task.name}: stage name {s.name!r} is reserved or repeated")
        for need in s.needs:
            if need not in names[:i]:
                raise PlanError(f"task {task.name}: stage {s.name!r} needs {need!r}, which is not upstream")
    return Plan(config=config, run_id=run_id_for(config), stages=stages,
                **_assigned(instances, config, [s.name for s in stages], costs))


def _assigned(instances: list[Instance], config: RunConfig, stages: list[str],
              costs: Path | None) -> dict[str, Any]:
    """`instances` (sorted by id) in shard order, and the assignment that orders them."""
    from .measured import CostsError, costs_path, expected_costs

    path = costs_path() if costs is _FROM_ENV else costs
    ids = [i.id for i in instances]
    try:
        expected = expected_costs(path, config.to_json(), stages)
    except CostsError as e:  # the spread is an optimisation: the run goes on, and says why
        cut = contiguous(ids, config.shards)
        a = Assignment(cut.method, cut.shards, {"file": str(path), "error": str(e)})
    else:
        a = contiguous(ids, config.shards) if expected is None else assign(
            ids, config.shards, expected.seconds,
            {"file": expected.file, "sha256": expected.sha256, "stages": list(expected.stages)})
    by_id = {i.id: i for i in instances}
    return {"instances": [by_id[i] for ids_k in a.shards for i in ids_k], "assignment": a}


def sample_instances(instances: list[Instance], k: int, seed: int) -> list[Instance]:
    """A seeded random sample of `k` instances, sorted by id (`--sample K --sample-seed S`).

    Drawn from the instances sorted by id, so the same dataset, K and seed give the same
    sample on any machine; K and the seed are in the run config, hence in the run id."""
    pool = sorted(instances, key=lambda i: i.id)
    if not 1 <= k <= len(pool):
        raise ValueError(f"--sample {k}: the dataset has {len(pool)} instances")
    return sorted(random.Random(seed).sample(pool, k), key=lambda i: i.id)
