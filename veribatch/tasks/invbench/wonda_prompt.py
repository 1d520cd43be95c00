"""wonda's per-marker prompt (``-o prompt=wonda``), fetched from its origin at a pinned commit.

wonda (github.com/idopinto/wonda, MIT) is a public harness on InvBench; its evaluation asks
for one invariant *per loop marker* with the prompt file ``configs/eval/prompts/wonda.yaml``.
The file is not copied into this repository: ``wonda_prompt_pin.json`` names the repository,
the commit and the file's sha256; `fetch` downloads it (one raw-file URL) into
``$VERIBATCH_CACHE/wonda-prompt/<commit>/`` and checks the checksum before anything reads
it.  It is parsed with `yaml.safe_load` only (a download is untrusted input: no tags that
build objects).

Offline: ``$VERIBATCH_WONDA_PROMPT`` names a folder holding ``wonda.yaml`` (checked against
the same pin); a mirror: ``$VERIBATCH_WONDA_PROMPT_URL``, a template with ``{repository}``,
``{revision}``, ``{folder}`` and ``{name}``.

How the pieces are put together (our reading of the file, see docs/invbench.md): the
system message is ``per_marker_system_prompt`` followed by ``non_det_explanation``; the
user message is ``per_marker_user_prompt_template`` with ``{program}`` and
``{target_marker}`` filled by `str.format`, as wonda's models fill it.
"""

from __future__ import annotations

import functools
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from veribatch.tasks import pinned as pinning
from veribatch.tasks.base import DatasetError

PIN_FILE = Path(__file__).resolve().parent / "wonda_prompt_pin.json"
NAME = "wonda.yaml"
RAW_URL = "https://raw.githubusercontent.com/{repository}/{revision}/{folder}/{name}"
URL_ENV = "VERIBATCH_WONDA_PROMPT_URL"
LOCAL_ENV = "VERIBATCH_WONDA_PROMPT"
OFFLINE_HINT = (f"Put wonda's configs/eval/prompts/wonda.yaml in a folder and set ${LOCAL_ENV} to "
                "it (checked against the same sha256), or run without -o prompt=wonda (our prompt).")
KEYS = ("per_marker_system_prompt", "per_marker_user_prompt_template", "non_det_explanation")

ORIGIN = pinning.Origin("wonda-prompt", PIN_FILE, what="wonda's prompt pin")


@dataclass(frozen=True)
class WondaPrompt:
    system: str  # per_marker_system_prompt + non_det_explanation
    user_template: str  # {program}, {target_marker}

    def user(self, program: str, target_marker: str) -> str:
        return self.user_template.format(program=program, target_marker=target_marker)


@functools.cache
def pins() -> dict[str, Any]:
    return ORIGIN.pins()


def commit() -> str:
    return str(pins()["revision"])


def sha256() -> str:
    return str(pins()["files"][NAME])


def url() -> str:
    p = pins()
    return os.environ.get(URL_ENV, RAW_URL).format(
        repository=p["repository"], revision=p["revision"], folder=p["folder"], name=NAME)


def fetch(timeout_s: float = 60.0) -> Path:
    """The checked ``wonda.yaml``: downloaded (or copied from ``$VERIBATCH_WONDA_PROMPT``)
    once, then cached; a checksum that differs is an error naming the file."""
    local = os.environ.get(LOCAL_ENV)

    def fill(tmp: Path) -> tuple[Path, dict[str, Any]]:
        dest = tmp / NAME
        if local:
            src = Path(local) / NAME
            if not src.is_file():
                raise DatasetError(f"{src}: missing (${LOCAL_ENV}={local})")
            shutil.copyfile(src, dest)
            where: str | Path = src
        else:
            where = url()
            pinning.download(where, dest, what=f"wonda's prompt {NAME}", offline_hint=OFFLINE_HINT,
                             timeout_s=timeout_s)
        pinning.check_sha256(where, pinning.file_sha256(dest), sha256())
        return tmp, {"repository": pins()["repository"], "revision": commit(), "files": {NAME: sha256()},
                     "from": str(local or url())}

    return ORIGIN.once(fill, commit()) / NAME


def parse(text: str, where: str | Path) -> WondaPrompt:
    """The prompt from the file's text (safe loader only); a file without the three string
    keys is an error naming it."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise DatasetError(f"{where}: not YAML: {e}") from None
    if not isinstance(doc, dict):
        raise DatasetError(f"{where}: expected a mapping with keys {', '.join(KEYS)}")
    missing = [k for k in KEYS if not isinstance(doc.get(k), str)]
    if missing:
        raise DatasetError(f"{where}: no text for {', '.join(missing)}")
    template = doc["per_marker_user_prompt_template"]
    for field in ("{program}", "{target_marker}"):
        if field not in template:
            raise DatasetError(f"{where}: per_marker_user_prompt_template has no {field}")
    return WondaPrompt(system=doc["per_marker_system_prompt"] + "\n" + doc["non_det_explanation"],
                       user_template=template)


@functools.cache
def _load_cached(path: str) -> WondaPrompt:
    return parse(Path(path).read_text(), path)


def load() -> WondaPrompt:
    """wonda's prompt (fetched and checked first if need be)."""
    return _load_cached(str(fetch()))


def version() -> str:
    """What goes into a run's versions: the commit and the file's checksum."""
    return f"wonda@{commit()[:7]}:{sha256()[:12]}"
