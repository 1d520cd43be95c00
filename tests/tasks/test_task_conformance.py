"""Every registered task keeps the contract of `tasks.base` — BenchExec runs one test over
every tool-info module; this file is that for tasks: what a task declares, the stages it
builds (without and with a model), what those stages record when they run on a small
input, and the tables its aggregate module builds from those records.

A new task is checked here without being named here.  `test_the_checks_catch_what_a_task_forgets`
shows that each check fails for a task that forgets what it guards.  The model is a stub
engine (`conformance:echo`): the contract is about columns and declarations, not answers.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.support.plugins import install
from veribatch import registry as plugins
from veribatch.aggregate.build import build
from veribatch.aggregate.table import Table
from veribatch.inference.types import Completion, Engine, Request
from veribatch.launch.manifest import create_or_reuse
from veribatch.launch.plan import make_config, make_plan, parse_options
from veribatch.launch.shard_loop import run_shard
from veribatch.tasks.base import (
    Instance,
    InstanceResult,
    RunConfig,
    Stage,
    StageContext,
    Task,
    get_task,
    task_class,
    task_names,
)
from veribatch.tasks.generate import Generate

# Every installed task: ours and any other installed package's (tests/test_plugins.py runs
# this module in a venv with a toy benchmark installed).  Test modules that define fakes of
# their own install them only for their own tests (tests/support/plugins.py).
TASKS = task_names()
# Tasks whose per-stage summary (`aggregate.build.summary_table`) is their only table.
NO_TABLES = {"selftest": "a cluster smoke test: no research question, the summary is its table"}
STUB = "conformance:echo"
LIMIT = 3  # instances per small run: enough that every declared column shows up
JSON_TYPES = (type(None), bool, int, float, str, list, dict)


class EchoEngine(Engine):
    """Answers every request with the same short text, `n` times: no model, no GPU."""

    engine = "conformance"
    revision = ""

    def __init__(self, name: str, **_: Any) -> None:
        self.model = name

    def generate(self, requests: Sequence[Request]) -> list[list[Completion]]:
        return [[Completion(r.id, i, "```\nanswer\n```\nGENUINE", "stop", 1, 4, 0.001, self.engine,
                            self.model, "", r.sampling.to_json()) for i in range(r.sampling.n)]
                for r in requests]


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Iterator[Path]:
    """The stub engine registered, a private download cache, REFUTE's pinned templates from
    the shared copy (no network)."""
    with pytest.MonkeyPatch.context() as mp:
        install(mp, plugins.ENGINES, "conformance", EchoEngine)
        mp.setenv("VERIBATCH_CACHE", str(tmp_path_factory.mktemp("cache")))
        mp.setenv("VERIBATCH_REFUTE_PROMPTS", str(shared_data / "refute-prompts"))
        yield tmp_path_factory.mktemp("runs")


# ---------------------------------------------------------------- the checks


def check_declarations(task: Task) -> None:
    assert task.name and task.name.replace("_", "").isalnum(), f"{task.name!r}: not a `launch` command name"
    datasets = task.datasets()
    assert datasets and all(isinstance(k, str) and isinstance(v, str) and v for k, v in datasets.items())
    assert task.default_dataset in datasets, f"default dataset {task.default_dataset!r} not in {list(datasets)}"
    for what in ("strategies", "verifiers"):
        names = getattr(task, what)
        assert isinstance(names, tuple) and names, f"{what}: a non-empty tuple, the default first"
        assert all(isinstance(n, str) and n for n in names) and len(set(names)) == len(names), what


def check_options(task: Task) -> None:
    """Every default can be given back on the command line (``-o key=value``)."""
    options = task.default_options()
    for key, value in options.items():
        assert isinstance(key, str) and key and "=" not in key, key
        assert isinstance(value, JSON_TYPES), f"option {key}: {type(value).__name__} is no JSON value"
        json.dumps(value)
        text = json.dumps(value) if isinstance(value, (list, dict, type(None))) else str(value).lower() \
            if isinstance(value, bool) else str(value)
        assert parse_options(task, [f"{key}={text}"])[key] == value, f"-o {key}={text}"


def check_stages(task: Task, config: RunConfig) -> list[Stage]:
    stages = task.stages(config)
    assert stages, "no stages"
    names = [s.name for s in stages]
    assert len(set(names)) == len(names) and "aggregate" not in names, names
    assert [s.name for s in task.stages(config)] == names, "stages must be a function of the config"
    for i, s in enumerate(stages):
        assert callable(s.run), s.name
        assert all(n in names[:i] for n in s.needs), f"{s.name} needs {s.needs}, upstream are {names[:i]}"
        assert s.resource in ("cpu", "gpu"), s.resource
        assert s.cpus_per_task >= 1 and s.mem_gb >= 1 and s.seconds_per_instance > 0, s
        assert (s.gpus_per_task >= 1) == (s.resource == "gpu"), f"{s.name}: gpus_per_task vs resource"
        for col in (s.verdict_column, s.time_column, s.time_limit_column, *s.record_key, *s.record_filter):
            assert col is None or (isinstance(col, str) and col), s.name
        assert s.verdict_column is not None, f"{s.name}: no verdict_column, `launch regress` has nothing to compare"
        if s.resource == "gpu" and config.model is not None:
            assert shared_generate(s), f"{s.name}: a model stage that is not the shared `tasks.generate.Generate`"
    return stages


def shared_generate(stage: Stage) -> bool:
    return isinstance(getattr(stage.run, "__self__", None), Generate)


def check_versions(task: Task, config: RunConfig) -> None:
    versions = task.versions(config)
    assert all(isinstance(k, str) and isinstance(v, str) and v for k, v in versions.items()), versions
    assert versions == task.versions(config) == type(task)().versions(config), "versions must be stable"
    assert dict(config.versions) == versions


def check_aggregate_module(cls: type[Task]) -> None:
    if cls.name in NO_TABLES:
        return
    name = cls.name
    dotted = cls.tables_module
    assert dotted, f"{name}: no Task.tables_module (the module defining build_tables)"
    module = importlib.import_module(dotted)
    assert callable(getattr(module, "build_tables", None)), f"{dotted}: no build_tables"


def check_records(stages: Sequence[Stage], *runs: dict[str, list[dict[str, Any]]]) -> None:
    """What `launch regress` compares per stage is in the records: the declared columns are
    columns of the compared records (of some run the stage took part in), and within a run
    (instance_id, *record_key) tells them apart."""
    for s in stages:
        compared = [[r for r in run[s.name] if all(r.get(k) == v for k, v in s.record_filter.items())]
                    for run in runs if run.get(s.name)]
        assert compared, f"stage {s.name}: no records on the small input"
        have = {k for recs in compared for r in recs for k in r}
        assert have, f"stage {s.name}: no record passes record_filter {dict(s.record_filter)}"
        for col in (s.verdict_column, s.time_column, s.time_limit_column, *s.record_key, *s.record_filter):
            assert col is None or col in have, f"stage {s.name}: declared column {col!r} is in no record"
        for recs in compared:
            keys = [(r["instance_id"], *(r.get(k) for k in s.record_key)) for r in recs]
            assert len(set(keys)) == len(keys), f"stage {s.name}: record_key {s.record_key} repeats"


def check_tables(name: str, tables: Sequence[Table]) -> None:
    own = [t for t in tables if not t.key.startswith("summary_")]
    assert own or name in NO_TABLES, f"veribatch.tasks.{name}.tables built no table"
    for t in own:
        assert t.key and t.title, t
        if t.frame.empty:
            continue
        cols = set(t.frame.columns)
        assert set(t.index) <= cols, f"{t.key}: index {t.index} not in {sorted(cols)}"
        assert set(t.metrics) <= cols, f"{t.key}: metrics {sorted(set(t.metrics) - cols)} not columns"
        for col, m in t.metrics.items():
            assert m.kind != "rate" or m.n_column in cols, f"{t.key}: {col} counts over {m.n_column!r}"


# ---------------------------------------------------------------- registered tasks


@pytest.mark.parametrize("name", TASKS)
def test_declarations(name: str) -> None:
    check_declarations(get_task(name))
    check_options(get_task(name))
    check_aggregate_module(task_class(name))


@pytest.mark.parametrize("name", TASKS)
def test_stages_and_versions_of_the_default_config(name: str, env: Path) -> None:
    task = get_task(name)
    config = make_config(task)
    check_stages(task, config)
    check_versions(task, config)
    assert make_plan(task, config).stages


def _small_run(task: Task, config: RunConfig, root: Path) -> tuple[dict[str, list[dict[str, Any]]], list[Table]]:
    """Plan, run every shard in this process (stub engine visible), aggregate."""
    plan = make_plan(task, config)
    rd, _ = create_or_reuse(plan, root)
    records = {}
    for s in plan.stages:
        run_shard(rd.root, s.name, 0, fsync=False)
        records[s.name] = pq.read_table(rd.records(s.name, 0)).to_pylist()
    dotted = type(task).tables_module
    tables_fn = importlib.import_module(dotted).build_tables if dotted else None
    return records, build(rd.root, tables_fn=tables_fn).tables


def _model_config(task: Task, reference_run: Path) -> RunConfig:
    """A model run of the default dataset; a task whose model runs read what its reference
    run built (CE-Bench evaluates the dataset a build run wrote) gets that run's directory."""
    try:
        return make_config(task, model=STUB, limit=LIMIT)
    except ValueError:
        return make_config(task, model=STUB, limit=LIMIT, dataset=str(reference_run))


@pytest.mark.slow
@pytest.mark.parametrize("name", TASKS)
def test_a_small_run_records_what_its_stages_declare(name: str, env: Path) -> None:
    task = get_task(name)
    reference = make_config(task, limit=LIMIT)
    stages = {s.name: s for s in check_stages(task, reference)}
    records, tables = _small_run(task, reference, env / f"{name}-reference")
    check_tables(name, tables)
    model = _model_config(task, env / f"{name}-reference")
    check_versions(task, model)
    model_stages = check_stages(task, model)
    if [s.name for s in model_stages] != list(stages):  # the task asks the model (selftest does not)
        assert any(shared_generate(s) for s in model_stages), "a model run without the shared generate stage"
    model_records, tables = _small_run(task, model, env / f"{name}-model")
    check_tables(name, tables)
    for s in model_stages:  # a stage is checked on the records of every run it took part in
        stages.setdefault(s.name, s)
    check_records(list(stages.values()), records, model_records)


# ---------------------------------------------------------------- the checks themselves


class _Ask(Generate):
    def request(self, inst: Instance, config: RunConfig, sampling: Any, upstream: list) -> Any:
        from veribatch.inference.types import Message

        return Request(inst.id, (Message("user", str(inst.payload["n"])),), sampling)


def _check(instances: list[Instance], ctx: StageContext) -> Iterator[InstanceResult]:
    for inst in instances:
        yield InstanceResult(inst.id, [{"verdict": "ok", "check_s": 0.0}])


class _Toy(Task):
    """A task that keeps the contract; each test below breaks one thing."""

    name = "toy"
    default_dataset = "two"

    def datasets(self) -> dict[str, str]:
        return {"two": "two instances"}

    def load(self, dataset: str, *, limit: int | None = None) -> list[Instance]:
        return [Instance(f"toy/two/{k}", "toy", "two", {"n": k}) for k in range(2)][:limit]

    def dataset_hash(self, dataset: str) -> str:
        return "0" * 64

    def default_options(self) -> dict[str, Any]:
        return {"budget_s": 1.0, "generate_batch": 16}

    def stages(self, config: RunConfig) -> list[Stage]:
        ask = [_Ask().stage(config)] if config.model else []
        return [*ask, Stage("check", "cpu", _check, needs=tuple(s.name for s in ask),
                            verdict_column="verdict", time_column="check_s")]


def test_the_checks_catch_what_a_task_forgets(env: Path) -> None:
    toy = _Toy()
    config = make_config(toy, model=STUB)
    check_declarations(toy)
    check_options(toy)
    check_stages(toy, config)
    check_versions(toy, config)
    stages = toy.stages(config)
    good = {"generate": [{"instance_id": "a", "sample_index": 0, "status": "ok", "generation_time_s": 0.1}],
            "check": [{"instance_id": "a", "verdict": "ok", "check_s": 0.0}]}
    check_records(stages, good)

    class NoDefault(_Toy):
        default_dataset = "three"

    class OddOption(_Toy):
        def default_options(self) -> dict[str, Any]:
            return {"budget_s": 1.0, "limits": {1, 2}}

    class OwnLoop(_Toy):
        def stages(self, config: RunConfig) -> list[Stage]:
            return [Stage("generate", "gpu", _check, gpus_per_task=1, verdict_column="verdict"),
                    *super().stages(config)[1:]]

    class WrongOrder(_Toy):
        def stages(self, config: RunConfig) -> list[Stage]:
            return list(reversed(super().stages(config)))

    class Unstable(_Toy):
        calls = 0

        def versions(self, config: RunConfig) -> dict[str, str]:
            Unstable.calls += 1
            return {"prompt": str(Unstable.calls)}

    with pytest.raises(AssertionError, match="default dataset"):
        check_declarations(NoDefault())
    with pytest.raises(AssertionError, match="no JSON value"):
        check_options(OddOption())
    with pytest.raises(AssertionError, match="not the shared"):
        check_stages(OwnLoop(), config)
    with pytest.raises(AssertionError, match="needs"):
        check_stages(WrongOrder(), config)
    with pytest.raises(AssertionError):
        check_versions(Unstable(), config)
    with pytest.raises(AssertionError, match="no Task.tables_module"):
        check_aggregate_module(_Toy)
    with pytest.raises(AssertionError, match="'check_s' is in no record"):
        check_records(stages, {**good, "check": [{"instance_id": "a", "verdict": "ok"}]})
    with pytest.raises(AssertionError, match="record_key"):
        check_records(stages, {**good, "generate": good["generate"] * 2})
    check_records(stages, good, good)  # two runs: a key repeats across runs, not within one
    with pytest.raises(AssertionError, match="no records"):
        check_records(stages, {"check": good["check"]})
