"""What a SLURM run will request and roughly cost, per stage, for `--dry-run`.

The resources are the sbatch parameters themselves (`executors.sbatch.sbatch_parameters`,
the function submission calls), for the array elements submission would create
(`sizing.stage_units`), so the table cannot drift
from what sbatch receives.  The cost figures are estimates from what the run knows:

- a CPU stage's element takes its instances x the seconds per instance that earlier runs
  of the same task, stage, verifier and model measured (`launch.measured`, through
  ``$VERIBATCH_COSTS``), else the stage's declared `seconds_per_instance` (for the
  verifiers the per-instance budget, so an upper bound) — each line says which;
- a generate element takes one model load plus its instances' share of the stage's
  generation work (token budget / the profile's throughput for the model):
  `sizing.element_estimate`, the figure its time limit is derived from too;
- requested hours are elements x CPUs or GPUs x the time limit; expected hours use the
  expected element time (CPU-hours: allocated cores x expected busy time); the load share is loads x load time over expected GPU busy time;
- wall time: ceil(elements / array_parallelism) waves of the longest element, and for the
  run the longest chain of stages through `needs` (no overlap assumed: an upper bound).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from ..measured import measured_for
from ..profiles import Profile
from ..sizing import (
    element_estimate,
    is_sized,
    job_time,
    seconds_per_instance,
    size_stage,
    stage_units,
)


@dataclass(frozen=True)
class StageCost:
    stage: str
    resource: str
    params: dict[str, Any]   # the sbatch parameters of the stage's arrays (dependency aside)
    elements: int
    max_instances: int       # instances of the largest element
    time_detail: str         # how the time limit (params["time"]) was derived
    gpus: int                # per element
    loads: int
    load_s: float
    element_s: float         # expected seconds of the longest element
    busy_s: float            # expected seconds of all elements together
    waves: int
    why: str

    @property
    def hours_requested(self) -> float:
        return self.elements * int(self.params["time"]) / 60

    @property
    def cpu_hours(self) -> float:
        return self.hours_requested * int(self.params["cpus_per_task"])

    @property
    def gpu_hours(self) -> float:
        return self.hours_requested * self.gpus

    @property
    def gpu_hours_expected(self) -> float:
        return self.busy_s / 3600 * self.gpus

    @property
    def cpu_hours_expected(self) -> float:
        """Allocated cores x expected busy time: what the elements hold, not what they use."""
        return self.busy_s / 3600 * int(self.params["cpus_per_task"])

    @property
    def load_share(self) -> float:
        return self.loads * self.load_s / self.busy_s if self.busy_s else 0.0

    @property
    def wall_s(self) -> float:
        return self.waves * self.element_s


def gpus_of(params: dict[str, Any]) -> int:
    """GPUs per node of an element: `gpus_per_task`, else the count in `gres` (``gpu:a100:4``)."""
    if params.get("gpus_per_task"):
        return int(params["gpus_per_task"])
    m = re.fullmatch(r"gpu(?::([^:,]+))?(?::(\d+))?", str(params.get("gres") or ""))
    if not m:
        return 0
    kind, count = m.groups()
    if count:
        return int(count)
    return int(kind) if kind and kind.isdigit() else 1


def estimate(manifest: dict[str, Any], profile: Profile, counts: list[int],
             gpu_shards: int | None = None) -> list[StageCost]:
    """Per stage of `manifest` (aggregate included) what a first submission requests.

    `counts`: instances per shard (the run's shard bounds)."""
    from .sbatch import AGGREGATE_JOB_MINUTES, AGGREGATE_JOB_RESOURCES, sbatch_parameters

    config = manifest["config"]
    out = []
    for st in manifest["stages"]:
        name = st["name"]
        if st.get("added_by") == "launch":
            spec = profile.for_resource("cpu", name)
            params = sbatch_parameters(profile, spec, AGGREGATE_JOB_RESOURCES,
                                       spec.time_min or AGGREGATE_JOB_MINUTES,
                                       job_name=f"vb-RUN-{name}", parallelism=1)
            out.append(StageCost(name, "cpu", params, 1, 0, "after every array", 0, 0, 0.0,
                                 60.0, 60.0, 1, "one job after every array"))
            continue
        spec = profile.for_resource(st["resource"], name)
        units = stage_units(profile, manifest, st, list(range(len(counts))), gpu_shards)
        per = [sum(counts[k] for k in u) for u in units]
        limit = job_time(spec, st, max(per), config, profile.generation)
        params = sbatch_parameters(profile, spec, st, limit.minutes,
                                   job_name=f"vb-RUN-{name}")
        gpus = gpus_of(params) * int(params.get("nodes", 1))
        size = size_stage(st, config, int(manifest["instance_count"]), len(counts), profile,
                          gpu_shards)
        measured = measured_for(config, name)
        if is_sized(st, config):
            times = [sum(element_estimate(config, n, profile.generation, measured)[:2])
                     for n in per]
            loads, why = (len(units) if size.load_s else 0), size.why
        else:
            spi, src = seconds_per_instance(st, measured)
            times = [n * spi for n in per]
            loads, why = 0, f"{spi:.3g} s per instance ({src})"
            if len(units) < len(counts):
                why += f"; {size.why}"
        out.append(StageCost(name, st["resource"], params, len(units), max(per),
                             limit.detail, gpus, loads, size.load_s, max(times), sum(times),
                             math.ceil(len(units) / int(params["array_parallelism"])), why))
    return out


def run_wall_s(costs: list[StageCost], manifest: dict[str, Any]) -> float:
    """Expected wall time of the run: the longest chain of stages through `needs`."""
    by_name = {c.stage: c for c in costs}
    finish: dict[str, float] = {}
    for st in manifest["stages"]:
        start = max((finish.get(n, 0.0) for n in st.get("needs", [])), default=0.0)
        finish[st["name"]] = start + by_name[st["name"]].wall_s
    return max(finish.values(), default=0.0)


def _h(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.3g} s"
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def describe(costs: list[StageCost], manifest: dict[str, Any], profile: Profile) -> list[str]:
    """The `--dry-run` lines: what sbatch receives per stage, then the cost estimate."""
    lines = [f"SLURM, profile {profile.name} — per stage, as sbatch receives it "
             "(one line per array element):"]
    for c in costs:
        p = c.params
        res = [f"partition {p.get('partition', '(cluster default)')}", f"nodes {p.get('nodes', 1)}",
               f"cpus {p['cpus_per_task']}",
               f"gpus {c.gpus}" + (f" (gres {p['gres']})" if p.get("gres") else ""),
               f"mem {p['mem']}"]
        for key in ("account", "qos", "constraint"):
            if p.get(key):
                res.append(f"{key} {p[key]}")
        res.append(f"time {p['time']} min ({c.time_detail})")
        lines.append(f"  {c.stage}: {c.elements} element(s) x ({', '.join(res)})")
    lines.append(f"cost estimate (array_parallelism {profile.array_parallelism}):")
    for c in costs:
        if c.stage == "aggregate":
            continue
        line = (f"  {c.stage}: {c.elements} element(s) of <= {c.max_instances} instance(s); "
                f"requested {c.cpu_hours:.1f} CPU-h, {c.gpu_hours:.1f} GPU-h; expected "
                f"{c.cpu_hours_expected:.3g} CPU-h")
        if c.gpus:
            line += (f"; expected {c.gpu_hours_expected:.1f} GPU-h; model loads {c.loads} "
                     f"x {c.load_s / 60:.1f} min = {c.load_share:.0%} of GPU time")
        line += (f"; wall ~{_h(c.wall_s)} ({c.waves} wave(s) of <= {_h(c.element_s)}) — "
                 f"{c.why}")
        lines.append(line)
    gpu = sum(c.gpu_hours for c in costs)
    cpu = sum(c.cpu_hours for c in costs)
    loads = sum(c.loads * c.load_s * c.gpus for c in costs) / 3600
    busy = sum(c.gpu_hours_expected for c in costs)
    cpu_expected = sum(c.cpu_hours_expected for c in costs if c.stage != "aggregate")
    lines.append(f"  run: requested {cpu:.1f} CPU-h, {gpu:.1f} GPU-h; expected "
                 f"{cpu_expected:.3g} CPU-h; expected GPU time "
                 f"{busy:.1f} GPU-h of which loading {loads:.1f} GPU-h "
                 f"({loads / busy if busy else 0:.0%}); wall ~{_h(run_wall_s(costs, manifest))}")
    return lines
