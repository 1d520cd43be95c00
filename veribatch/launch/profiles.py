"""SLURM profiles: one YAML file per cluster (partitions, account, qos, gres, limits, setup).

A profile maps each stage resource (`cpu`, `gpu`) to a partition entry.  Unknown
keys are errors, not silently ignored: a typo like `acount:` would otherwise
submit to the wrong account and be noticed only in the bill.  Command-line flags
(`--partition`, `--account`, `--qos`) override what the profile says.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from .lookup import checked_keys, find_yaml, search_dirs

PROFILES_ENV = "VERIBATCH_PROFILES_DIR"
TOP_KEYS = {"description", "partitions", "account", "qos", "array_parallelism", "image_dir",
            "setup", "signal_delay_s", "max_array_size", "sbatch", "generation"}
GENERATION_KEYS = {"tokens_per_s", "load_gb_per_s", "max_load_share", "elements", "replicas"}
PARTITION_KEYS = {"partition", "time", "mem_gb", "cpus_per_task", "gres", "gpus_per_task",
                  "account", "qos", "constraint", "sbatch", "nodes"}
RESOURCES = ("cpu", "gpu")


class ProfileError(ValueError):
    """A profile file is missing, malformed, or lacks what the run needs."""


@dataclass(frozen=True)
class PartitionSpec:
    partition: str | None = None       # None: the cluster's default partition
    time_min: int | None = None        # job time limit; None: estimated from the stage
    mem_gb: float | None = None
    cpus_per_task: int | None = None
    gres: str | None = None
    gpus_per_task: int | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    sbatch: dict[str, Any] = field(default_factory=dict)
    nodes: int | None = None           # nodes per array element (a Ray pool over several)


DEFAULT_TOKENS_PER_S = 1000.0
"""Output tokens/s of one engine (one GPU array element, all its GPUs) for a model the
profile's throughput table does not list: a mid-size model under vLLM with the tasks'
16 concurrent requests.  Higher than a 70B model manages — an unknown model is sized
towards fewer loads, the cheaper error."""
DEFAULT_MAX_LOAD_SHARE = 0.2
"""Sizing target: at most this share of a generate element's GPU time spent loading."""


@dataclass(frozen=True)
class GenerationSpec:
    """A site's figures for sizing the generate stage (`launch.sizing`): throughput of one
    engine per model, the expected weight read rate, the load-share target, or a fixed
    element count.  None: the code's documented default."""

    tokens_per_s: dict[str, float] = field(default_factory=dict)  # model name (or "default")
    load_gb_per_s: float | None = None
    max_load_share: float = DEFAULT_MAX_LOAD_SHARE
    elements: int | None = None
    replicas: int | None = None  # engines as a Ray pool of this many replicas per element

    def throughput(self, model: str) -> tuple[float, str]:
        """Output tokens/s of one engine for `model` (an engine spec), and where it came from."""
        name = model.partition(":")[2] or model
        for key in (model, name, Path(name).name):
            if key in self.tokens_per_s:
                return float(self.tokens_per_s[key]), f"profile generation.tokens_per_s[{key!r}]"
        if "default" in self.tokens_per_s:
            return float(self.tokens_per_s["default"]), "profile generation.tokens_per_s.default"
        return DEFAULT_TOKENS_PER_S, "built-in default"


@dataclass(frozen=True)
class Profile:
    name: str
    source: str
    partitions: dict[str, PartitionSpec]
    account: str | None = None
    qos: str | None = None
    array_parallelism: int = 256
    image_dir: str | None = None
    setup: tuple[str, ...] = ()
    signal_delay_s: int = 120
    max_array_size: int | None = None  # None: read MaxArraySize from `scontrol show config`
    sbatch: dict[str, Any] = field(default_factory=dict)
    generation: GenerationSpec = field(default_factory=GenerationSpec)

    def for_resource(self, resource: str, stage: str) -> PartitionSpec:
        if resource not in self.partitions:
            have = ", ".join(sorted(self.partitions)) or "none"
            raise ProfileError(f"profile {self.name!r} ({self.source}) has no partition for "
                               f"resource {resource!r}, needed by stage {stage!r}; it defines: {have}")
        return self.partitions[resource]


DEFAULT_PROFILE = Profile(
    name="default", source="built-in",
    partitions={"cpu": PartitionSpec(), "gpu": PartitionSpec(gres="gpu:1")},
)


def parse_time(value: Any, where: str) -> int:
    """SLURM time syntax → minutes: 90, "90", "01:30:00", "2-00:00:00", "30:00" (MM:SS)."""
    if isinstance(value, int) and value > 0:
        return value
    s = str(value).strip()
    m = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", s)
    if not m:
        raise ProfileError(f"{where}: bad time {value!r} (use minutes or [D-]HH:MM:SS)")
    days, a, b, c = m.groups()
    d = int(days or 0)
    if c is not None:           # H:M:S
        minutes = int(a) * 60 + int(b) + (1 if int(c) else 0)
    elif b is not None:         # with days: H:M, else M:S
        minutes = int(a) * 60 + int(b) if days else int(a) + (1 if int(b) else 0)
    else:
        minutes = int(a) * 60 if days else int(a)
    minutes += d * 24 * 60
    if minutes <= 0:
        raise ProfileError(f"{where}: time {value!r} is not positive")
    return minutes


def _typed(obj: dict[str, Any], key: str, kind: str, where: str) -> Any:
    """`obj[key]` checked against `kind` (str | int>=1 | int>=0 | number>0 | mapping), or None.
    `where` is the message prefix naming the file (and the entry) the key is in.

    A bad value is an error naming the file and the key, raised when the profile is loaded —
    at plan time, before anything is written — not a traceback from deep inside sbatch."""
    if key not in obj or obj[key] is None:
        return None
    v = obj[key]
    ok = {"str": isinstance(v, str) and bool(v.strip()),
          "int>=1": isinstance(v, int) and not isinstance(v, bool) and v >= 1,
          "int>=0": isinstance(v, int) and not isinstance(v, bool) and v >= 0,
          "number>0": isinstance(v, int | float) and not isinstance(v, bool) and v > 0,
          "mapping": isinstance(v, dict)}[kind]
    if not ok:
        want = {"str": "a non-empty string", "int>=1": "a whole number >= 1",
                "int>=0": "a whole number >= 0", "number>0": "a number > 0",
                "mapping": "a mapping of sbatch option: value"}[kind]
        raise ProfileError(f"{where}{key}: {v!r} is not {want}")
    if kind == "mapping":
        for k, x in v.items():
            if not isinstance(k, str) or not isinstance(x, str | int | float | bool):
                raise ProfileError(f"{where}{key}.{k}: {x!r} is not a plain sbatch value")
    return v


def find_profile(name: str) -> Path:
    path, looked = find_yaml(name, search_dirs(PROFILES_ENV, "slurm_profiles"))
    if path is None:
        raise ProfileError(f"unknown profile {name!r}; looked in: {', '.join(looked)}")
    return path


def load_profile(name: str | None) -> Profile:
    if name is None or name == "default":
        return DEFAULT_PROFILE
    path = find_profile(name)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ProfileError(f"{path}: not valid YAML ({e})") from None
    data = checked_keys(data, TOP_KEYS, str(path), ProfileError)
    parts_raw = data.get("partitions")
    if not parts_raw:
        raise ProfileError(f"{path}: no 'partitions' (map resources cpu/gpu to partitions)")
    parts_raw = checked_keys(parts_raw, set(RESOURCES), f"{path}: partitions", ProfileError)
    parts = {}
    for res, spec in parts_raw.items():
        where = f"{path}: partitions.{res}"
        spec = checked_keys(spec or {}, PARTITION_KEYS, where, ProfileError)
        at = f"{where}."
        parts[res] = PartitionSpec(
            partition=_typed(spec, "partition", "str", at),
            time_min=parse_time(spec["time"], f"{where}.time") if "time" in spec else None,
            mem_gb=_typed(spec, "mem_gb", "number>0", at),
            cpus_per_task=_typed(spec, "cpus_per_task", "int>=1", at),
            gres=_typed(spec, "gres", "str", at),
            gpus_per_task=_typed(spec, "gpus_per_task", "int>=0", at),
            account=_typed(spec, "account", "str", at),
            qos=_typed(spec, "qos", "str", at),
            constraint=_typed(spec, "constraint", "str", at),
            sbatch=dict(_typed(spec, "sbatch", "mapping", at) or {}),
            nodes=_typed(spec, "nodes", "int>=1", at),
        )
    setup = data.get("setup") or []
    if not isinstance(setup, list) or not all(isinstance(x, str) for x in setup):
        raise ProfileError(f"{path}: 'setup' must be a list of shell lines")
    where = f"{path}: "
    image_dir = _typed(data, "image_dir", "str", where)  # a cluster path: may not exist here
    parallelism = _typed(data, "array_parallelism", "int>=1", where)
    delay = _typed(data, "signal_delay_s", "int>=0", where)
    return Profile(
        name=path.stem, source=str(path), partitions=parts,
        generation=_generation(data.get("generation"), f"{path}: generation."),
        account=_typed(data, "account", "str", where), qos=_typed(data, "qos", "str", where),
        array_parallelism=256 if parallelism is None else parallelism,
        image_dir=str(Path(image_dir).expanduser()) if image_dir else None, setup=tuple(setup),
        signal_delay_s=120 if delay is None else delay,
        max_array_size=_typed(data, "max_array_size", "int>=1", where),
        sbatch=dict(_typed(data, "sbatch", "mapping", where) or {}),
    )


def _generation(raw: Any, where: str) -> GenerationSpec:
    if raw is None:
        return GenerationSpec()
    raw = checked_keys(raw, GENERATION_KEYS, where.rstrip(". "), ProfileError)
    table = raw.get("tokens_per_s") or {}
    if isinstance(table, int | float) and not isinstance(table, bool):
        table = {"default": table}
    if not isinstance(table, dict):
        raise ProfileError(f"{where}tokens_per_s: expected a number or a mapping model: tokens/s")
    for k, v in table.items():
        if not isinstance(v, int | float) or isinstance(v, bool) or v <= 0:
            raise ProfileError(f"{where}tokens_per_s.{k}: {v!r} is not a number > 0")
    share = _typed(raw, "max_load_share", "number>0", where)
    if share is not None and share >= 1:
        raise ProfileError(f"{where}max_load_share: {share!r} is not below 1")
    return GenerationSpec(
        tokens_per_s={str(k): float(v) for k, v in table.items()},
        load_gb_per_s=_typed(raw, "load_gb_per_s", "number>0", where),
        max_load_share=DEFAULT_MAX_LOAD_SHARE if share is None else float(share),
        elements=_typed(raw, "elements", "int>=1", where),
        replicas=_typed(raw, "replicas", "int>=1", where))


def bare_partition_targets(profile: Profile, name: str,
                           resources: Collection[str] | None) -> list[str]:
    """The resources a bare `--partition NAME` applies to (see docs/configuration.md).

    NAME names a resource when it is a resource key (``gpu``/``cpu``) or a partition the
    profile gives a resource; otherwise it goes to the GPU stages when the run has any,
    else to the CPU stages.  Never both: a bare name must not carry 600 s CPU verification
    onto GPU nodes (or generation onto CPU nodes)."""
    if name in RESOURCES:
        return [name]
    named = [r for r in RESOURCES if r in profile.partitions
             and profile.partitions[r].partition == name]
    if named:
        return named
    used = set(RESOURCES) if resources is None else set(resources)
    return ["gpu"] if "gpu" in used else ["cpu"]


def apply_overrides(profile: Profile, *, partitions: list[str] = (),  # type: ignore[assignment]
                    account: str | None = None, qos: str | None = None,
                    resources: Collection[str] | None = None) -> Profile:
    """`--partition gpu=NAME` / `cpu=NAME` set one resource's partition; a bare
    `--partition NAME` applies to the resource(s) `bare_partition_targets` names.

    A bare resource key keeps the partition the profile gives that resource (the card's
    `--partition gpu` on a profile with `gpu: {partition: a100}` means a100), or becomes the
    partition name when the profile names none.  `resources`: the run's stage resources."""
    parts = dict(profile.partitions)
    for item in partitions:
        res, sep, name = item.partition("=")
        if sep and res not in RESOURCES:
            raise ProfileError(f"--partition {item!r}: resource must be one of {RESOURCES}")
        if not name.strip() if sep else not item.strip():
            raise ProfileError(f"--partition {item!r}: no partition name")
        if sep:
            parts[res] = replace(parts.get(res, PartitionSpec()), partition=name)
            continue
        for r in bare_partition_targets(profile, item, resources):
            spec = parts.get(r, PartitionSpec())
            keep = item in RESOURCES and spec.partition
            parts[r] = spec if keep else replace(spec, partition=item)
    return replace(profile, partitions=parts,
                   account=account if account is not None else profile.account,
                   qos=qos if qos is not None else profile.qos)
