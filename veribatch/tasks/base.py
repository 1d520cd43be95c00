"""The contract between a benchmark task and the run machinery: where a benchmark plugs in.

A task knows its data, its stages and how to turn one instance into records; it knows
nothing about shards, ledgers, SLURM or resumption.  `launch/` knows nothing about any
benchmark.  Everything that crosses that line is defined in this module, so the whole
extension point is on one page (docs/adding-a-benchmark.md walks through writing a task).

A task is a `Task` subclass declared as an entry point in the group ``veribatch.tasks``
(``veribatch/registry.py``) — by this project's ``pyproject.toml`` for the benchmarks in
``veribatch/tasks/<name>/``, or by any installed package for its own; that alone makes it
``launch <name>``, with every generic option, executor, ``status``/``resume``/``regress``/
``report``.  Its tables are ``build_tables`` in `Task.tables_module` (aggregation reads files
only, so that module imports nothing of the task's stages); its own sub-commands are
``register`` in `Task.cli_module`.

What `launch` calls, in this order:

1. `Task.datasets`, `Task.default_options`, `Task.default_sampling(model)` — to parse the
   command line: ``--dataset`` must be a known name (or a path), every ``-o key=value``
   must be a key of `default_options` (its value is coerced to the default's type).
2. `Task.dataset_hash(dataset)`, then `Task.resolve_config(config)` — once, at plan time:
   fill in what only the task knows (a verifier's version, resolved limits) and refuse an
   impossible combination with `ValueError` (exit 2, nothing written).
3. `Task.versions(config)` — stored in `RunConfig.versions`; the run id is then taken from
   the config (`RunConfig.identity`).
4. `Task.load(dataset, limit)` — once, at plan time (``--sample`` draws from what it
   returns; ids must be unique).  The instances are written into the run directory
   (``instances.jsonl``) and every worker reads them back from there, so an `Instance`'s
   payload and meta must be JSON values, and `load` is not called again for the run.
5. `Task.stages(config)`, `Task.unmet_requirements(config)` — at plan time and again in
   every worker, from the config in the run's manifest: `stages` must be a function of
   the config alone (a stage gets nothing else that was set at plan time).
6. For every (stage, shard), in the order of `needs`: ``stage.run(instances, ctx)`` with
   the instances of that shard *not yet recorded* in the shard's ledger — a resumed shard
   gets only what is missing.  `run` yields one `InstanceResult` per instance, as soon as
   it is done; `launch/` appends it to the ledger before asking for the next, so a killed
   shard loses at most the instance in flight.  ``ctx.upstream(stage)`` returns the records
   of a stage named in `needs` for this shard (as the parquet file holds them: a column
   another record of that stage had reads as None).
7. When every shard is done, the aggregate step: ``build_tables`` of
   `Task.tables_module` on the run's records; `launch regress`, `nightly`
   and `report` compare runs by what `Stage` and `aggregate.table.Table` declare, and never
   name a task.

What a task must keep true:

- Every per-instance failure it can foresee (unparsable model answer, verifier crash,
  timeout, an upstream record missing) is a record carrying a status.  An exception
  escaping `run` means the *shard* failed (infrastructure): it is retried by `launch
  resume` and never recorded as a verdict.
- Records are flat dicts of JSON scalars (str, int, float, bool, None); nested values are
  JSON-encoded strings, so every stage's records fit one parquet schema.  A column keeps
  one type across records.  `launch/` adds ``instance_id``, ``stage`` and ``shard`` itself
  (a record may not set ``stage`` or ``shard``, nor another instance's id).
- Without ``--model`` a task runs its reference arms (a verifier's own answer, a trivial
  baseline), labelled as what they are — never presented as model output.
- The model's stage is the shared one (`tasks.generate.Generate`): a task says what to ask
  per instance and which columns each answer's record gets; the loop, the batching, the
  completion cache and the common columns are not written again.
- A change to what turns inputs into results (a prompt template, a parser, an encoding)
  shows in `versions`, so it makes a new run id instead of mixing old and new answers.

`tests/tasks/test_task_conformance.py` checks every registered task against this contract.
"""

from __future__ import annotations

import hashlib
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

Resource = Literal["cpu", "gpu"]
Record = dict[str, Any]


class DatasetError(ValueError):
    """Bad or missing benchmark data.  The message must name the file, row or instance."""


class UnknownNameError(KeyError):
    """An unknown task, dataset, engine or tool was asked for; the message lists the known ones."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it readable.
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class Instance:
    """One benchmark item.  `id` is stable across runs and machines: `<dataset>/<split>/<file>`."""

    id: str
    task: str
    split: str
    payload: Mapping[str, Any]
    meta: Mapping[str, Any] = field(default_factory=dict)


def instance_dirname(instance_id: str) -> str:
    """An instance id as one path component (ids hold ``/``), for its folder under a shard's
    scratch directory."""
    return instance_id.replace("/", "__")


@dataclass(frozen=True)
class InstanceResult:
    """What one stage produced for one instance: zero or more records (e.g. one per candidate)."""

    instance_id: str
    records: list[Record]


@dataclass(frozen=True)
class RunConfig:
    """Everything that changes a run's results.  Its hash (see `identity`) is the run id's core.

    `model` is an engine spec such as ``hf:/path/to/model`` or ``vllm:Qwen/Qwen2.5-72B-Instruct``;
    ``None`` means the task's reference arms (no model).  `options` holds task-specific
    knobs (InvBench: ``budget_s``, ``n_samples``...) with the task's defaults already applied.
    """

    task: str
    dataset: str
    dataset_hash: str
    model: str | None = None
    sampling: Mapping[str, Any] = field(default_factory=dict)
    strategy: str = "default"
    verifier: str = "z3"
    verifier_version: str = ""
    limits: Mapping[str, Any] = field(default_factory=dict)
    shards: int = 1
    limit: int | None = None
    # `--sample K --sample-seed S`: a seeded random sample of K instances (InvBench §5.4's
    # "random sample of 100 problems"); `limit` takes the first K instead.
    sample: int | None = None
    sample_seed: int = 0
    options: Mapping[str, Any] = field(default_factory=dict)
    # Versions of what turns inputs into results beyond the fields above: prompt templates,
    # answer parsers, the verifier encoding...  Filled at plan time from `Task.versions`, so a
    # changed template is a new run id rather than a silent mix of old and new outputs.
    versions: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        if d["sample"] is None:  # no sample: the run id of a config from before the option
            del d["sample"], d["sample_seed"]
        return json.loads(json.dumps(d, sort_keys=True, default=str))

    def identity(self) -> str:
        """A sha256 over the canonical JSON of the config; same inputs ⇒ same hash."""
        blob = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


CPUS_ENV = "VERIBATCH_CPUS"


def granted_cpus() -> int:
    """CPUs this shard was given: what the local executor granted (``VERIBATCH_CPUS``, which
    may be fewer than the stage asked for on a small machine), SLURM's
    ``SLURM_CPUS_PER_TASK``, else the affinity mask.  A stage that runs several tools at once
    (InvBench's d_a ∥ d_b) reads it so as not to starve them below what it assumes."""
    for var in (CPUS_ENV, "SLURM_CPUS_PER_TASK"):
        value = os.environ.get(var, "")
        if value.isdigit() and int(value) > 0:
            return int(value)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


class StageContext(Protocol):
    """What a running stage may ask of the run machinery (implemented in `launch/`)."""

    run_dir: Path
    stage: str
    shard: int
    config: RunConfig

    def upstream(self, stage: str) -> dict[str, list[Record]]:
        """Records of an upstream stage for this shard's instances, keyed by instance id."""
        ...

    def scratch_dir(self) -> Path:
        """A per-shard directory for logs, generated programs, caches (kept for post-mortems)."""
        ...

    def progress(self, advance: int = 1) -> None:
        """Tell the progress display that `advance` instances finished."""
        ...

    def note(self, key: str, value: float | int | str | None) -> None:
        """A fact about this shard's run as a whole, not of one instance (the generate
        stage's engine load seconds): kept in the shard's stats.json under ``notes``,
        where `launch.measured` reads it back for sizing."""
        ...


StageFn = Callable[[list[Instance], StageContext], Iterator[InstanceResult]]


@dataclass(frozen=True)
class Stage:
    """One step of a run.  Shard k of a stage reads shard k of every stage in `needs`, which
    must come earlier in `Task.stages`.

    On SLURM this becomes one job array on the `resource` partition, depending
    element-wise (``aftercorr``) on the arrays of `needs`; locally, one worker process per
    shard.  `cpus_per_task`, `gpus_per_task` and `mem_gb` are floors (a SLURM profile may
    raise them); `seconds_per_instance` sizes time limits.  The names ``aggregate`` (added
    by `launch/`) and repeated names are refused.
    """

    name: str
    resource: Resource
    run: StageFn
    needs: tuple[str, ...] = ()
    cpus_per_task: int = 1
    gpus_per_task: int = 0
    mem_gb: int = 4
    # Wall-time estimate for one instance, used to size SLURM time limits.
    seconds_per_instance: float = 60.0
    # What `launch regress` compares per instance between two runs; a task declares it here so
    # the comparison needs to know no task by name.  None: the stage has no such column (every
    # task's stages declare a verdict column: a stage without one is invisible to regress, and
    # the conformance test refuses it).
    verdict_column: str | None = None      # record column holding the verdict / status
    time_column: str | None = None         # record column: seconds the record's work took
    time_limit_column: str | None = None   # record column: the limit that time ran under
    # Columns that tell apart several records of one instance (e.g. ``("sample",)``); records
    # of the two runs are matched on (instance_id, *record_key).
    record_key: tuple[str, ...] = ()
    # Only records whose columns hold these values are compared (e.g. ``{"kind": "instance"}``
    # when the stage also writes per-candidate detail records); empty: every record.
    record_filter: Mapping[str, Any] = field(default_factory=dict)


class Task(ABC):
    """A benchmark family.  Subclasses are installed as entry points (group ``veribatch.tasks``)
    and found by name (`task_class`).

    A subclass must define `name`, `default_dataset` (one of `datasets()`), `datasets`,
    `load`, `dataset_hash` and `stages`; everything else has a default that fits a task
    without options, sampling defaults or versioned templates (`launch` calls them in the
    order the module docstring gives)."""

    name: ClassVar[str]
    default_dataset: ClassVar[str]
    # Dotted names of the task's own modules, imported only when needed: `tables_module`
    # defines ``build_tables`` (the aggregate step; it reads files only), `cli_module`
    # defines ``register(app, task_apps)`` adding the task's own sub-commands.  None: none.
    tables_module: ClassVar[str | None] = None
    cli_module: ClassVar[str | None] = None
    # `--strategy` values this task understands; the first is the default.  `launch/` refuses
    # any other string before it can reach a run id.
    strategies: ClassVar[tuple[str, ...]] = ("default",)
    # `--verifier` values this task can use; the first is the default.  Refused like strategies,
    # so a task never silently replaces the verifier a user asked for.
    verifiers: ClassVar[tuple[str, ...]] = ("z3",)

    @abstractmethod
    def datasets(self) -> dict[str, str]:
        """Known dataset names → one-line description (where it comes from)."""

    @abstractmethod
    def load(self, dataset: str, *, limit: int | None = None) -> list[Instance]:
        """Instances of `dataset` in a stable order.  Raises `DatasetError` / `UnknownNameError`."""

    @abstractmethod
    def dataset_hash(self, dataset: str) -> str:
        """Content hash of the dataset's files, so changed data ⇒ a new run id."""

    @abstractmethod
    def stages(self, config: RunConfig) -> list[Stage]:
        """The stages of a run with this config, upstream first (aggregate is added by `launch/`)."""

    def default_options(self) -> dict[str, Any]:
        """Task-specific options and their defaults (merged into `RunConfig.options`)."""
        return {}

    def default_sampling(self, config_model: str | None) -> dict[str, Any]:
        """Sampling parameters used when the user gives none."""
        return {}

    def versions(self, config: RunConfig) -> dict[str, str]:
        """Versions (short hashes or labels) of the prompt template(s), answer parser and
        verifier encoding this config uses.  `launch/` stores them in `RunConfig.versions`,
        which is part of the run identity: editing a template must not let `resume` mix
        answers to the old prompt with answers to the new one.  Called after
        `resolve_config`."""
        return {}

    def unmet_requirements(self, config: RunConfig) -> str | None:
        """Why part of this config's work cannot be done on this machine, and how to get what
        is missing (e.g. a verifier that is not installed); None when nothing is missing.
        `launch` runs the stages that can run, then prints this and exits 2, so a run whose
        main stage was left out never looks like a finished one.  The task decides at
        `resolve_config` time (recording it in the config, hence in the run id) and leaves
        the stages that cannot run out of `stages`."""
        return None

    def resolve_config(self, config: RunConfig) -> RunConfig:
        """Fill what the task alone knows before the run id is taken (verifier version or image
        digest, limits...), so that a change in them makes a new run id.  Called once, at plan
        time, by `launch/`; the default changes nothing.  Use `dataclasses.replace`."""
        return config


def task_class(name: str) -> type[Task]:
    """The `Task` subclass installed as `name` (entry point group ``veribatch.tasks``).

    Raises `UnknownNameError` listing the installed tasks; `TypeError` for an entry point
    that is no `Task` or names itself otherwise (the conformance test catches both first)."""
    from veribatch import registry

    try:
        cls = registry.load(registry.TASKS, name)
    except registry.UnregisteredNameError as e:
        known = ", ".join(e.known) or "none"
        raise UnknownNameError(f"unknown task {name!r}; known tasks: {known}") from None
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise TypeError(f"{registry.target(registry.TASKS, name)} is not a tasks.base.Task")
    if cls.name != name:
        raise TypeError(f"{registry.target(registry.TASKS, name)} is installed as {name!r} "
                        f"but names itself {cls.name!r}")
    return cls


def get_task(name: str) -> Task:
    """A fresh instance of the task installed as `name`."""
    return task_class(name)()


def task_names() -> list[str]:
    """The installed tasks' names; imports none of them."""
    from veribatch import registry

    return registry.names(registry.TASKS)
