"""The REFUTE problems from the Hugging Face hub, at a pinned revision, checked by sha256.

``hub_pin.json`` names the dataset repository, the commit (``revision``) and the sha256 of
every data file of the train split.  `fetch` downloads exactly those files, through the
hub's plain HTTP interface (``{endpoint}/datasets/{repo}/resolve/{revision}/{path}``, the
endpoint from $HF_ENDPOINT for mirrors, a token from $HF_TOKEN), into
``$VERIBATCH_CACHE/refute/<revision>/`` and checks each checksum; a mismatch is an error.

`pin` (``launch refute pin-hub``) is how a pin is made, on a machine with network: it asks
the hub which commit a revision (default ``main``) is and which files it holds, downloads
the train split's data files, and writes their checksums.  The pin shipped in this
repository was written where the hub could not be reached, so it holds no revision yet:
`fetch` then refuses with the command to run, instead of downloading whatever ``main``
is today.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

from veribatch.tasks import pinned as pinning
from veribatch.tasks.base import DatasetError

PIN_FILE = Path(__file__).resolve().parent / "hub_pin.json"
PIN_ENV = "VERIBATCH_REFUTE_PIN"
ORIGIN = pinning.Origin("refute", PIN_FILE, env=PIN_ENV, what="the hub pin")
DEFAULT_ENDPOINT = "https://huggingface.co"
_TRAIN_FILE = re.compile(r"(^|/)(train[-._][^/]*|train)\.(parquet|jsonl)$|(^|/)train/[^/]+\.parquet$")


def endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/")


def _headers() -> dict[str, str]:
    token = os.environ.get("HF_TOKEN")
    return {"Authorization": f"Bearer {token}"} if token else {}


def _offline(url: str, e: Exception) -> DatasetError:
    return DatasetError(
        f"cannot reach the Hugging Face hub at {url} ({type(e).__name__}: {e}). Offline? Use "
        "the shipped `sample` dataset, or a local export of bethgelab/REFUTE: "
        "--dataset /path/to/train.parquet (or a folder of the hub's parquet/JSONL files, "
        "or $VERIBATCH_REFUTE_EXPORT)."
    )


def _get(url: str, timeout_s: float) -> bytes:
    import httpx

    try:
        resp = httpx.get(url, headers=_headers(), timeout=timeout_s, follow_redirects=True)
        resp.raise_for_status()
    except httpx.HTTPStatusError as e:
        raise DatasetError(f"{url}: HTTP {e.response.status_code} from the hub") from e
    except httpx.HTTPError as e:
        raise _offline(url, e) from e
    return resp.content


def fetch(timeout_s: float = 120.0) -> Path:
    """The folder holding the pinned train-split files, downloading them if not cached."""
    pins = ORIGIN.pins()
    revision, files = pins.get("revision"), pins.get("files") or {}
    if not revision or not files:
        raise DatasetError(
            f"{ORIGIN.path()}: the hub dataset {pins.get('repo', 'bethgelab/REFUTE')} is not pinned "
            "to a revision in this checkout (it was written without network access). On a "
            "machine with network run `launch refute pin-hub` (downloads the train split, "
            "writes the commit and sha256 of each file into the pin), or use a local export: "
            "--dataset /path/to/train.parquet."
        )

    def fill(tmp: Path) -> tuple[Path, dict[str, Any]]:
        for rel, want in sorted(files.items()):
            url = f"{endpoint()}/datasets/{pins['repo']}/resolve/{revision}/{rel}"
            data = _get(url, timeout_s)
            pinning.check_sha256(url, hashlib.sha256(data).hexdigest(), want)
            dest = tmp / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
        return tmp, {"revision": revision, "files": files}

    return ORIGIN.once(fill, revision)


def pin(revision: str = "main", out: Path | None = None, timeout_s: float = 120.0) -> dict[str, Any]:
    """Resolve `revision` on the hub, checksum its train-split files, write the pin file."""
    pins = ORIGIN.pins()
    repo = pins.get("repo", "bethgelab/REFUTE")
    info_url = f"{endpoint()}/api/datasets/{repo}/revision/{revision}"
    try:
        info = json.loads(_get(info_url, timeout_s))
    except json.JSONDecodeError as e:
        raise DatasetError(f"{info_url}: the hub's answer is not JSON: {e}") from e
    sha = info.get("sha")
    names = [s.get("rfilename", "") for s in info.get("siblings", [])]
    train = sorted(n for n in names if _TRAIN_FILE.search(n))
    if not sha or not train:
        raise DatasetError(f"{info_url}: no commit sha or no train-split data files in "
                           f"{names[:20]}")
    files = {}
    for rel in train:
        data = _get(f"{endpoint()}/datasets/{repo}/resolve/{sha}/{rel}", timeout_s)
        files[rel] = hashlib.sha256(data).hexdigest()
    new = {**pins, "repo": repo, "split": "train", "revision": sha, "files": files,
           "pinned_from": revision}
    new.pop("note", None)
    target = out or ORIGIN.path()
    target.write_text(json.dumps(new, indent=1, sort_keys=True) + "\n")
    return new
