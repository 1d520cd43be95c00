"""How many SLURM array elements each stage gets: engine loads for the generate stage,
start-ups for the CPU stages.

Every stage keeps the run's `--shards` shards (the run directory, ledgers, DONE files and
shard-to-shard upstream reads are unchanged); on SLURM a GPU stage of a model run runs its
shards in *elements*: element e runs the contiguous shards ``[e*S//G, (e+1)*S//G)`` one
after the other in one process that loads the model once (`inference.shared_engines`).

G is chosen so that loading stays a bounded share of an element's GPU time: the stage's
generation work (requests x token budget / the engine's throughput, from the profile's
`generation` table) split G ways must be at least ``(1 - share) / share`` times the load
time.  So G = floor(work x share / ((1 - share) x load)), between 1 and S.  One load per
element is the least a batch array can pay, and more elements than that buy wall time with
GPU-hours of loading.  `--gpu-shards N` or the profile's `generation.elements` fix G.

A CPU stage gets one element per shard up to the profile's `array_parallelism` P, and P
elements beyond that: SLURM never runs more than P elements of the array at once, so the
extra elements would buy no parallelism, only a start-up each (interpreter, imports,
submitit's pickles, the step launch: 1-2 s, as much as a shard of fast verifier calls).
An element runs its group, then takes the shards of other groups nobody has started
(`executors.element.ShardJob`), which keeps the balance of one element per shard.

Sizing reads the manifest, the profile, the choice — and, where ``$VERIBATCH_COSTS`` names
a measured-costs file (`launch.measured`; `launch nightly` keeps one beside its history),
what earlier runs of the same task × stage × verifier × model took: their seconds per
instance replace a CPU stage's declared `seconds_per_instance`, their tokens/s the
profile's throughput, their engine loads the assumed read rate and start-up; the plan
says which it used.  A resumed run groups its shards the
same way unless those figures changed meanwhile; then only the element boundaries move
(every shard keeps its lock, ledger and DONE, so nothing is run twice).

The same figures give an element its SLURM time limit (`job_time`) and its expected time
in the `--dry-run` cost (`element_estimate`): one reading of the load and the work, not a
second rule (the stage's declared `seconds_per_instance` knows neither the model nor the
token budget).  Both live here, with the figures they read, so that the profile
(`launch.profiles`) stays the file format and nothing else.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .measured import Measured, measured_for
from .plan import shard_bounds
from .profiles import GenerationSpec, PartitionSpec, Profile

# Without a profile `time`, a job's limit is estimated from what it must do (`job_time`).
# A CPU stage: its instances at the stage's own estimate per instance with 50 % slack, plus
# a fixed margin.  A stage that runs the model (a GPU stage of a model run): the same
# expected element time the sizing and the `--dry-run` cost use — one engine start plus the
# element's share of the generation work at the profile's throughput — times
# `TIME_SAFETY`, plus the margin.  Too short a limit is expensive: three time-outs fail the
# shard, and a generate array that spends its whole limit loading a 70B model never
# records anything.
JOB_MARGIN_MIN = 5
JOB_MIN_MIN = 10
ENGINE_STARTUP_S = 300.0
"""An inference engine's start-up besides reading weights (CUDA graphs, Ray, compilation)."""
LOAD_BYTES_PER_S = 250e6
"""Weights read from a shared file system under load, cold cache: conservative on purpose
(the rate sizing and time limits assume when the profile gives no `load_gb_per_s`)."""
UNKNOWN_MODEL_LOAD_S = 1800.0
"""When a model's size cannot be told from its name or its files: half an hour."""
BYTES_PER_PARAMETER = 2  # bf16/fp16 weights
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def model_bytes(model: str) -> tuple[float | None, str]:
    """Size of a model's weights in bytes (None: unknown) and how it was found."""
    _, sep, name = model.partition(":")
    if not sep:
        name = model
    path = Path(name).expanduser()
    if path.is_dir():
        size = sum(f.stat().st_size for f in path.rglob("*")
                   if f.suffix in _WEIGHT_SUFFIXES and f.is_file())
        if size:
            return float(size), f"{size / 1e9:.1f} GB of weight files in {path}"
    m = re.search(r"(?:(\d+)x)?(\d+(?:\.\d+)?)\s*[bB](?![a-zA-Z])", path.name or name)
    if m:
        params = float(m.group(2)) * 1e9 * (int(m.group(1)) if m.group(1) else 1)
        return params * BYTES_PER_PARAMETER, \
            f"{params / 1e9:g}B parameters (from the name) x {BYTES_PER_PARAMETER} bytes"
    return None, "size unknown"


def load_basis(model: str | None) -> tuple[float | None, float, str]:
    """What an engine start on `model` costs: (weight bytes, or None where a fixed time
    applies instead; that fixed time; why).  Read once, by `expected_load_s`, which
    the generate sizing, the SLURM time limit and the `--dry-run` cost all use."""
    if not model:
        return None, 0.0, "no model"
    engine = model.partition(":")[0]
    if not _loads_weights(engine):
        return None, 0.0, f"{engine}: nothing to load"
    size, how = model_bytes(model)
    if size is None:
        return None, UNKNOWN_MODEL_LOAD_S, f"model {how}: {UNKNOWN_MODEL_LOAD_S / 60:g} min assumed"
    return size, 0.0, how


def _loads_weights(engine: str) -> bool:
    """The engine's class fact (`inference.types.Engine.loads_weights`); an engine that is
    not installed here (planned on a login node without it) is charged a load."""
    from veribatch.inference.errors import UnknownEngineError
    from veribatch.inference.registry import engine_class

    try:
        return engine_class(engine).loads_weights
    except (UnknownEngineError, ImportError):
        return True


Unit = list[int]
"""The shards one array element runs: one, or a sized stage's contiguous group."""

TIME_SAFETY = 2.0
"""A generate element's time limit is this many times its expected time (+ the margin).
The expected time is an estimate from the profile's figures; a time-out costs a fresh load
and a requeue (three fail the shard), a limit twice too long only costs backfill chances."""


@dataclass(frozen=True)
class Sizing:
    elements: int          # array elements (G); == shards for a stage that is not sized
    load_s: float          # expected seconds to start the engine, per element
    work_s: float          # expected generation seconds of the whole stage (all elements)
    why: str


def expected_load_s(model: str | None, gen: GenerationSpec,
                    measured: Measured | None = None) -> tuple[float, str]:
    """Expected seconds to start an engine on `model`: what earlier runs' loads of the same
    task × stage × verifier × model measured (`measured.load_s`), else the weights at the
    profile's `load_gb_per_s` (or the built-in rate) plus the engine start-up."""
    size, fixed, how = load_basis(model)
    if measured is not None and measured.load_s and (size is not None or fixed > 0):
        return measured.load_s, measured.describe_load()
    if size is None:
        return fixed, how
    rate = gen.load_gb_per_s * 1e9 if gen.load_gb_per_s else LOAD_BYTES_PER_S
    src = "profile generation.load_gb_per_s" if gen.load_gb_per_s else "built-in"
    load = ENGINE_STARTUP_S + size / rate
    return load, (f"{how} at {rate / 1e9:g} GB/s ({src}) + {ENGINE_STARTUP_S / 60:g} min "
                  "engine start-up")


def generation_work_s(config: dict[str, Any], instances: int, gen: GenerationSpec,
                      measured: Measured | None = None) -> tuple[float, str]:
    """Expected seconds one element's engine (a pool of `replicas`: that many times the
    throughput) needs for the whole stage: instances x samples x the run's max_tokens
    budget, at the profile's tokens/s for the model.  The budget is an
    upper bound on what is generated, so this is an upper bound on the work — and G an upper
    bound on the loads the work justifies."""
    model = config.get("model") or ""
    n = int((config.get("options") or {}).get("n_samples", 1) or 1)
    max_tokens = int((config.get("sampling") or {}).get("max_tokens") or 1024)
    tps, src = gen.throughput(model)
    if measured is not None and measured.tokens_per_s:
        tps, src = measured.tokens_per_s, measured.describe() + (
            ", engine loads excluded" if measured.load_s else ", loads included")
    tokens = instances * n * max_tokens
    reps = gen.replicas or 1  # a Ray pool's replicas generate side by side
    return tokens / (tps * reps), (
        f"{instances} instances x {n} sample(s) x {max_tokens} max_tokens = {tokens:,} tokens "
        f"at {tps:g} tokens/s ({src})" + (f" x {reps} replicas (profile generation.replicas)"
                                          if reps > 1 else ""))


def element_estimate(config: dict[str, Any], instances: int, gen: GenerationSpec,
                     measured: Measured | None = None) -> tuple[float, float, str]:
    """Expected (load seconds, generation seconds, why) of ONE element that runs
    `instances` instances: one engine start plus its instances' share of the work."""
    load, load_why = expected_load_s(config.get("model"), gen, measured)
    work, work_why = generation_work_s(config, instances, gen, measured)
    return load, work, f"load {load / 60:.1f} min ({load_why}); work {work / 60:.1f} min " \
                       f"({work_why})"


@dataclass(frozen=True)
class JobTime:
    minutes: int
    source: str  # "profile" (the profile's `time`) or "estimate"
    detail: str  # how it was derived, for `--dry-run` and jobs.json

    def describe(self) -> str:
        return f"{self.minutes} min ({self.detail})"


def generate_time_limit(config: dict[str, Any], instances: int, gen: GenerationSpec,
                        measured: Measured | None = None) -> JobTime:
    """The SLURM time limit of one element of a sized stage (no profile `time`):
    `TIME_SAFETY` x the expected element time (`element_estimate`) + the margin."""
    load, work, why = element_estimate(config, instances, gen, measured)
    minutes = max(JOB_MIN_MIN, math.ceil(TIME_SAFETY * (load + work) / 60) + JOB_MARGIN_MIN)
    return JobTime(minutes, "estimate",
                   f"{TIME_SAFETY:g} x expected {(load + work) / 60:.1f} min [{why}] "
                   f"+ {JOB_MARGIN_MIN} min margin, at least {JOB_MIN_MIN} min")


def job_time(spec: PartitionSpec, stage: dict[str, Any], instances: int,
             config: dict[str, Any] | None = None,
             generation: GenerationSpec | None = None) -> JobTime:
    """The time limit of one array element of `stage` running `instances` instances.

    `config`: the run's config (manifest ``config``: model, options, sampling); a stage that
    runs the model (`is_sized`) gets its limit from the sizing's own estimate, read
    with `generation` (the profile's figures; None: the built-in defaults)."""
    if spec.time_min is not None:
        return JobTime(spec.time_min, "profile", "the profile's time")
    measured = measured_for(config, str(stage.get("name"))) if config is not None else None
    if config is not None and is_sized(stage, config):
        return generate_time_limit(config, instances, generation or GenerationSpec(), measured)
    spi, src = seconds_per_instance(stage, measured)
    work = instances * spi * 1.5
    minutes = max(JOB_MIN_MIN, math.ceil(work / 60) + JOB_MARGIN_MIN)
    return JobTime(minutes, "estimate", f"{instances} instance(s) x {spi:.3g} s ({src}) x 1.5; "
                                        f"+ {JOB_MARGIN_MIN} min margin, at least "
                                        f"{JOB_MIN_MIN} min")


def seconds_per_instance(stage: Any, measured: Measured | None) -> tuple[float, str]:
    """A CPU stage's expected seconds per instance and where it comes from: measured by
    earlier runs, else the stage's declared `seconds_per_instance` (for the verifiers the
    budget: an upper bound)."""
    if measured is not None:
        return measured.wall_s, measured.describe()
    return float(stage.get("seconds_per_instance", 60.0)), \
        "assumed: the stage's declared seconds_per_instance"


def is_sized(stage: dict[str, Any], config: dict[str, Any]) -> bool:
    """Only a GPU stage of a model run loads the model per element."""
    return stage.get("resource") == "gpu" and bool(config.get("model"))


def size_stage(stage: dict[str, Any], config: dict[str, Any], instances: int, shards: int,
               profile: Profile, override: int | None = None) -> Sizing:
    """The element count of `stage` and why (see the module docstring)."""
    if not is_sized(stage, config):
        cap = profile.array_parallelism
        if stage.get("resource") == "cpu" and shards > cap:
            return Sizing(cap, 0.0, 0.0, f"{shards} shards in {cap} elements: at most "
                          f"array_parallelism {cap} run at once, so more elements would only "
                          "add start-ups; an element runs its shards one after another, then "
                          "others' not yet started")
        return Sizing(shards, 0.0, 0.0, "one element per shard")
    gen = profile.generation
    measured = measured_for(config, str(stage.get("name")))
    load, load_why = expected_load_s(config.get("model"), gen, measured)
    work, work_why = generation_work_s(config, instances, gen, measured)
    fixed = override if override is not None else gen.elements
    if fixed is not None:
        src = "--gpu-shards" if override is not None else "profile generation.elements"
        g = max(1, min(shards, fixed))
        return Sizing(g, load, work, f"{src} {fixed}" + (f" (at most {shards} shards)"
                                                           if fixed > shards else ""))
    if load <= 0:
        return Sizing(shards, load, work, f"{load_why}: one element per shard")
    share = gen.max_load_share
    g = max(1, min(shards, math.floor(work * share / ((1 - share) * load))))
    return Sizing(g, load, work, f"load {load / 60:.1f} min ({load_why}); work "
                                 f"{work / 60:.1f} min ({work_why}); loads <= "
                                 f"{share:.0%} of GPU time -> {g} element(s)")


def element_groups(shards: int, elements: int) -> list[list[int]]:
    """Element e → its shards ``[e*S//G, (e+1)*S//G)`` (contiguous, like instances in shards)."""
    return [list(range(a, b)) for a, b in shard_bounds(shards, elements)]


def stage_units(profile: Profile, manifest: dict[str, Any], stage: dict[str, Any],
                shards: list[int], gpu_shards: int | None = None) -> list[Unit]:
    """The array elements of `stage` for the shards to run: one per shard, or for a sized
    stage the shards of each element that still has work."""
    total = int(manifest["shards"])
    size = size_stage(stage, manifest["config"], int(manifest["instance_count"]), total,
                      profile, gpu_shards)
    if size.elements >= total:
        return [[k] for k in sorted(shards)]
    todo = set(shards)
    return [[k for k in g if k in todo] for g in element_groups(total, size.elements)
            if todo.intersection(g)]
