"""The shard loop in-process: ordering of writes, and stage misbehaviour failing the shard."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest

import veribatch.launch.shard_loop as loop
from tests.support.plugins import installed
from veribatch import registry
from veribatch.launch.manifest import create_or_reuse
from veribatch.launch.run_control import plan_run
from veribatch.launch.shard_loop import ShardBusyError, ShardError, run_shard, shard_lock
from veribatch.tasks.base import Instance, InstanceResult, RunConfig, Stage, Task


class Misbehaving(Task):
    """A test-only task whose single stage misbehaves in the way `mode` says."""

    name = "misbehaving-test"
    default_dataset = "four"
    modes: ClassVar[dict[str, Any]] = {}

    def datasets(self) -> dict[str, str]:
        return {"four": "4 instances"}

    def load(self, dataset: str, *, limit: int | None = None) -> list[Instance]:
        return [Instance(f"m/{i}", self.name, "four", {"i": i}) for i in range(4)]

    def dataset_hash(self, dataset: str) -> str:
        return "0" * 64

    def default_options(self) -> dict[str, Any]:
        return {"mode": "ok"}

    def stages(self, config: RunConfig) -> list[Stage]:
        mode = config.options["mode"]

        def run(instances, ctx):
            for inst in instances:
                if mode == "foreign":
                    yield InstanceResult("m/999", [])
                elif mode == "twice":
                    yield InstanceResult(inst.id, [{"x": 1}])
                    yield InstanceResult(inst.id, [{"x": 1}])
                elif mode == "mixed":
                    yield InstanceResult(inst.id, [{"x": 1 if inst.payload["i"] else "one"}])
                elif mode == "short":
                    return
                elif mode == "upstream":
                    ctx.upstream("solve")
                else:
                    yield InstanceResult(inst.id, [{"x": inst.payload["i"]}] * inst.payload["i"])

        return [Stage("solve", "cpu", run)]


@pytest.fixture(autouse=True)
def _installed() -> Iterator[None]:
    with installed(registry.TASKS, Misbehaving.name, Misbehaving):
        yield


def make_run(tmp_path, mode="ok"):
    plan = plan_run("misbehaving-test", options=[f"mode={mode}"])
    rd, _ = create_or_reuse(plan, tmp_path / "run")
    return rd


@pytest.mark.parametrize("mode,message", [
    ("foreign", "not a pending instance"),
    ("twice", "yielded 'm/0' twice"),
    ("mixed", "column 'x' mixes types"),
    ("short", "without results for 4 instance"),
    ("upstream", "does not declare 'solve'"),
])
def test_misbehaving_stage_fails_the_shard_with_a_named_cause(tmp_path, mode, message):
    rd = make_run(tmp_path, mode)
    with pytest.raises((ShardError, KeyError), match=message):
        run_shard(rd.root, "solve", 0)
    err = json.loads(rd.error("solve", 0).read_text())
    assert message.split("'")[0] in err["message"] and "Traceback" in err["traceback"]
    assert not rd.done("solve", 0).exists()


def test_zero_or_many_records_per_instance(tmp_path):
    rd = make_run(tmp_path)
    out = run_shard(rd.root, "solve", 0)
    assert (out.instances, out.records) == (4, 0 + 1 + 2 + 3)
    again = run_shard(rd.root, "solve", 0)
    assert again.skipped


def test_done_is_written_last_and_a_crash_before_it_redoes_nothing(tmp_path, monkeypatch):
    rd = make_run(tmp_path)

    def crash(*a, **k):
        raise OSError("node lost just before DONE")

    monkeypatch.setattr(loop, "write_done", crash)
    with pytest.raises(OSError):
        run_shard(rd.root, "solve", 0)
    assert rd.records("solve", 0).exists() and not rd.done("solve", 0).exists()
    monkeypatch.undo()
    out = run_shard(rd.root, "solve", 0)
    assert not out.skipped and out.resumed == 4 and out.records == 6
    assert json.loads(rd.stats("solve", 0).read_text())["ran"] == 0


def test_a_second_copy_of_a_running_shard_refuses_to_start(tmp_path):
    rd = make_run(tmp_path)
    with shard_lock(rd.lock("solve", 0)), pytest.raises(ShardBusyError):
        run_shard(rd.root, "solve", 0)
    assert not rd.ledger("solve", 0).exists()
