"""Issue 17, items 1-3: where each stage runs (a bare `--partition` never moves CPU work onto
GPU nodes), how many model loads the generate stage gets, and a `--dry-run` that prints
what sbatch receives and what the run costs.

The sbatch checks read the submission files submitit writes for `sbatch` (the command
itself is intercepted: the example cluster's partitions do not exist here), so they test
what SLURM would be given, not a re-computation of it."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import launch
from tests.support.plugins import install
from veribatch import registry as plugins
from veribatch.launch.executors.array_dependencies import dependency_groups
from veribatch.launch.executors.cost import describe, estimate
from veribatch.launch.executors.element import ShardJob
from veribatch.launch.executors.slurm import SlurmExecutor
from veribatch.launch.manifest import build_manifest, create_or_reuse
from veribatch.launch.profiles import ProfileError, load_profile
from veribatch.launch.run_control import ExecChoice, plan_run
from veribatch.launch.sizing import element_groups, generation_work_s, size_stage, stage_units
from veribatch.rundir.manifest import Manifest

CARD_MODEL = "vllm:Qwen/Qwen2.5-72B-Instruct"


def _card(shared_data: Path, shards: int = 64):
    return plan_run("invbench", dataset=f"easy:{shared_data / 'invbench'}", model=CARD_MODEL,
                    shards=shards)


@pytest.mark.parametrize("given,gpu,cpu", [
    (["gpu"], "a100", "cpu-long"),          # a resource key: the profile's partition for it
    (["a100"], "a100", "cpu-long"),         # a partition the profile gives the gpu resource
    (["cpu-long"], "a100", "cpu-long"),
    (["big"], "big", "cpu-long"),           # neither: the GPU stages only
    (["cpu=short"], "a100", "short"),       # one resource, explicitly
    (["gpu=h100", "cpu=short"], "h100", "short"),
])
def test_a_bare_partition_never_moves_cpu_stages_to_gpu_nodes(given, gpu, cpu):
    prof = ExecChoice("slurm", "example-cluster", partitions=given).profile_obj(["cpu", "gpu", "cpu"])
    assert (prof.partitions["gpu"].partition, prof.partitions["cpu"].partition) == (gpu, cpu)


def test_a_bare_unknown_partition_goes_to_cpu_stages_when_the_run_has_no_gpu_stage():
    prof = ExecChoice("slurm", "example-cluster", partitions=["short"]).profile_obj(["cpu"])
    assert prof.partitions["cpu"].partition == "short"
    assert prof.partitions["gpu"].partition == "a100"
    # the default profile names no partitions: a bare resource key becomes the name
    prof = ExecChoice("slurm", None, partitions=["gpu"]).profile_obj(["cpu", "gpu"])
    assert (prof.partitions["gpu"].partition, prof.partitions["cpu"].partition) == ("gpu", None)
    with pytest.raises(ProfileError, match="resource must be one of"):
        ExecChoice("slurm", None, partitions=["tpu=x"]).profile_obj(["cpu"])


def test_generate_is_sized_to_its_work_and_can_be_fixed(shared_data):
    plan = _card(shared_data)
    m = build_manifest(plan)
    gen = next(s for s in m["stages"] if s["name"] == "generate")
    prof = load_profile("example-cluster")
    size = size_stage(gen, m["config"], 113, 64, prof)
    # 113 x 8192 tokens at the profile's 400 tokens/s = 38.6 min of work; a load at 1 GB/s of
    # 144 GB + 5 min start-up = 7.4 min: a second load would be > 20 % of the GPU time
    assert size.work_s == pytest.approx(113 * 8192 / 400)
    assert size.load_s == pytest.approx(300 + 72e9 * 2 / 1e9)
    assert size.elements == 1
    # more work justifies more loads: Best-of-16 → 16 x the work
    many = {**m["config"], "options": {**m["config"]["options"], "n_samples": 16}}
    assert size_stage(gen, many, 113, 64, prof).elements == int(16 * size.work_s * 0.2 / (0.8 * size.load_s))
    assert size_stage(gen, m["config"], 113, 64, prof, override=8).elements == 8
    assert size_stage(gen, m["config"], 113, 64, prof, override=500).elements == 64
    # CPU stages keep --shards
    verify = next(s for s in m["stages"] if s["name"] == "verify")
    assert size_stage(verify, m["config"], 113, 64, prof).elements == 64
    # an endpoint loads nothing here: one element per shard
    served = {**m["config"], "model": "openai:Qwen/Qwen2.5-72B-Instruct"}
    assert size_stage(gen, served, 113, 64, prof).elements == 64


def test_element_groups_are_contiguous_and_a_resume_keeps_them():
    assert element_groups(8, 3) == [[0, 1], [2, 3, 4], [5, 6, 7]]
    manifest = {"shards": 8, "instance_count": 8, "config": {"model": "hf:/m"}}
    stage = {"name": "generate", "resource": "gpu"}
    prof = load_profile("local-test")
    assert stage_units(prof, manifest, stage, list(range(8)), 3) == [[0, 1], [2, 3, 4], [5, 6, 7]]
    # a resume of shards 1, 3 and 4: the elements they belonged to, nothing merged across
    assert stage_units(prof, manifest, stage, [1, 3, 4], 3) == [[1], [3, 4]]
    assert stage_units(prof, manifest, {"name": "v", "resource": "cpu"}, [1, 3], 3) == [[1], [3]]


def test_resume_remembers_gpu_shards(tmp_path):
    from veribatch.launch.run_control import _remember, last_choice

    rd, _ = create_or_reuse(plan_run("selftest", shards=2), tmp_path / "run")
    _remember(rd, ExecChoice("slurm", "local-test", partitions=["gpu"], gpu_shards=3))
    last = last_choice(rd)
    assert (last.gpu_shards, list(last.partitions)) == (3, ["gpu"])


def test_verify_waits_for_exactly_the_generate_element_of_its_shards():
    arrays = {"baseline": [(list(range(8)), "10")], "generate": [([[0, 1, 2, 3], [4, 5, 6, 7]], "11")]}
    groups = dependency_groups(list(range(8)), ["baseline", "generate"], arrays, {}, 1000)
    assert groups == [([0, 1, 2, 3], "afterok:10_0:10_1:10_2:10_3,afterok:11_0"),
                      ([4, 5, 6, 7], "afterok:10_4:10_5:10_6:10_7,afterok:11_1")]
    # one generate element for every shard: the baseline still element-wise
    arrays["generate"] = [([list(range(8))], "12")]
    assert dependency_groups(list(range(8)), ["baseline", "generate"], arrays, {}, 1000) == \
        [(list(range(8)), "aftercorr:10,afterok:12")]


class _Sbatch:
    """Stands in for the `sbatch` command only: keeps each submission file submitit wrote."""

    def __init__(self) -> None:
        self.scripts: list[str] = []

    def __call__(self, fn_self: Any, *args: Any, **kwargs: Any) -> str:
        command = fn_self.command
        assert command[0] == "sbatch", command
        self.scripts.append(Path(command[1]).read_text())
        return f"Submitted batch job {100 + len(self.scripts)}\n"


def _flags(script: str) -> dict[str, str]:
    return dict(re.findall(r"^#SBATCH --([\w-]+)(?:=(.*))?$", script, re.M))


def test_dry_run_and_sbatch_agree_on_the_cards_command(shared_data, tmp_path, monkeypatch):
    """The card's command: generation on the gpu partition, every verifier stage on the cpu
    one, one model load, load share <= 20 %, and the dry-run's figures are sbatch's."""
    import submitit.core.utils as sutils

    plan = _card(shared_data)
    choice = ExecChoice("slurm", "example-cluster", partitions=["gpu"])
    prof = choice.profile_obj([s.resource for s in plan.stages])
    rd, _ = create_or_reuse(plan, tmp_path / "run")
    manifest = json.loads(rd.manifest.read_text())
    sizes = [b - a for a, b in plan.shard_bounds()]
    costs = {c.stage: c for c in estimate(manifest, prof, sizes)}
    lines = describe(list(costs.values()), manifest, prof)

    sbatch = _Sbatch()
    monkeypatch.setattr(sutils.CommandFunction, "__call__", lambda fn, *a, **k: sbatch(fn))
    ex = SlurmExecutor(prof)
    monkeypatch.setattr(ex, "check_partitions", lambda m: None)  # a100/cpu-long are not here
    todo = {s.name: list(range(64)) for s in plan.stages}
    result = ex.submit(rd, Manifest.read(rd.root), todo, aggregate=True)
    by_stage = {j["stage"]: _flags(s) for j, s in zip(result.jobs, sbatch.scripts, strict=True)}

    assert by_stage["generate"]["partition"] == "a100" and by_stage["generate"]["gres"] == "gpu:4"
    for stage in ("baseline", "verify", "aggregate"):
        assert by_stage[stage]["partition"] == "cpu-long" and "gres" not in by_stage[stage]
    assert "array" not in by_stage["generate"]  # one element (submitit: a plain job): one load
    assert by_stage["verify"]["array"] == "0-63%64"
    assert result.jobs[2]["dependency"] == f"aftercorr:{result.jobs[0]['array_id']},afterok:{result.jobs[1]['array_id']}"
    for stage, flags in by_stage.items():
        c = costs[stage]
        line = next(ln for ln in lines if ln.startswith(f"  {stage}: "))
        assert f"partition {flags['partition']}," in line, line
        assert f"cpus {flags['cpus-per-task']}," in line and f"mem {flags['mem']}," in line, line
        assert f"time {flags['time']} min" in line, line
        assert ("(gres " in line) == ("gres" in flags), line
        if "gres" in flags:
            assert f"(gres {flags['gres']})" in line, line
        assert c.params["time"] == int(flags["time"])
        n = flags.get("array", "0-0").split("%")[0].split("-")
        assert c.elements == int(n[1]) + 1
    gen = costs["generate"]
    assert gen.loads == 1 and gen.gpus == 4 and gen.load_share <= 0.2
    assert gen.gpu_hours == pytest.approx(4 * 1440 / 60)
    est = next(ln for ln in lines if ln.startswith("  generate: 1 element(s) of <= 113"))
    assert f"model loads 1 x {gen.load_s / 60:.1f} min = {gen.load_share:.0%} of GPU time" in est
    assert costs["verify"].cpu_hours == pytest.approx(64 * 4 * 12)


def test_dry_run_cli_prints_placement_and_cost(shared_data, tmp_path):
    r = launch("invbench", "--dataset", f"easy:{shared_data / 'invbench'}", "--executor", "slurm",
               "--profile", "example-cluster", "--partition", "gpu", "--shards", "64", "--dry-run",
               "--model", CARD_MODEL, "--runs-dir", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert re.search(r"^  generate: 1 element\(s\) x \(partition a100, .*gpus 4 \(gres gpu:4\)", out, re.M), out
    assert re.search(r"^  verify: 64 element\(s\) x \(partition cpu-long,", out, re.M), out
    assert re.search(r"^  baseline: 64 element\(s\) x \(partition cpu-long,", out, re.M), out
    share = int(re.search(r"model loads 1 x [\d.]+ min = (\d+)% of GPU time", out).group(1))
    assert share <= 20
    # the override: 8 elements, 8 loads
    r = launch("invbench", "--dataset", f"easy:{shared_data / 'invbench'}", "--executor", "slurm",
               "--profile", "example-cluster", "--partition", "gpu", "--shards", "64", "--dry-run",
               "--model", CARD_MODEL, "--gpu-shards", "8", "--runs-dir", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^  generate: 8 element\(s\) of <= 15 instance\(s\).*model loads 8 x", r.stdout, re.M), r.stdout


def test_a_multi_shard_element_runs_each_shard_and_loads_the_engine_once(tmp_path, monkeypatch):
    from veribatch.inference import open_engine, registry, shared_engines

    opened: list[str] = []

    class Counting(registry.Engine):
        engine, model = "count", "m"
        closed = 0

        def __init__(self, name: str, **_: Any) -> None:
            opened.append(name)

        def generate(self, requests):  # noqa: ANN001, ANN201
            return []

        def close(self) -> None:
            Counting.closed += 1

    install(monkeypatch, plugins.ENGINES, "count", Counting)
    with shared_engines():
        for _ in range(3):
            with open_engine("count:m", cache_dir=tmp_path / "c") as e:
                assert e.model == "m"
        assert opened == ["m"] and Counting.closed == 0
    assert Counting.closed == 1
    with open_engine("count:m"), open_engine("count:m"):
        pass
    assert opened == ["m", "m", "m"]

    rd, _ = create_or_reuse(plan_run("selftest", shards=4), tmp_path / "run")
    out = ShardJob()(str(rd.root), "work", [1, 2])
    assert [s["shard"] for s in out["shards"]] == [1, 2]
    assert all((rd.root / "shards" / "work" / str(k) / "DONE").exists() for k in (1, 2))
    assert not (rd.root / "shards" / "work" / "0" / "DONE").exists()


def _sacct_partitions(job_ids: list[str]) -> dict[str, set[str]]:
    """Array id → the partitions its elements ran on, as SLURM accounting says."""
    import subprocess

    out = subprocess.run(["sacct", "-n", "-P", "-X", "-o", "JobID,Partition", "-j",
                          ",".join(job_ids)], capture_output=True, text=True, timeout=60)
    parts: dict[str, set[str]] = {}
    for line in out.stdout.splitlines():
        if line:
            job, part = line.split("|")[:2]
            parts.setdefault(job.split("_")[0], set()).add(part)
    return parts


@pytest.mark.slurm
def test_a_smaller_generate_stage_than_verify_completes_on_slurm(slurm_cluster, tmp_path):
    """4 shards, 2 generate elements of 2 shards each (one engine per element): every record
    exactly once; generation on the gpu partition, verification on cpu (from sacct);
    verify shards wait for their own generate element only."""
    import time

    from veribatch.inference.tiny_model import build_tiny_qwen2
    from veribatch.launch.status import run_state
    from veribatch.rundir.paths import RunDir

    model = build_tiny_qwen2(tmp_path / "model", max_train_s=3.0)  # what it answers is not tested
    runs = tmp_path / "runs"
    r = launch("invbench", "--model", f"hf:{model}", "--max-tokens", "8", "-o", "budget_s=5",
               "--shards", "4", "--gpu-shards", "2", "--executor", "slurm", "--profile",
               "local-test", "--partition", "gpu", "--runs-dir", str(runs))
    assert r.returncode == 0, r.stdout + r.stderr
    (rd,) = [p for p in runs.iterdir() if (p / "manifest.json").is_file()]
    deadline = time.monotonic() + 600
    while not (rd / "aggregate.json").is_file() and time.monotonic() < deadline:
        time.sleep(2)
    agg = json.loads((rd / "aggregate.json").read_text())
    assert agg["status"] == "complete", agg
    subs = {s["stage"]: s for s in json.loads((rd / "jobs.json").read_text())["submissions"]}
    all_subs = json.loads((rd / "jobs.json").read_text())["submissions"]
    gen, base = subs["generate"], subs["baseline"]["array_id"]
    assert gen["elements"] == [[0, 1], [2, 3]] and len(set(gen["jobs"].values())) == 2
    g = gen["array_id"]
    verify = [s for s in all_subs if s["stage"] == "verify"]
    assert [(sorted(map(int, s["jobs"])), s["dependency"]) for s in verify] == [
        ([0, 1], f"afterok:{base}_0:{base}_1,afterok:{g}_0"),
        ([2, 3], f"afterok:{base}_2:{base}_3,afterok:{g}_1")]
    logs = sorted((rd / "slurm").glob(f"{g}_*_log.out"))
    said = [re.search(r"generate: shards \[(.*)\] ran with (\d+) engine load", p.read_text()).groups()
            for p in logs]
    assert sorted(said) == [("0, 1", "1"), ("2, 3", "1")], said  # one load per element
    # ...and each element's stats say so: the first shard paid the load, the second reused it
    loads = [json.loads((rd / "shards" / "generate" / str(k) / "stats.json").read_text())
             ["notes"]["engine_load_s"] for k in range(4)]
    assert loads[0] > 0 and loads[2] > 0 and loads[1] == loads[3] == 0.0, loads
    parts = _sacct_partitions([s["array_id"] for s in all_subs])
    assert parts[g] == {"gpu"} and parts[base] == {"cpu"}, parts
    assert all(parts[s["array_id"]] == {"cpu"} for s in verify), parts

    ids = sorted(json.loads(line)["id"] for line in (rd / "instances.jsonl").read_text().splitlines())
    import pandas as pd

    for stage in ("baseline", "generate", "verify"):
        df = pd.concat([pd.read_parquet(p) for p in (rd / "shards" / stage).glob("*/records.parquet")])
        if stage == "verify":
            df = df[df["kind"] == "instance"]
        key = ["instance_id", "sample_index"] if stage == "generate" else ["instance_id"]
        assert not df.duplicated(key).any(), stage
        assert sorted(set(df["instance_id"])) == ids, stage
    state = run_state(RunDir(rd))
    assert [s.state for col in state.shards.values() for s in col] == ["done"] * 12


def test_a_cpu_stage_gets_at_most_array_parallelism_elements(tmp_path):
    """64 shards on a profile that runs 16 elements at once: 16 elements of 4 contiguous
    shards (a resume keeps the groups); the downstream stage, grouped alike, lines up with
    it element-wise (aftercorr), so no element waits for the whole upstream array."""
    prof = load_profile("local-test")
    assert prof.array_parallelism == 16
    manifest = {"shards": 64, "instance_count": 113, "config": {"model": None}}
    cpu = {"name": "baseline", "resource": "cpu"}
    size = size_stage(cpu, manifest["config"], 113, 64, prof)
    assert size.elements == 16 and "array_parallelism 16" in size.why
    units = stage_units(prof, manifest, cpu, list(range(64)))
    assert units == element_groups(64, 16) and all(len(u) == 4 for u in units)
    assert stage_units(prof, manifest, cpu, [1, 2, 9]) == [[1, 2], [9]]
    # at or under the cap: one element per shard, as before
    assert stage_units(prof, {**manifest, "shards": 16}, cpu, list(range(16))) == \
        [[k] for k in range(16)]
    groups = dependency_groups(units, ["baseline"], {"baseline": [(units, "20")]}, {}, 1000)
    assert groups == [(units, "aftercorr:20")]
    # a resume of a few shards of two groups: afterok on exactly their upstream elements
    part = [[1, 2], [9]]
    assert dependency_groups(part, ["baseline"], {"baseline": [(part, "21")]}, {}, 1000) == \
        [(part, "aftercorr:21")]
    assert dependency_groups(part, ["baseline"], {"baseline": [(units, "22")]}, {}, 1000) == \
        [([[1, 2]], "afterok:22_0"), ([[9]], "afterok:22_2")]


@pytest.mark.slurm
def test_an_element_takes_the_free_shards_of_a_stuck_one_on_slurm(slurm_cluster, tmp_path):
    """Two elements of two shards (array_parallelism 2): element 0 hangs in its first shard;
    element 1 runs its own shards, then shard 1 of element 0 — which nobody had started —
    so one slow shard does not hold back the rest of its group.  Taken shards are recorded
    once (the owner finds them done)."""
    import time

    profile = tmp_path / "two-at-once.yaml"
    profile.write_text("partitions:\n  cpu: {partition: cpu, time: 10, mem_gb: 0.5}\n"
                       "  gpu: {partition: gpu, time: 10}\narray_parallelism: 2\n")
    runs = tmp_path / "runs"
    r = launch("selftest", "--shards", "4", "-o", "hang=0", "--executor", "slurm",
               "--profile", str(profile), "--runs-dir", str(runs))
    assert r.returncode == 0, r.stdout + r.stderr
    (rd,) = [p for p in runs.iterdir() if (p / "manifest.json").is_file()]
    try:
        subs = {s["stage"]: s for s in json.loads((rd / "jobs.json").read_text())["submissions"]}
        work = subs["work"]
        assert work["elements"] == [[0, 1], [2, 3]]
        assert subs["check"]["dependency"] == f"aftercorr:{work['array_id']}"
        done = rd / "shards" / "work" / "1" / "DONE"
        deadline = time.monotonic() + 240
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(1)
        assert done.exists(), "shard 1 was never taken while its element hung in shard 0"
        stats = json.loads((rd / "shards" / "work" / "1" / "stats.json").read_text())
        assert stats["slurm_job"] == work["jobs"]["2"] != work["jobs"]["1"], stats
        assert not (rd / "shards" / "work" / "0" / "DONE").exists()
        log = (rd / "slurm" / f"{work['jobs']['2']}_0_log.out")
        deadline = time.monotonic() + 60
        while "also ran shards [1]" not in (log.read_text() if log.exists() else "") \
                and time.monotonic() < deadline:
            time.sleep(1)
        assert "also ran shards [1]" in log.read_text()
    finally:
        launch("cancel", str(rd))


def test_an_element_whose_shard_was_taken_runs_the_free_ones_and_leaves_it(tmp_path):
    """Element [0, 1] of a grouped array while another element runs its shard 0: it runs
    shard 1 and the array's free shards 2 and 3, and ends leaving shard 0 to the element
    that runs it — it never idles on a lock."""
    import fcntl
    import os
    import threading
    import time

    from veribatch.rundir.paths import RunDir

    rd, _ = create_or_reuse(plan_run("selftest", shards=4), tmp_path / "run")
    run = RunDir(rd.root)
    run.lock("work", 0).parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(run.lock("work", 0), os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)  # "another element" runs shard 0
    seen: dict[str, bool] = {}
    returned = threading.Event()

    def other_element() -> None:
        deadline = time.monotonic() + 20
        while not returned.is_set() and time.monotonic() < deadline:
            time.sleep(0.1)
        seen["free_first"] = all(run.done("work", k).exists() for k in (1, 2, 3))
        seen["ended_without_waiting"] = returned.is_set()
        os.close(fd)  # the other element ends

    t = threading.Thread(target=other_element)
    t.start()
    try:
        out = ShardJob(steal=[0, 1, 2, 3])(str(rd.root), "work", [0, 1])
    finally:
        returned.set()
        t.join()
    assert seen == {"free_first": True, "ended_without_waiting": True}, seen
    assert out["taken"] == [3, 2] and out["left"] == [0]
    assert [s["shard"] for s in out["shards"]] == [1]
    assert not run.done("work", 0).exists()


def test_an_element_takes_no_shard_past_half_its_time_limit(tmp_path):
    """Taken shards lengthen an element beyond what its time limit was sized for: past
    `steal_until_s` (half the limit at submission) it takes none."""
    rd, _ = create_or_reuse(plan_run("selftest", shards=4), tmp_path / "run")
    late = ShardJob(steal=[0, 1, 2, 3], steal_until_s=0.0)(str(rd.root), "work", [0, 1])
    assert late["taken"] == [] and not (rd.root / "shards/work/2/DONE").exists()
    early = ShardJob(steal=[0, 1, 2, 3], steal_until_s=3600.0)(str(rd.root), "work", [0, 1])
    assert early["taken"] == [3, 2]


def test_a_ray_pool_profile_gives_the_generate_element_nodes_and_replicas(shared_data, tmp_path,
                                                                         monkeypatch):
    """`nodes: 2` on the gpu partition and `generation.replicas: 2`: the generate element asks
    sbatch for two nodes, runs its shard process once (srun on one node of them) and tells it
    to open its engine as a 2-replica Ray pool; the CPU stages get neither.  The dry-run says
    the same, and counts both nodes' GPUs and both replicas' throughput."""
    import submitit.core.utils as sutils

    profile = tmp_path / "pool.yaml"
    profile.write_text("partitions:\n  cpu: {partition: cpu}\n"
                       "  gpu: {partition: gpu, gres: 'gpu:1', nodes: 2}\n"
                       "generation: {replicas: 2, tokens_per_s: 500}\n")
    prof = load_profile(str(profile))
    plan = _card(shared_data, shards=4)
    rd, _ = create_or_reuse(plan, tmp_path / "run")
    manifest = json.loads(rd.manifest.read_text())
    sbatch = _Sbatch()
    monkeypatch.setattr(sutils.CommandFunction, "__call__", lambda fn, *a, **k: sbatch(fn))
    ex = SlurmExecutor(prof, gpu_shards=1)
    monkeypatch.setattr(ex, "check_partitions", lambda m: None)
    result = ex.submit(rd, Manifest.read(rd.root), {s.name: list(range(4)) for s in plan.stages},
                       aggregate=False)
    scripts = {j["stage"]: s for j, s in zip(result.jobs, sbatch.scripts, strict=True)}
    gen = scripts["generate"]
    assert _flags(gen)["nodes"] == "2" and _flags(gen)["gres"] == "gpu:1"
    assert re.search(r"^srun .*--nodes=1 --ntasks=1 ", gen, re.M), gen
    assert "export VERIBATCH_ENGINE_REPLICAS=2" in gen
    for stage in ("baseline", "verify"):
        assert _flags(scripts[stage])["nodes"] == "1" and "ENGINE_REPLICAS" not in scripts[stage]
        assert "--ntasks=1" not in scripts[stage]
    costs = {c.stage: c for c in estimate(manifest, prof, [b - a for a, b in plan.shard_bounds()], 1)}
    assert costs["generate"].gpus == 2
    one = load_profile(str(profile)).generation
    pooled, why = generation_work_s(manifest["config"], 113, one)
    single, _ = generation_work_s(manifest["config"], 113, replace(one, replicas=None))
    assert pooled == pytest.approx(single / 2) and "x 2 replicas" in why
    line = next(ln for ln in describe(list(costs.values()), manifest, prof)
                if ln.startswith("  generate: 1 element(s) x ("))
    assert "nodes 2, " in line and "gpus 2 (gres gpu:1)" in line, line
