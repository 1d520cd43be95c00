"""What sbatch receives — for one array, or for a `launch serve` job — and what the
cluster allows.

`sbatch_parameters` is the one place an array's submitit parameters are computed:
submission (`executors.slurm`) and `--dry-run` (`executors.cost`) both call it, so the
dry run's table is what sbatch gets.  `serve_script` writes the batch script of a serve
job from the same profile entries.  Every value that becomes an ``#SBATCH`` line (a
run name in a job name, an account, a qos, a profile's extra options, a path) passes
`sbatch_value`: a line break would end the directive and make the rest a shell line.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from ..profiles import PartitionSpec, Profile
from ..slurm_calls import run_slurm

DEFAULT_MAX_ARRAY_SIZE = 1001
AGGREGATE_JOB_RESOURCES = {"cpus_per_task": 1, "mem_gb": 4, "gpus_per_task": 0}
AGGREGATE_JOB_MINUTES = 30  # the aggregate job's limit, unless the cpu partition gives a time
ENGINE_REPLICAS_ENV = "VERIBATCH_ENGINE_REPLICAS"
"""Set in a GPU stage's jobs from the profile's ``generation.replicas``: the element's
engines are a Ray pool of that many replicas over the nodes of its allocation
(`executors.element.engine_scope`)."""


def max_array_size() -> int:
    """The cluster's MaxArraySize (an unreachable controller is waited for: `slurm_calls`)."""
    out = run_slurm(["scontrol", "show", "config"])
    m = re.search(r"^MaxArraySize\s*=\s*(\d+)", out.stdout, re.M) if out is not None else None
    return int(m.group(1)) if m else DEFAULT_MAX_ARRAY_SIZE


def cluster_partitions() -> set[str] | None:
    out = run_slurm(["sinfo", "-h", "-o", "%R"])
    if out is None or out.returncode != 0:
        return None
    return {line.strip() for line in out.stdout.splitlines() if line.strip()}


class SbatchValueError(ValueError):
    """A value that cannot be written as one ``#SBATCH`` directive (a line break in it)."""


def sbatch_value(key: str, value: Any) -> str:
    """`value` as the text of sbatch option `key`, refused when it holds a line break or
    another control character: in a batch script the rest would run as a shell line."""
    text = str(value)
    for part, what in ((key, "option name"), (text, "value")):
        if any(ord(c) < 32 or c == "\x7f" for c in part):
            raise SbatchValueError(f"sbatch {key}: {what} {part!r} holds a control character "
                                   "(a line break would end the #SBATCH line)")
    return text


def directive_lines(options: Sequence[tuple[str, Any]]) -> list[str]:
    """``#SBATCH --key=value`` per option, in order; None and "" are left out.  A value with
    blanks (a path) is double-quoted, which sbatch reads as one argument; a double quote in
    a value is refused (sbatch has no escape for it)."""
    out = []
    for key, value in options:
        if value is None or value == "":
            continue
        text = sbatch_value(key, value)
        if '"' in text:
            raise SbatchValueError(f"sbatch {key}: value {text!r} holds a double quote")
        if any(c.isspace() for c in text):
            text = f'"{text}"'
        out.append(f"#SBATCH --{sbatch_value(key, key)}={text}")
    return out


def _checked(params: Mapping[str, Any]) -> None:
    """Every directive value of submitit parameters passes `sbatch_value`."""
    for key, value in params.items():
        if key in ("setup", "srun_args"):
            continue                       # shell lines of the profile / srun's argv
        if isinstance(value, Mapping):
            _checked(value)
        else:
            sbatch_value(key, value)


def gres_for(gres: str | None, gpus: int) -> str | None:
    """The profile's gres with the GPU count set to `gpus` (``gpu:a100:1`` → ``gpu:a100:4``)."""
    if not gres:
        return None
    parts = gres.split(":")
    if parts[-1].isdigit():
        parts[-1] = str(gpus)
    else:
        parts.append(str(gpus))
    return ":".join(parts)


def serve_script(profile: Profile, spec: PartitionSpec, *, job_name: str, output: str,
                 nodes: int, tp: int, minutes: int, body: Sequence[str]) -> str:
    """The batch script of a `launch serve` job on the profile's `spec` entry: `tp` GPUs per
    node on `nodes` nodes (TP workers share a node), SIGTERM two minutes before the time
    limit (``--signal=B:TERM@120``: the server removes its endpoint file and writes
    exit.json instead of vanishing), the profile's setup lines, then `body`."""
    options: list[tuple[str, Any]] = [
        ("job-name", job_name), ("nodes", nodes), ("ntasks-per-node", 1), ("output", output),
        ("signal", "B:TERM@120"), ("time", minutes),
        ("partition", spec.partition), ("account", spec.account or profile.account),
        ("qos", spec.qos or profile.qos), ("constraint", spec.constraint),
        ("cpus-per-task", spec.cpus_per_task),
        ("mem", f"{int(spec.mem_gb * 1024)}M" if spec.mem_gb else None),
        ("gres", gres_for(spec.gres, tp)),
    ]
    if spec.gpus_per_task and not spec.gres:
        options.append(("gpus-per-node", tp))
    options += [(str(k), v) for k, v in (*profile.sbatch.items(), *spec.sbatch.items())]
    lines = ["#!/bin/bash", *directive_lines(options), "set -euo pipefail", *profile.setup, *body]
    return "\n".join(lines) + "\n"


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
    _checked(params)
    return params
