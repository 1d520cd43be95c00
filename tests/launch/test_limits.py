"""Resources a run asks for: local CPUs from the affinity mask / SLURM, SLURM time limits
sized from the stage and the model, and what `--dry-run` says it will request."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from veribatch.launch.executors.local import LocalExecutor, available_cpus
from veribatch.launch.executors.slurm import _job_minutes
from veribatch.launch.profiles import (
    DEFAULT_PROFILE,
    ENGINE_STARTUP_S,
    LOAD_BYTES_PER_S,
    UNKNOWN_MODEL_LOAD_S,
    PartitionSpec,
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


def test_generate_time_includes_loading_the_model() -> None:
    spec = PartitionSpec()
    # Before: 16 generate instances got max(10, 16*30*1.5/60 + 5) = 17 min, whatever the model.
    big = job_time(spec, GENERATE, 16, "vllm:Qwen/Qwen2.5-72B-Instruct")
    load_min = (ENGINE_STARTUP_S + 144e9 / LOAD_BYTES_PER_S) / 60
    assert big.source == "estimate" and big.minutes >= 17 + load_min - 1
    assert "model load" in big.detail and "72B" in big.detail
    small = job_time(spec, GENERATE, 16, "vllm:Qwen/Qwen2.5-0.5B")
    assert small.minutes < big.minutes
    unknown = job_time(spec, GENERATE, 16, "vllm:org/mystery")
    assert unknown.minutes >= UNKNOWN_MODEL_LOAD_S / 60 + 17 - 1 and "assumed" in unknown.detail
    # nothing to load: a remote server, recorded answers, or a CPU stage
    assert job_time(spec, GENERATE, 16, "openai:served").minutes == 17
    assert job_time(spec, GENERATE, 16, "replay:/runs/x").minutes == 17
    assert job_time(spec, VERIFY, 2, "vllm:Qwen/Qwen2.5-72B-Instruct").minutes == 35
    # a profile's time is the user's word
    fixed = job_time(PartitionSpec(time_min=45), GENERATE, 16, "vllm:Qwen/Qwen2.5-72B-Instruct")
    assert (fixed.minutes, fixed.source) == (45, "profile")
    # and it is what the SLURM executor submits
    assert _job_minutes(spec, 16, GENERATE, "vllm:Qwen/Qwen2.5-72B-Instruct") == big.minutes
    assert _job_minutes(DEFAULT_PROFILE.for_resource("cpu", "verify"), 2, VERIFY, None) == 35


def test_dry_run_says_what_will_be_requested(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "250"}
    r = subprocess.run([sys.executable, "-m", "veribatch", "invbench", "--dry-run", "--executor", "slurm",
                        "--model", "vllm:Qwen/Qwen2.5-72B-Instruct", "--runs-dir", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    gen = next(ln for ln in r.stdout.splitlines() if ln.strip().startswith("generate:"))
    expected = job_time(DEFAULT_PROFILE.for_resource("gpu", "generate"), GENERATE, 12,
                        "vllm:Qwen/Qwen2.5-72B-Instruct")
    assert f"time {expected.minutes} min (model load" in gen, gen
    local = subprocess.run([sys.executable, "-m", "veribatch", "invbench", "--dry-run",
                            "--runs-dir", str(tmp_path)], capture_output=True, text=True, env=env,
                           timeout=120)
    assert f"local executor: {available_cpus()[0]} CPU(s)" in local.stdout, local.stdout
