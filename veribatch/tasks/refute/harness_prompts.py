"""The REFUTE authors' prompt templates, fetched from their origin at a pinned commit.

The paper's strategies were run with the templates of the authors' harness
(github.com/falsifiers/REFUTE, ``refute/prompt_templates/*.txt``, Apache-2.0): the zero-shot,
few-shot (three problems with expert rationales), oracle, RandSearch (with rationales, for
chat models) and oracle RandSearch system/human prompts, and the ``reasoning_*`` system
prompts the harness swaps in for reasoning models.  They are the default templates
(`tasks.refute.prompt`); they are not copied into this repository but downloaded like a
data set: ``harness_prompts_pin.json`` names the repository, the commit and the sha256 of
every file, `fetch` downloads exactly those files (one raw-file URL each) into
``$VERIBATCH_CACHE/refute-prompts/<commit>/`` and checks every checksum before anything
reads them.

Offline: ``$VERIBATCH_REFUTE_PROMPTS`` names a folder holding the files (a checkout of the
harness's ``prompt_templates``); they are checked against the same pin.  A mirror:
``$VERIBATCH_REFUTE_PROMPTS_URL``, a template with ``{repository}``, ``{revision}``,
``{folder}`` and ``{name}``.
"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path
from typing import Any

from veribatch.tasks import pinned as pinning
from veribatch.tasks.base import DatasetError

PIN_FILE = Path(__file__).resolve().parent / "harness_prompts_pin.json"
RAW_URL = "https://raw.githubusercontent.com/{repository}/{revision}/{folder}/{name}"
URL_ENV = "VERIBATCH_REFUTE_PROMPTS_URL"
LOCAL_ENV = "VERIBATCH_REFUTE_PROMPTS"
OFFLINE_HINT = (f"Put the harness's refute/prompt_templates/*.txt in a folder and set ${LOCAL_ENV} "
                "to it (checked against the same sha256), or run with -o prompts=veribatch "
                "(our own templates, a named variant).")


ORIGIN = pinning.Origin("refute-prompts", PIN_FILE, what="the prompt-template pin")


@functools.cache
def pins() -> dict[str, Any]:
    return ORIGIN.pins()


def commit() -> str:
    return str(pins()["revision"])


def file_sha256(name: str) -> str:
    try:
        return str(pins()["files"][name])
    except KeyError:
        raise DatasetError(f"{PIN_FILE}: no pinned template {name!r}") from None


def url(name: str) -> str:
    p = pins()
    return os.environ.get(URL_ENV, RAW_URL).format(
        repository=p["repository"], revision=p["revision"], folder=p["folder"], name=name)


def fetch(timeout_s: float = 60.0) -> Path:
    """The folder of the pinned templates, every file checked; downloaded (or copied from
    ``$VERIBATCH_REFUTE_PROMPTS``) once, then cached."""
    files: dict[str, str] = pins()["files"]
    local = os.environ.get(LOCAL_ENV)

    def fill(tmp: Path) -> tuple[Path, dict[str, Any]]:
        for name in sorted(files):
            dest = tmp / name
            if local:
                src = Path(local) / name
                if not src.is_file():
                    raise DatasetError(f"{src}: missing (${LOCAL_ENV}={local}; the pinned "
                                       f"templates are {', '.join(sorted(files))})")
                shutil.copyfile(src, dest)
                where: str | Path = src
            else:
                where = url(name)
                pinning.download(where, dest, what=f"the REFUTE authors' prompt template {name}",
                                 offline_hint=OFFLINE_HINT, timeout_s=timeout_s)
            pinning.check_sha256(where, pinning.file_sha256(dest), files[name])
        return tmp, {"repository": pins()["repository"], "revision": commit(), "files": files,
                     "from": local or url("{name}")}

    return ORIGIN.once(fill, commit())


@functools.cache
def _read_cached(folder: str, name: str) -> str:
    return (Path(folder) / name).read_text()


def read(name: str) -> str:
    """One pinned template's text (fetched and checked first if need be)."""
    file_sha256(name)  # an unknown name is an error, not a download
    return _read_cached(str(fetch()), name)


def exists(name: str) -> bool:
    return name in pins()["files"]
