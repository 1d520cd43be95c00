"""Finding a named YAML file — a SLURM profile, a nightly suite — the same way for each,
and checking its mappings' keys the same way (`checked_keys`).

A name is a path to a ``.yaml``/``.yml`` file, or ``<name>.yaml``/``<name>.yml`` in the
first folder that has one: the folder an environment variable names, then ``./<folder>``
of the current directory (a user's own), then the ``<folder>`` shipped with veribatch.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def search_dirs(env: str, folder: str) -> list[Path]:
    dirs = [Path(os.environ[env])] if os.environ.get(env) else []
    return [*dirs, Path.cwd() / folder, REPO / folder]


def find_yaml(name: str, dirs: list[Path]) -> tuple[Path | None, list[str]]:
    """The file `name` stands for, or None and every place looked at (for the error)."""
    p = Path(name)
    if p.suffix in {".yaml", ".yml"} and p.is_file():
        return p, []
    looked = []
    for d in dirs:
        for cand in (d / f"{name}.yaml", d / f"{name}.yml"):
            looked.append(str(cand))
            if cand.is_file():
                return cand, looked
    return None, list(dict.fromkeys(looked))


def checked_keys(obj: Any, allowed: set[str], where: str,
                 error: type[ValueError]) -> dict[str, Any]:
    """`obj` if it is a mapping whose keys are all `allowed`; else `error` naming `where`,
    the unknown keys and the allowed ones.  An unknown key is an error, not ignored: a typo
    (``acount:``) would otherwise silently fall back to a default."""
    if not isinstance(obj, dict):
        raise error(f"{where}: expected a mapping, got {type(obj).__name__}")
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise error(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; "
                    f"allowed: {', '.join(sorted(allowed))}")
    return obj
