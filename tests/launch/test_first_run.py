"""What a first-time user hits (issue 16's rough edges): each refused at plan time in one
line with exit 2 and nothing written, or — when shards do fail — the failure summary and the
`launch logs` hint instead of empty tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import launch


def _nothing_written(runs: Path) -> bool:
    return not runs.exists() or not any(runs.iterdir())


def test_an_unknown_profile_is_an_error_whatever_the_executor(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    r = launch("selftest", "--profile", "nosuch", "--limit", "2", "--runs-dir", str(runs))
    assert r.returncode == 2 and "unknown profile 'nosuch'" in r.stderr, r.stdout + r.stderr
    assert _nothing_written(runs)
    bad = tmp_path / "typo.yaml"  # a profile file is type-checked even when unused
    bad.write_text("partitions:\n  cpu: {partition: cpu, mem_gb: lots}\n")
    r = launch("selftest", "--profile", str(bad), "--limit", "2", "--runs-dir", str(runs))
    assert r.returncode == 2 and "mem_gb" in r.stderr and _nothing_written(runs)


@pytest.mark.parametrize("engine, files, message", [
    ("hf", {}, "is not a model folder: no config.json and no weights"),
    ("hf", {"config.json": "{}"}, "is not a model folder: no weights"),
    ("vllm", {"model.safetensors": ""}, "is not a model folder: no config.json"),
])
def test_a_folder_that_is_not_a_model_fails_at_plan_time(tmp_path: Path, engine: str,
                                                         files: dict[str, str], message: str) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    runs = tmp_path / "runs"
    r = launch("selftest", "--model", f"{engine}:{folder}", "--runs-dir", str(runs))
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and _nothing_written(runs)


def test_a_model_folder_with_config_and_weights_passes_the_check(tmp_path: Path) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model-00001-of-00002.safetensors").write_text("")
    r = launch("selftest", "--model", f"hf:{folder}", "--dry-run", "--runs-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    single = tmp_path / "m.gguf"  # vLLM loads a single GGUF file; transformers needs a folder
    single.write_text("")
    assert launch("selftest", "--model", f"vllm:{single}", "--dry-run").returncode == 0
    r = launch("selftest", "--model", f"hf:{single}", "--dry-run")
    assert r.returncode == 2 and "needs a model folder" in r.stderr


@pytest.mark.parametrize("task, args, message", [
    ("selftest", ["--temperature", "-1"], "--temperature -1.0: must be at least 0"),
    ("selftest", ["--temperature", "nan"], "--temperature nan: must be a number"),
    ("selftest", ["--n", "0"], "--n 0: must be a whole number of at least 1"),
    ("selftest", ["--max-tokens", "0"], "--max-tokens 0: must be a whole number of at least 1"),
    ("invbench", ["-o", "n_samples=0"], "-o n_samples 0: must be a whole number of at least 1"),
])
def test_sampling_no_engine_can_honour_is_refused(tmp_path: Path, task: str, args: list[str],
                                                  message: str) -> None:
    r = launch(task, *args, "--dry-run", "--runs-dir", str(tmp_path / "runs"))
    assert r.returncode == 2 and message in r.stderr, r.stdout + r.stderr
    assert _nothing_written(tmp_path / "runs")


def test_failed_shards_print_their_reasons_and_the_logs_hint_not_empty_tables(tmp_path: Path) -> None:
    r = launch("selftest", "-o", "crash=0", "--limit", "2", "--runs-dir", str(tmp_path))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "|---" not in r.stdout, r.stdout  # no table built from nothing
    assert "(partial: only the shards that finished)" in r.stdout
    lines = r.stderr.splitlines()
    assert any(line.startswith("  work/0: ") and "crash" in line for line in lines), r.stderr
    assert any(line.startswith("  check/0: not started: waiting for upstream") for line in lines)
    assert lines[-1].startswith("see: launch logs ") and "launch resume" in lines[-1]
