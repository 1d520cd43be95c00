"""What sbatch receives for one array, and what the cluster allows.

`sbatch_parameters` is the one place an array's submitit parameters are computed:
submission (`executors.slurm`) and `--dry-run` (`executors.cost`) both call it, so the
dry run's table is what sbatch gets.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from typing import Any

from ..profiles import PartitionSpec, Profile

DEFAULT_MAX_ARRAY_SIZE = 1001
AGGREGATE_JOB_RESOURCES = {"cpus_per_task": 1, "mem_gb": 4, "gpus_per_task": 0}
AGGREGATE_JOB_MINUTES = 30  # the aggregate job's limit, unless the cpu partition gives a time
ENGINE_REPLICAS_ENV = "VERIBATCH_ENGINE_REPLICAS"
"""Set in a GPU stage's jobs from the profile's ``generation.replicas``: the element's
engines are a Ray pool of that many replicas over the nodes of its allocation
(`executors.element.engine_scope`)."""


def max_array_size() -> int:
    try:
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True,
                             timeout=15)
        m = re.search(r"^MaxArraySize\s*=\s*(\d+)", out.stdout, re.M)
        if m:
            return int(m.group(1))
    except (OSError, subprocess.SubprocessError):
        pass
    return DEFAULT_MAX_ARRAY_SIZE


def cluster_partitions() -> set[str] | None:
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True,
                             timeout=15)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return {line.strip() for line in out.stdout.splitlines() if line.strip()}


def sbatch_parameters(profile: Profile, spec: PartitionSpec, stage: dict[str, Any],
                      minutes: int, *, job_name: str, dependency: str | None = None,
                      parallelism: int | None = None, run_root: str | None = None
                      ) -> dict[str, Any]:
    """The submitit `SlurmExecutor` parameters of one array: what sbatch receives."""
    extra: dict[str, Any] = {"kill-on-invalid-dep": "yes"}
    extra.update(profile.sbatch)
    extra.update(spec.sbatch)
    params: dict[str, Any] = {
        "job_name": job_name, "time": minutes,
        # The profile's cpus/mem are floors: a stage that declares more gets more.
        "cpus_per_task": max(spec.cpus_per_task or 1, int(stage["cpus_per_task"])),
        "mem": f"{int(max(spec.mem_gb or 0, float(stage['mem_gb'])) * 1024)}M",
        "signal_delay_s": profile.signal_delay_s,
        "array_parallelism": profile.array_parallelism if parallelism is None else parallelism,
        "setup": list(profile.setup)
        + ([f"export VERIBATCH_RUN_DIR={shlex.quote(run_root)}"] if run_root else [])
        + ([f"export VERIBATCH_IMAGES={shlex.quote(profile.image_dir)}"]
           if profile.image_dir else []),
        "additional_parameters": extra,
    }
    for key, value in (("partition", spec.partition), ("gres", spec.gres),
                       ("account", spec.account or profile.account),
                       ("qos", spec.qos or profile.qos),
                       ("constraint", spec.constraint), ("dependency", dependency)):
        if value:
            params[key] = value
    # The profile has the last word on GPUs: `gpus_per_task: 0` on a partition without
    # GPUs (a CPU-only test cluster) runs GPU stages there on CPU; unset → the stage's need.
    gpus = spec.gpus_per_task if spec.gpus_per_task is not None else (
        0 if spec.gres else int(stage["gpus_per_task"]))
    if gpus:
        params["gpus_per_task"] = gpus
    if spec.nodes and spec.nodes > 1:
        # One copy of the shard process, on the first node; the others are for the Ray pool
        # it starts (`inference.ray_cluster.job_pool`: srun --overlap steps).
        params["nodes"] = spec.nodes
        params["srun_args"] = ["--nodes=1", "--ntasks=1"]
    if stage.get("resource") == "gpu" and profile.generation.replicas:
        params["setup"].append(f"export {ENGINE_REPLICAS_ENV}={int(profile.generation.replicas)}")
    return params
