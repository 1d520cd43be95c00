"""Resources a run asks for: local CPUs from the affinity mask / SLURM, SLURM time limits
sized from the stage and the model, and what `--dry-run` says it will request."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from veribatch.launch.executors.local import LocalExecutor, available_cpus
from veribatch.launch.executors.slurm import _job_minutes
from veribatch.launch.profiles import DEFAULT_PROFILE, GenerationSpec, PartitionSpec
from veribatch.launch.sizing import (
    ENGINE_STARTUP_S,
    LOAD_BYTES_PER_S,
    UNKNOWN_MODEL_LOAD_S,
    element_estimate,
    job_time,
    model_bytes,
)

REPO = Path(sys.modules[job_time.__module__].__file__ or "").resolve().parents[1]  # the code under test
GENERATE = {"name": "generate", "resource": "gpu", "seconds_per_instance": 30.0}
VERIFY = {"name": "verify", "resource": "cpu", "seconds_per_instance": 600.0}


def test_local_cpus_follow_the_affinity_mask() -> None:
    taskset = shutil.which("taskset")
    if taskset is None or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs taskset and two CPUs")
    code = ("from veribatch.launch.executors.local import LocalExecutor, available_cpus; "
            "print(LocalExecutor(progress=False).workers, available_cpus()[1])")
    out = subprocess.run([taskset, "-c", "0", sys.executable, "-c", code], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, check=True)
    assert out.stdout.split(maxsplit=1) == ["1", "affinity mask\n"]


def test_local_cpus_inside_a_slurm_allocation() -> None:
    mask = len(os.sched_getaffinity(0))
    assert available_cpus({}) == (mask, "affinity mask")
    if mask >= 2:
        assert available_cpus({"SLURM_CPUS_ON_NODE": "1"}) == (1, "SLURM_CPUS_ON_NODE=1")
    assert available_cpus({"SLURM_CPUS_ON_NODE": str(mask + 8)})[0] == mask  # never more
    assert LocalExecutor(workers=3, progress=False).workers == 3  # an explicit --workers wins


def test_model_size_from_its_files_or_its_name(tmp_path: Path) -> None:
    model = tmp_path / "my-model"
    model.mkdir()
    with open(model / "model-00001.safetensors", "wb") as f:  # sparse: 20 GB, no disk used
        f.truncate(20 * 10**9)
    (model / "config.json").write_text("{}")
    size, how = model_bytes(f"hf:{model}")
    assert size == 20e9 and "weight files" in how
    assert model_bytes("vllm:Qwen/Qwen2.5-72B-Instruct")[0] == 72e9 * 2
    assert model_bytes("vllm:mistralai/Mixtral-8x7B-v0.1")[0] == 56e9 * 2
    assert model_bytes("vllm:Qwen/Qwen2.5-0.5B")[0] == 0.5e9 * 2
    assert model_bytes("vllm:some-org/no-size-here")[0] is None


BIG = "vllm:Qwen/Qwen2.5-72B-Instruct"


def _config(model: str | None, n: int = 1, max_tokens: int = 8192) -> dict:
    return {"model": model, "options": {"n_samples": n}, "sampling": {"max_tokens": max_tokens}}


def test_generate_time_follows_the_sizing_estimate() -> None:
    """A generate element's limit is twice (one load + its share of the token work, as
    `launch.sizing` reads the profile's figures) + the margin — not instances x the stage's
    declared 30 s, which knows neither the model, the samples nor the token budget."""
    spec = PartitionSpec()
    site = GenerationSpec(tokens_per_s={BIG: 400.0}, load_gb_per_s=1.0)
    best16 = job_time(spec, GENERATE, 16, _config(BIG, n=16), site)
    load_s = ENGINE_STARTUP_S + 144e9 / 1e9              # 72B x 2 bytes at the profile's 1 GB/s
    work_s = 16 * 16 * 8192 / 400                         # instances x samples x max_tokens / tok/s
    assert best16.source == "estimate"
    # docs/processes.md's rule, written out (not recomputed from the code's own factor):
    # ceil(2 x (444 s + 5242.88 s) / 60) + 5 = ceil(189.56) + 5 = 195 minutes
    assert (load_s, work_s) == (444.0, 5242.88)
    assert best16.minutes == 195
    # the old rule (16 x 30 s x 1.5 + the load at 250 MB/s + 5 min) gave 32 min: a limit far
    # below the 95 min the element is expected to run
    old = math.ceil((16 * 30 * 1.5 + ENGINE_STARTUP_S + 144e9 / LOAD_BYTES_PER_S) / 60) + 5
    assert old < (load_s + work_s) / 60 < best16.minutes
    for word in ("load 7.4 min", "16 instances x 16 sample(s) x 8192 max_tokens",
                 "400 tokens/s", "generation.load_gb_per_s"):
        assert word in best16.detail, best16.detail
    # one reading: the limit is derived from the expected element time the cost uses
    load, work, _ = element_estimate(_config(BIG, n=16), 16, site)
    assert (load, work) == (load_s, work_s)
    # the built-in figures (1000 tokens/s, 250 MB/s) where the profile gives none
    default = job_time(spec, GENERATE, 16, _config(BIG))
    assert default.minutes == math.ceil(
        2 * (ENGINE_STARTUP_S + 144e9 / LOAD_BYTES_PER_S + 16 * 8192 / 1000) / 60) + 5
    assert job_time(spec, GENERATE, 16, _config("vllm:Qwen/Qwen2.5-0.5B")).minutes < default.minutes
    unknown = job_time(spec, GENERATE, 16, _config("vllm:org/mystery"))
    assert unknown.minutes >= 2 * UNKNOWN_MODEL_LOAD_S / 60 and "assumed" in unknown.detail
    # nothing to load: a remote server, recorded answers — only the work
    served = job_time(spec, GENERATE, 16, _config("openai:served", n=16), site)
    assert "nothing to load" in served.detail and served.minutes < best16.minutes
    # a CPU stage keeps its declared per-instance estimate, model or not
    assert job_time(spec, VERIFY, 2, _config(BIG)).minutes == 35
    # a profile's time is the user's word
    fixed = job_time(PartitionSpec(time_min=45), GENERATE, 16, _config(BIG, n=16), site)
    assert (fixed.minutes, fixed.source) == (45, "profile")
    # and it is what the SLURM executor submits
    prof = replace(DEFAULT_PROFILE, generation=site)
    assert _job_minutes(spec, 16, GENERATE, _config(BIG, n=16), prof) == best16.minutes
    assert _job_minutes(DEFAULT_PROFILE.for_resource("cpu", "verify"), 2, VERIFY, None,
                        DEFAULT_PROFILE) == 35


def test_dry_run_says_what_will_be_requested(tmp_path: Path) -> None:
    """Best-of-16 on the sample's 12 instances, with a profile that gives throughput and read
    rate but no time: each generate element's time limit is what sizing expects it to run,
    doubled, with the reason on the line.  (The old 30 s/instance rule gave 25 min for an
    element expected to run 40 min.)"""
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "250"}
    profile = tmp_path / "site.yaml"
    profile.write_text("partitions:\n  cpu: {partition: cpu}\n  gpu: {partition: gpu, gres: 'gpu:4'}\n"
                       f"generation:\n  tokens_per_s: {{'{BIG.partition(':')[2]}': 400}}\n"
                       "  load_gb_per_s: 1\n")
    r = subprocess.run([sys.executable, "-m", "veribatch", "invbench", "--dry-run", "--executor", "slurm",
                        "--profile", str(profile), "-o", "n_samples=16", "--model", BIG, "--shards", "4",
                        "--runs-dir", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    gen = next(ln for ln in lines if ln.strip().startswith("generate: 2 element(s) x ("))
    # sized to 2 elements of 6 instances: load 300 s + 144 GB at 1 GB/s, work 6 x 16 x 8192 / 400
    element_s = 300 + 144 + 6 * 16 * 8192 / 400
    minutes = math.ceil(2 * element_s / 60) + 5
    assert f"time {minutes} min (2 x expected {element_s / 60:.1f} min [load 7.4 min" in gen, gen
    assert "6 instances x 16 sample(s) x 8192 max_tokens = 786,432 tokens at 400 tokens/s" in gen
    cost = next(ln for ln in lines if ln.strip().startswith("generate: 2 element(s) of <= 6"))
    assert f"1 wave(s) of <= {element_s / 60:.0f} min" in cost, cost
    old = math.ceil((6 * 30 * 1.5 + 300 + 144e9 / 250e6) / 60) + 5  # the rule this replaces
    assert old < element_s / 60 < minutes
    local = subprocess.run([sys.executable, "-m", "veribatch", "invbench", "--dry-run",
                            "--runs-dir", str(tmp_path)], capture_output=True, text=True, env=env,
                           timeout=120)
    assert f"local executor: {available_cpus()[0]} CPU(s)" in local.stdout, local.stdout


def test_what_loads_weights_is_the_engine_classes_fact(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sizing asks the engine class (`Engine.loads_weights`), not a list of names: a
    plug-in engine that serves from elsewhere declares it once."""
    from veribatch.inference.openai_http import OpenAIEngine
    from veribatch.inference.vllm_engine import VLLMEngine
    from veribatch.launch.sizing import load_basis

    assert load_basis("openai:Qwen2.5-72B")[2] == "openai: nothing to load"
    assert load_basis("vllm:Qwen2.5-72B")[0] == 72e9 * 2
    monkeypatch.setattr(OpenAIEngine, "loads_weights", True)
    monkeypatch.setattr(VLLMEngine, "loads_weights", False)
    assert load_basis("openai:Qwen2.5-72B")[0] == 72e9 * 2
    assert load_basis("vllm:Qwen2.5-72B")[2] == "vllm: nothing to load"
