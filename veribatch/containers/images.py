"""Build and check the verifier images; the lock file records what was built.

``<images dir>/images.lock.json`` maps each image name to the SIF file's sha256,
the sha256 of the definition file it was built from, the tool version label and
the build time.  `check` re-hashes every built image against the lock (a swapped
or rebuilt image is caught before it produces a single verdict), notices a
definition edited since the build, lists what is still unpinned, and runs each
image's ``%test`` with ``apptainer test`` where apptainer exists.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from veribatch.containers.definitions import DEFINITIONS_DIR, ImageDefinition, load_definitions

LOCK_NAME = "images.lock.json"


class UnknownImageError(LookupError):
    """An image name with no definition file; the message lists the known ones.  Our own,
    because `containers` sits beside `tasks`, not below it (docs/architecture.md)."""


class ApptainerMissing(RuntimeError):
    """Building or testing needs the apptainer binary, which is not on this machine."""


def images_dir(explicit: Path | None = None) -> Path:
    return Path(explicit or os.environ.get("VERIBATCH_IMAGES") or "images")


def sha256_file(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def read_lock(directory: Path) -> dict[str, Any]:
    path = directory / LOCK_NAME
    if not path.is_file():
        return {}
    try:
        lock = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(lock, dict):
        raise ValueError(f"{path}: expected a JSON object of image entries")
    return lock


def write_lock(directory: Path, lock: dict[str, Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{LOCK_NAME}.tmp"
    tmp.write_text(json.dumps(lock, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, directory / LOCK_NAME)


def _apptainer() -> str:
    from veribatch.verifiers.apptainer import apptainer_binary
    from veribatch.verifiers.base import ToolNotFoundError

    try:
        return apptainer_binary()
    except ToolNotFoundError as e:
        raise ApptainerMissing(f"{e}; images are built and tested on a machine with apptainer "
                               "(e.g. `module load apptainer` on the cluster)") from None


def build_argv(binary: str, definition: ImageDefinition, sif: Path) -> list[str]:
    """`apptainer build --force SIF DEF` (run from the repository root for %files paths)."""
    return [binary, "build", "--force", str(sif), str(definition.path)]


def build(name: str, directory: Path, definitions_dir: Path = DEFINITIONS_DIR) -> dict[str, Any]:
    """Build one image into `directory` and record it in the lock file."""
    defs = load_definitions(definitions_dir)
    if name not in defs:
        raise UnknownImageError(f"unknown image {name!r}; known: {', '.join(sorted(defs))}")
    d = defs[name]
    binary = _apptainer()
    directory.mkdir(parents=True, exist_ok=True)
    sif = directory / f"{name}.sif"
    subprocess.run(build_argv(binary, d, sif), check=True, cwd=definitions_dir.parent)
    entry = {
        "sif": sif.name,
        "sha256": sha256_file(sif),
        "definition_sha256": sha256_file(d.path),
        "tool_version": d.tool_version,
        "unpinned": d.unpinned(),
        "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    lock = read_lock(directory)
    lock[name] = entry
    write_lock(directory, lock)
    return entry


@dataclass
class ImageCheck:
    name: str
    ok: bool = True
    problems: list[str] = field(default_factory=list)  # make the check fail
    unpinned: list[str] = field(default_factory=list)  # reported; fail only with strict
    notes: list[str] = field(default_factory=list)

    def fail(self, why: str) -> None:
        self.ok = False
        self.problems.append(why)


def check(directory: Path, *, run_tests: bool = True, strict: bool = False,
          definitions_dir: Path = DEFINITIONS_DIR) -> list[ImageCheck]:
    """Check every definition and, where built, its image (see the module docstring)."""
    lock = read_lock(directory)
    try:
        binary: str | None = _apptainer()
    except ApptainerMissing:
        binary = None
    results = []
    for name, d in load_definitions(definitions_dir).items():
        c = ImageCheck(name)
        for p in d.problems():
            c.fail(f"{d.path.name}: {p}")
        c.unpinned = d.unpinned()
        if strict and c.unpinned:
            c.fail(f"{len(c.unpinned)} unpinned item(s)")
        entry = lock.get(name)
        sif = directory / (entry["sif"] if entry else f"{name}.sif")
        if entry is None:
            c.notes.append(f"not built (no entry in {directory / LOCK_NAME})")
            if sif.exists():
                c.fail(f"{sif} exists but is not in the lock file")
        elif not sif.is_file():
            c.fail(f"{sif} is in the lock file but missing")
        else:
            actual = sha256_file(sif)
            if actual != entry.get("sha256"):
                c.fail(f"{sif}: sha256 {actual} differs from the lock ({entry.get('sha256')})")
            if entry.get("definition_sha256") != sha256_file(d.path):
                c.fail(f"{d.path.name} changed since {sif.name} was built: rebuild it")
            if c.ok and run_tests:
                if binary is None:
                    c.notes.append("apptainer not available: %test not run")
                else:
                    proc = subprocess.run([binary, "test", str(sif)], capture_output=True,
                                          text=True)
                    if proc.returncode != 0:
                        c.fail(f"%test failed: {(proc.stderr or proc.stdout)[-500:]}")
                    else:
                        c.notes.append("%test passed")
        results.append(c)
    return results
