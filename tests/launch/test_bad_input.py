"""Bad input: a clear error naming the thing, exit code 2, and nothing written or overwritten."""

from __future__ import annotations

import hashlib

from tests.support.cli import launch, only_run_dir


def tree_digest(root):
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


def test_unknown_task(tmp_path):
    r = launch("nosuchtask", "--runs-dir", str(tmp_path))
    assert r.returncode == 2 and "nosuchtask" in r.stderr
    assert not any(tmp_path.iterdir())


def test_unknown_dataset_and_option(tmp_path):
    r = launch("selftest", "--dataset", "tiny", "--runs-dir", str(tmp_path))
    assert r.returncode == 2 and "unknown dataset 'tiny'" in r.stderr and "smoke" in r.stderr
    r = launch("selftest", "-o", "sleepy=1", "--runs-dir", str(tmp_path))
    assert r.returncode == 2 and "unknown option 'sleepy'" in r.stderr
    assert not any(tmp_path.iterdir())


def test_unknown_profile_and_missing_partition(tmp_path):
    runs = tmp_path / "runs"
    r = launch("selftest", "--executor", "slurm", "--profile", "nowhere", "--runs-dir", str(runs))
    assert r.returncode == 2 and "unknown profile 'nowhere'" in r.stderr
    prof = tmp_path / "gpuonly.yaml"
    prof.write_text("partitions:\n  gpu: {partition: gpu}\n")
    r = launch("selftest", "--executor", "slurm", "--profile", str(prof), "--runs-dir", str(runs))
    assert r.returncode == 2 and "no partition for resource 'cpu'" in r.stderr
    assert not runs.exists()


def test_unwritable_runs_dir(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("not a directory")
    r = launch("selftest", "--runs-dir", str(blocker / "runs"))
    assert r.returncode == 2 and "cannot create run directory" in r.stderr
    assert blocker.read_text() == "not a directory"


def test_run_dir_of_another_configuration_is_not_touched(tmp_path):
    r = launch("selftest", "--run-name", "mine", "--runs-dir", str(tmp_path), "-q")
    assert r.returncode == 0
    rd = only_run_dir(tmp_path)
    before = tree_digest(rd)
    r = launch("selftest", "--run-name", "mine", "-o", "iterations=5", "--runs-dir", str(tmp_path))
    assert r.returncode == 2
    assert "belongs to run selftest-" in r.stderr and "differs in options" in r.stderr
    assert "nothing was overwritten" in r.stderr
    assert tree_digest(rd) == before


def test_foreign_directory_without_manifest(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "precious.txt").write_text("keep")
    r = launch("selftest", "--run-name", "mine", "--runs-dir", str(tmp_path))
    assert r.returncode == 2 and "holds no manifest.json" in r.stderr
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["precious.txt"]


def test_unknown_run_for_status_resume_logs(tmp_path):
    for cmd in ("status", "resume", "logs", "cancel", "aggregate"):
        r = launch(cmd, "selftest-000000000000", "--runs-dir", str(tmp_path))
        assert r.returncode == 2 and "no run 'selftest-000000000000'" in r.stderr, cmd


def test_dry_run_prints_the_plan_and_writes_nothing(tmp_path):
    r = launch("selftest", "--shards", "5", "--dry-run", "--runs-dir", str(tmp_path / "runs"))
    assert r.returncode == 0, r.stderr
    assert "work" in r.stdout and "check" in r.stdout and "aggregate" in r.stdout
    assert "2–3" in r.stdout and "12 instances" in r.stdout
    assert not (tmp_path / "runs").exists()


def test_hand_edited_manifest_is_refused(tmp_path):
    assert launch("selftest", "--runs-dir", str(tmp_path), "-q").returncode == 0
    rd = only_run_dir(tmp_path)
    m = rd / "manifest.json"
    m.write_text(m.read_text().replace('"iterations": 1000', '"iterations": 999'))
    r = launch("status", str(rd))
    assert r.returncode == 2 and "does not hash to the recorded identity" in r.stderr


def test_run_name_is_confined_to_the_runs_dir(tmp_path):
    """A relative or absolute --run-name would create the run outside the runs folder."""
    runs = tmp_path / "runs"
    outside = tmp_path / "abs"
    for name in ("../../x", "../x", str(outside), "a/b", "..", ".hidden", "x\n#SBATCH --qos=high", ""):
        for args in (("selftest",), ("selftest", "--dry-run")):
            r = launch(*args, "--run-name", name, "--runs-dir", str(runs), "-q")
            assert r.returncode == 2, (name, args, r.stderr)
            assert "a run name is one directory inside the runs folder" in r.stderr, (name, r.stderr)
    assert not runs.exists() and not outside.exists() and sorted(p.name for p in tmp_path.iterdir()) == []
    r = launch("selftest", "--run-name", "ok_name-1.2", "--runs-dir", str(runs), "-q")
    assert r.returncode == 0 and (runs / "ok_name-1.2").is_dir()
