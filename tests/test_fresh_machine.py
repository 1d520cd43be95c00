"""`make run` on a fresh machine without bubblewrap, as the README says it behaves.

Of the four steps `make run` takes (launch invbench, cebench, refute, dafnycomp), only REFUTE
uses the judge's sandbox, so this test runs that step's own command (`launch refute`, with
`--limit 2` and short search limits to stay fast) in a mount namespace where every bwrap
binary is replaced by an empty, non-executable file — to the toolkit, bubblewrap is not
installed.  The README says: the no-model default passes (exit 0), runs the shipped programs
with the node's own isolation and names it in its records and printed table; a run with a
model, or on data that is not shipped, refuses at plan time (exit 2).  The other steps never
look for bubblewrap (`grep -r bwrap veribatch` finds only the judge and REFUTE).

Where bubblewrap is not installed at all, the commands run as they are: that machine is the
fresh machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from veribatch.aggregate.records import load_run
from veribatch.tasks.refute import data
from veribatch.verifiers.judge.sandbox import SAFE_PATH

pytestmark = pytest.mark.slow
FAST = ["-o", "search_s=3", "-o", "filter_s=2", "-o", "run_s=3", "-o", "generator_s=5"]
FALLBACK = "none (no namespaces; shipped programs only)"


def _without_bwrap(argv: list[str]) -> list[str]:
    """`argv` in a mount namespace where no bwrap exists (bwrap's own --ro-bind of /dev/null,
    which is not executable, over each copy on PATH or the sandbox's search path)."""
    found = {str(Path(p).resolve()) for d in (os.environ.get("PATH", "") + ":" + SAFE_PATH).split(":")
             if d and (p := shutil.which("bwrap", path=d))}
    if not found:
        return argv
    wrap = [sorted(found)[0], "--dev-bind", "/", "/"]
    for path in sorted(found):
        wrap += ["--ro-bind", "/dev/null", path]
    return [*wrap, "--", *argv]


def _launch(args: list[str], runs: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VERIBATCH_")}
    env.update(VERIBATCH_RUNS_DIR=str(runs), COLUMNS="400", NO_COLOR="1")
    cmd = _without_bwrap([sys.executable, "-m", "veribatch", "refute", *args])
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=240)


def test_make_runs_refute_step_passes_without_bubblewrap_and_says_so(tmp_path: Path) -> None:
    done = _launch(["--limit", "2", *FAST], tmp_path / "runs")
    assert done.returncode == 0, done.stdout + done.stderr
    assert FALLBACK in done.stdout  # the printed success table names the mechanism
    (run,) = (tmp_path / "runs").iterdir()
    judge = load_run(run)[1]["judge"].frame
    assert len(judge) == 4 and set(judge["reason"]) != {"sandbox_refused"}
    assert set(judge["sandbox"]) == {"none"} and not judge["sandbox_unsafe"].any()
    assert judge["sandbox_note"].str.contains("bubblewrap (bwrap) is not installed", regex=False).all()
    assert (judge["outcome"] == "success").any()  # the shipped programs really ran


def test_model_runs_and_unshipped_data_still_refuse_without_bubblewrap(tmp_path: Path) -> None:
    """Offline here, and no template is served: the node's refusal comes before any download."""
    replay = tmp_path / "earlier-run"  # a replay source passes the model check; the sandbox must not
    replay.mkdir()
    export = tmp_path / "export"
    export.mkdir()
    rows = data.SAMPLE_FILE.read_text().splitlines()[:1]
    (export / "train.jsonl").write_text("\n".join(rows) + "\n")
    for args in (["--model", f"replay:{replay}"], ["--dataset", str(export)]):
        done = _launch(["--limit", "1", *args], tmp_path / "runs")
        assert done.returncode == 2, (args, done.stdout + done.stderr)
        assert "no sandbox for untrusted code" in done.stderr, done.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_the_mask_really_hides_bubblewrap() -> None:
    """Guards the two tests above: inside the wrapper the sandbox probe finds no bwrap."""
    code = ("from veribatch.verifiers.judge.sandbox import _probe_bwrap; "
            "import json; print(json.dumps(_probe_bwrap((), ())))")
    done = subprocess.run(_without_bwrap([sys.executable, "-c", code]), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)[:2] == [None, "bubblewrap (bwrap) is not installed"]
