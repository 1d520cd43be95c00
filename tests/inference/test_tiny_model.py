"""The tiny-model builder: trains on arbitrary pairs, is cached by their hash, has a CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from veribatch.inference.hf import HFEngine
from veribatch.inference.tiny_model import MANIFEST, cached_tiny_qwen2, pairs_hash

INVBENCH_PAIRS = [
    (
        "int main() { int i = 0; while (i < 10) { INVARIANT_MARKER_1(); i++; } __VERIFIER_assert(i == 10); }",
        "```\nINVARIANT_MARKER_1: i <= 10\n```",
    ),
    (
        "int main() { int s = 0; int k = 0; while (k < n) { INVARIANT_MARKER_1(); s += 2; k++; } }",
        "```\nINVARIANT_MARKER_1: s == 2 * k\n```",
    ),
]


@pytest.mark.slow
def test_builds_on_invbench_style_pairs_and_answers_them_greedily(tmp_path: Path, chat_request) -> None:
    chat = chat_request
    path = cached_tiny_qwen2(INVBENCH_PAIRS, root=tmp_path)  # its build time: bench/inference.py
    info = json.loads((path / MANIFEST).read_text())
    assert info["all_pairs_learned"] and info["pairs"] == [list(p) for p in INVBENCH_PAIRS]
    config = json.loads((path / "config.json").read_text())
    assert config["model_type"] == "qwen2" and config["head_dim"] == 64
    assert config["num_hidden_layers"] == 2 and 64 <= config["hidden_size"] <= 128
    engine = HFEngine(str(path))
    out = engine.generate([chat(p, f"q{i}") for i, (p, _) in enumerate(INVBENCH_PAIRS)])
    assert [c[0].text for c in out] == [a for _, a in INVBENCH_PAIRS]
    # the same call again is a cache hit: nothing rebuilt
    mtime = (path / "model.safetensors").stat().st_mtime_ns
    assert cached_tiny_qwen2(INVBENCH_PAIRS, root=tmp_path) == path
    assert (path / "model.safetensors").stat().st_mtime_ns == mtime
    assert pairs_hash(INVBENCH_PAIRS) != pairs_hash(INVBENCH_PAIRS[:1])
    assert pairs_hash(INVBENCH_PAIRS, seed=1) != pairs_hash(INVBENCH_PAIRS)
    # a cached model that did not learn its pairs (built on a loaded machine) is built again
    (path / MANIFEST).write_text(json.dumps({**info, "all_pairs_learned": False}))
    assert cached_tiny_qwen2(INVBENCH_PAIRS, root=tmp_path) == path
    assert (path / "model.safetensors").stat().st_mtime_ns != mtime
    assert "all_pairs_learned" in json.loads((path / MANIFEST).read_text())


def test_cli_rejects_bad_pairs_file_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "pairs.json"
    bad.write_text('{"not": "a list"}')
    r = subprocess.run([sys.executable, "-m", "veribatch.inference.tiny_model", str(tmp_path / "m"),
                        "--pairs", str(bad)], capture_output=True, text=True)
    assert r.returncode == 2
    assert str(bad) in r.stderr
