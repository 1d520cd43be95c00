"""Where a run's numbers come from: one flat mapping per run, read from its directory only.

`launch regress` prints the keys that differ between two runs at the top of its report
(so a change is attributable: another model, verifier image, code version, limit...),
and `launch report` shows the whole mapping.  Everything here is read from files
(manifest.json, jobs.json, the records), never from the code that wrote them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from veribatch.rundir.manifest import Manifest

# Keys that differ between any two runs by construction; never reported as a difference.
ALWAYS_DIFFERENT = {"run_id", "created", "identity", "hostname", "run_dir"}


def flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    """Nested config → dotted keys with JSON-ish scalar text (`options.budget_s` → "600.0")."""
    if isinstance(value, Mapping):
        if not value and prefix:
            out[prefix] = "{}"
        for k in sorted(value):
            flatten(f"{prefix}.{k}" if prefix else str(k), value[k], out)
    elif isinstance(value, list | tuple):
        out[prefix] = json.dumps(list(value), sort_keys=True, default=str)
    elif value is None:
        out[prefix] = ""
    else:
        out[prefix] = str(value)


def image_digest(config: Mapping[str, Any]) -> str:
    """The verifier image digest: verifiers append ``+sha256:<digest>`` to their version when
    they run in an image; a native tool has none."""
    version = str(config.get("verifier_version") or "")
    return version.split("+sha256:", 1)[1] if "+sha256:" in version else ""


def model_revisions(stages: Mapping[str, pd.DataFrame]) -> str:
    """Distinct `model_revision` values in the records (inference's completion column)."""
    revs: set[str] = set()
    for frame in stages.values():
        if "model_revision" in frame.columns:
            revs |= {str(v) for v in frame["model_revision"].dropna().unique() if str(v)}
    return ", ".join(sorted(revs))


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def provenance(run_dir: Path, manifest: Manifest,
               stages: Mapping[str, pd.DataFrame] | None = None) -> dict[str, str]:
    """Flat, ordered mapping: identity of the run first, then its whole config."""
    config = manifest.config
    last = _read_json(Path(run_dir) / "jobs.json").get("last_launch") or {}
    agg = _read_json(Path(run_dir) / "aggregate.json")
    out: dict[str, str] = {
        "run_id": manifest.run_id,
        "run_dir": str(run_dir),
        "created": manifest.created or "",
        "code_version": manifest.code_version or "",
        "hostname": manifest.hostname or "",
        "executor": str(last.get("executor") or ""),
        "cluster_profile": str(last.get("profile") or ""),
        "image_digest": image_digest(config),
        "model_revision": model_revisions(stages or {}),
        "aggregate": str(agg.get("status") or "not run"),
        "instance_count": "" if manifest.instance_count is None else str(manifest.instance_count),
    }
    flat: dict[str, str] = {}
    flatten("", config, flat)
    out.update(flat)
    return out


def differences(base: Mapping[str, str], current: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(key, base value, current value) for every key whose value differs, in key order of
    `base` then new keys of `current`."""
    keys = list(dict.fromkeys([*base, *current]))
    return [(k, base.get(k, "(absent)"), current.get(k, "(absent)")) for k in keys
            if k not in ALWAYS_DIFFERENT and base.get(k, "(absent)") != current.get(k, "(absent)")]
