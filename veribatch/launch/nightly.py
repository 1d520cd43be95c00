"""`launch nightly SUITE`: run a pinned suite once a night, compare with the last good night.

A suite is a YAML file (``nightly/*.yaml``; schema in docs/nightly.md): a list of task runs,
the executor/profile, regress thresholds and where the history lives.  A night is a
folder ``HISTORY/nights/<night>/`` holding one run directory per suite entry, so the run
directory machinery does the hard parts:

- *Idempotent*: each entry is launched with ``--run-name <entry>`` in the night's folder.
  The same plan there is the same run; complete shards are skipped and queued or running
  ones are not resubmitted, so a second invocation in one night submits nothing new.
- *Resumed, not re-run*: a night whose shards failed is resumed by the next invocation
  (only its incomplete shards run), and is never a reference until it is complete.
- *Last good*: an entry's reference is its run in the latest earlier night that is
  complete (every shard DONE, tables aggregated).

When an entry's run is complete it is compared with its reference (`aggregate.regress`),
the instances flagged `slower` on the night's one timing re-timed and judged again
(`launch.retime`, `aggregate.regress.apply_retimes`), the result written to ``nights/<night>/regress/<entry>.{md,json}``, the night's
figures appended to ``HISTORY/history.parquet`` (`aggregate.history`), and what its stages
took to ``HISTORY/costs.json`` (`launch.measured`), which sizes the next nights' runs.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from veribatch.rundir.manifest import Manifest
from veribatch.rundir.paths import RunDir, atomic_write_json, read_json

from .executors import executor_names
from .executors.slurm import SubmitError
from .finalize import aggregate_run
from .jobs import latest_jobs, live_states
from .lookup import checked_keys, find_yaml, search_dirs
from .run_control import ExecChoice, launch_run, plan_run
from .status import ACTIVE, run_state

SUITES_ENV = "VERIBATCH_NIGHTLY_DIR"
TOP_KEYS = {"name", "description", "executor", "profile", "partition", "account", "qos", "history",
            "thresholds", "runs"}
RUN_KEYS = {"name", "task", "dataset", "model", "options", "sampling", "shards", "limit", "strategy",
            "verifier"}
THRESHOLD_KEYS = {"time_factor", "min_time_s", "near_limit", "alpha", "metric_tolerance",
                  "spread_factor", "min_spread_s", "spread_min_nights", "retime_k", "retime_max"}
SPREAD_NIGHTS = 7
"""Earlier complete nights (besides the reference) whose times give an instance's spread."""
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
HISTORY_FILE = "history.parquet"

# Exit codes of `launch nightly` (docs/nightly.md).
EXIT_OK, EXIT_REGRESSED, EXIT_INPUT, EXIT_CLUSTER, EXIT_RUNNING, EXIT_FAILED = 0, 1, 2, 3, 4, 5


class SuiteError(ValueError):
    """A suite file is missing or malformed; the message names the file and the key."""


class NightBusyError(RuntimeError):
    """Another `launch nightly` holds this history's lock."""


@dataclass(frozen=True)
class SuiteRun:
    name: str
    task: str
    dataset: str | None = None
    model: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    sampling: dict[str, Any] = field(default_factory=dict)
    shards: int = 1
    limit: int | None = None
    strategy: str | None = None
    verifier: str | None = None

    def option_pairs(self) -> list[str]:
        """`-o key=value` strings (JSON for lists/dicts, as the command line takes them)."""
        return [f"{k}={json.dumps(v) if isinstance(v, list | dict) else v}" for k, v in self.options.items()]


@dataclass(frozen=True)
class Suite:
    name: str
    source: Path
    runs: tuple[SuiteRun, ...]
    history: Path
    executor: str = "slurm"
    profile: str | None = None
    partitions: tuple[str, ...] = ()
    account: str | None = None
    qos: str | None = None
    thresholds: dict[str, Any] = field(default_factory=dict)
    description: str = ""


def find_suite(name: str) -> Path:
    path, looked = find_yaml(name, search_dirs(SUITES_ENV, "nightly"))
    if path is None:
        raise SuiteError(f"unknown suite {name!r}; looked in: {', '.join(looked)}")
    return path


def load_suite(name: str, history: Path | None = None) -> Suite:
    path = find_suite(name)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise SuiteError(f"{path}: not valid YAML ({e})") from None
    data = checked_keys(data, TOP_KEYS, str(path), SuiteError)
    runs_raw = data.get("runs")
    if not isinstance(runs_raw, list) or not runs_raw:
        raise SuiteError(f"{path}: 'runs' must be a non-empty list of task runs")
    runs, seen = [], set()
    for i, r in enumerate(runs_raw):
        where = f"{path}: runs[{i}]"
        r = checked_keys(r, RUN_KEYS, where, SuiteError)
        for req in ("name", "task"):
            if not r.get(req):
                raise SuiteError(f"{where}: '{req}' is required")
        if not NAME_RE.fullmatch(str(r["name"])) or r["name"] in seen:
            raise SuiteError(f"{where}: name {r['name']!r} must be unique and match {NAME_RE.pattern}")
        seen.add(r["name"])
        for m in ("options", "sampling"):
            if not isinstance(r.get(m) or {}, dict):
                raise SuiteError(f"{where}: '{m}' must be a mapping")
        runs.append(SuiteRun(name=str(r["name"]), task=str(r["task"]), dataset=r.get("dataset"),
                             model=r.get("model"), options=dict(r.get("options") or {}),
                             sampling=dict(r.get("sampling") or {}), shards=int(r.get("shards", 1)),
                             limit=r.get("limit"), strategy=r.get("strategy"), verifier=r.get("verifier")))
    thresholds = checked_keys(data.get("thresholds") or {}, THRESHOLD_KEYS, f"{path}: thresholds", SuiteError)
    executor = str(data.get("executor", "slurm"))
    if executor not in executor_names():
        raise SuiteError(f"{path}: executor {executor!r}: expected {' or '.join(executor_names())}")
    hist = history or Path(str(data.get("history") or f"nightly-history/{path.stem}")).expanduser()
    parts = data.get("partition") or []
    return Suite(name=str(data.get("name") or path.stem), source=path, runs=tuple(runs), history=hist,
                 executor=executor, profile=data.get("profile"),
                 partitions=tuple([parts] if isinstance(parts, str) else parts),
                 account=data.get("account"), qos=data.get("qos"), thresholds=dict(thresholds),
                 description=str(data.get("description") or ""))


# ---------------------------------------------------------------- nights


def night_dir(suite: Suite, night: str) -> Path:
    return suite.history / "nights" / night


def default_night() -> str:
    return time.strftime("%Y-%m-%d")


def _complete(rd: RunDir) -> bool:
    """Every shard DONE and the tables aggregated from them."""
    try:
        st = run_state(rd, live=False)
        return st.complete and read_json(rd.aggregate_status).get("status") == "complete"
    except (OSError, ValueError):
        return False


def last_good(suite: Suite, entry: str, before: str) -> tuple[str, Path] | None:
    """The latest night before `before` whose run of `entry` is complete."""
    good = good_nights(suite, entry, before, 1)
    return good[0] if good else None


def good_nights(suite: Suite, entry: str, before: str, count: int) -> list[tuple[str, Path]]:
    """Up to `count` latest nights before `before` whose run of `entry` is complete, newest
    first: the reference, then the nights that give each instance's time spread."""
    nights = suite.history / "nights"
    if not nights.is_dir():
        return []
    out: list[tuple[str, Path]] = []
    for n in sorted((p.name for p in nights.iterdir() if p.is_dir()), reverse=True):
        if n >= before or len(out) >= count:
            continue
        rd = RunDir(nights / n / entry)
        if rd.manifest.is_file() and _complete(rd):
            out.append((n, rd.root))
    return out


@contextmanager
def _lock(history: Path) -> Iterator[None]:
    history.mkdir(parents=True, exist_ok=True)
    with open(history / ".nightly.lock", "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise NightBusyError(f"another `launch nightly` is running on {history} "
                                 "(lock .nightly.lock); nothing done") from None
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@dataclass
class EntryOutcome:
    name: str
    run_dir: Path
    run_id: str = ""
    status: str = "pending"            # complete | running | failed | error
    submitted: int = 0                 # shards run or submitted by this invocation
    message: str = ""
    reference_night: str = ""
    regress_exit: int = -1             # -1: no reference yet
    regressions: int = 0
    regress_md: str = ""
    regress_report: Any = None         # aggregate.regress.RegressReport, for the night's page

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "run_dir": str(self.run_dir), "status": self.status,
                "submitted": self.submitted, "message": self.message,
                "reference_night": self.reference_night, "regress_exit": self.regress_exit,
                "regressions": self.regressions}


@dataclass
class NightOutcome:
    suite: Suite
    night: str
    entries: list[EntryOutcome]
    report: Path | None = None

    @property
    def exit_code(self) -> int:
        st = [e.status for e in self.entries]
        if "error" in st or any(e.regress_exit == 2 for e in self.entries):
            return EXIT_CLUSTER if any(e.message.startswith("cluster:") for e in self.entries) else EXIT_INPUT
        if any(e.regress_exit == 1 for e in self.entries):
            return EXIT_REGRESSED
        if "failed" in st:
            return EXIT_FAILED
        if "running" in st:
            return EXIT_RUNNING
        return EXIT_OK


def _choice(suite: Suite, executor: str | None, profile: str | None) -> ExecChoice:
    return ExecChoice(executor=executor or suite.executor, profile=profile or suite.profile,
                      partitions=suite.partitions, account=suite.account, qos=suite.qos)


def _active(rd: RunDir) -> bool:
    """Shards running or queued, or the SLURM aggregate job still to finish."""
    st = run_state(rd, live=True)
    if any(s.state in ("running",) or (s.state == "pending" and s.job_state)
           for col in st.shards.values() for s in col):
        return True
    agg = latest_jobs(rd).get(("aggregate", 0))
    return bool(agg and st.complete and live_states([agg]).get(agg) in ACTIVE)


def _launch_entry(run: SuiteRun, root: Path, choice: ExecChoice, out: EntryOutcome) -> None:
    plan = plan_run(run.task, dataset=run.dataset, model=run.model, sampling=run.sampling,
                    options=run.option_pairs(), shards=run.shards, limit=run.limit,
                    strategy=run.strategy, verifier=run.verifier)
    out.run_id = plan.run_id
    rd = RunDir(root)
    if rd.manifest.is_file() and run_state(rd, live=False).complete:
        return  # nothing to submit; aggregation (if missing) is done by `_settle`
    o = launch_run(plan, root, choice, progress=False)
    if o.submit is not None:
        out.submitted = sum(len(v) for v in o.submit.submitted.values())


def _settle(rd: RunDir, out: EntryOutcome) -> None:
    """Decide the entry's state; aggregate a run whose shards are all done but whose tables
    are missing (the SLURM aggregate job failed or was never submitted)."""
    st = run_state(rd, live=True)
    if st.complete:
        agg = latest_jobs(rd).get(("aggregate", 0))
        if agg and live_states([agg]).get(agg) in ACTIVE:
            out.status = "running"
            out.message = f"aggregate job {agg} still running"
            return
        try:
            aggregated = read_json(rd.aggregate_status).get("status") == "complete"
        except (OSError, ValueError):
            aggregated = False
        if not aggregated:
            aggregate_run(rd)
        out.status = "complete"
        return
    if st.failed() and not any(s.state == "running" or (s.state == "pending" and s.job_state)
                               for col in st.shards.values() for s in col):
        out.status = "failed"
        out.message = "; ".join(f"{s.stage}/{s.shard}: {s.reason}" for s in st.failed()[:5])
    else:
        out.status = "running"


def _compare(suite: Suite, night: str, run: SuiteRun, rd: RunDir, out: EntryOutcome) -> None:
    from veribatch.aggregate.history import append_night, night_rows
    from veribatch.aggregate.regress import Thresholds, regress
    from veribatch.aggregate.regress_render import to_markdown
    from veribatch.aggregate.render import load_tables

    good = good_nights(suite, run.name, night, 1 + SPREAD_NIGHTS)
    ref = good[0] if good else None
    regress_dir = night_dir(suite, night) / "regress"
    if ref is not None:
        out.reference_night = ref[0]
        th = Thresholds(**suite.thresholds)
        report = regress(ref[1], rd.root, th, history=[p for _, p in good[1:]])
        _retime(suite, night, run, rd, report, th)
        out.regress_exit = report.exit_code
        out.regressions = len(report.regressions) + len(report.cell_regressions)
        out.regress_md = to_markdown(report)
        out.regress_report = report
        regress_dir.mkdir(parents=True, exist_ok=True)
        (regress_dir / f"{run.name}.md").write_text(out.regress_md, encoding="utf-8")
        atomic_write_json(regress_dir / f"{run.name}.json", report.to_json())
        if report.refused:
            out.message = f"not comparable with night {ref[0]}: {report.refused}"
    manifest = Manifest.read(rd)
    rows = night_rows(suite=suite.name, night=night, entry=run.name, manifest=manifest,
                      tables=load_tables(rd.root), reference_night=out.reference_night,
                      regress_exit=out.regress_exit, regressions=out.regressions)
    append_night(suite.history / HISTORY_FILE, rows)
    _record_costs(suite, rd, out)


def _retime(suite: Suite, night: str, run: SuiteRun, rd: RunDir, report: Any,
            th: Any) -> None:
    """Re-time the instances the comparison flagged `slower` (`launch.retime`: their CPU
    stage again, `th.retime_k` more times, at most `th.retime_max` instances) and let the
    rule judge the median (`aggregate.regress.apply_retimes`): a one-off timing is cleared,
    a real slowdown stays.  The scratch and the re-timings stay in the night's
    ``retime/<entry>/``."""
    from veribatch.aggregate.regress import apply_retimes, retime_candidates

    from .retime import retime

    flagged = retime_candidates(report, th)
    if not flagged:
        return
    wanted = list(dict.fromkeys((c.stage, c.instance_id) for c in flagged))
    # each re-run gets what the flagged record took, twice, plus a minute to start
    budget = 60 + th.retime_k * sum(2 * (c.current_time_s or 60) + 5 for c in flagged)
    timings, failed = retime(rd.root, wanted, th.retime_k,
                             night_dir(suite, night) / "retime" / run.name, budget)
    apply_retimes(report, timings, th, where=" where `launch nightly` ran", failed=failed)


def _record_costs(suite: Suite, rd: RunDir, out: EntryOutcome) -> None:
    """What the night's stages took, for sizing the next nights (`launch.measured`).  A
    file that cannot be read or written costs the measurement, not the night's comparison."""
    import pyarrow as pa

    from .measured import COSTS_FILE, CostsError, measure_instances, measure_run, record

    try:
        record(suite.history / COSTS_FILE, measure_run(rd.root), measure_instances(rd.root))
    except (OSError, CostsError, pa.ArrowException) as e:
        out.message = (out.message + "; " if out.message else "") + f"costs not recorded: {e}"


def _write_report(suite: Suite, night: str, outs: list[EntryOutcome]) -> Path | None:
    from veribatch.aggregate.report import build_report

    done = [e for e in outs if e.status == "complete"]
    if not done:
        return None
    reports = [e.regress_report for e in done if e.regress_report is not None]
    page = build_report([e.run_dir for e in done], history=suite.history / HISTORY_FILE,
                        regressions=reports, title=f"nightly {suite.name}, night {night}")
    target = night_dir(suite, night) / "report.html"
    target.write_text(page, encoding="utf-8")
    return target


def _thresholds(suite: Suite) -> Any:
    from veribatch.aggregate.regress import Thresholds

    return Thresholds(**suite.thresholds)


def run_night(suite: Suite, night: str | None = None, *, executor: str | None = None,
              profile: str | None = None, wait: bool = False, wait_timeout_s: float = 6 * 3600,
              poll_s: float = 10.0, report: bool = True,
              echo: Callable[[str], None] = lambda s: None) -> NightOutcome:
    night = night or default_night()
    if not NAME_RE.fullmatch(night):
        raise SuiteError(f"night label {night!r} must match {NAME_RE.pattern} (default: today's date)")
    _thresholds(suite)  # bad thresholds fail before anything is submitted
    choice = _choice(suite, executor, profile)
    from .measured import COSTS_ENV, COSTS_FILE

    # tonight's runs are sized from what earlier nights measured (unless the caller names
    # another file); sizing reads the variable, and SLURM elements inherit it harmlessly
    os.environ.setdefault(COSTS_ENV, str((suite.history / COSTS_FILE).resolve()))
    with _lock(suite.history):
        ndir = night_dir(suite, night)
        ndir.mkdir(parents=True, exist_ok=True)
        outs = [EntryOutcome(r.name, ndir / r.name) for r in suite.runs]
        for run, out in zip(suite.runs, outs, strict=True):
            try:
                _launch_entry(run, out.run_dir, choice, out)
            except SubmitError as e:
                out.status, out.message = "error", f"cluster: {e}"
            except (ValueError, KeyError, RuntimeError, OSError) as e:
                # a bad entry (unknown task/option, run directory of another config) must not
                # keep the other entries of the suite from running
                out.status, out.message = "error", f"{type(e).__name__}: {e}"
            if out.status == "error":
                echo(f"{run.name}: {out.message}")
                continue
            echo(f"{run.name}: run {out.run_id} in {out.run_dir}"
                 + (f"; {out.submitted} shard(s) run/submitted" if out.submitted else "; nothing submitted"))
        live = [o for o in outs if o.status != "error"]
        if wait:
            end = time.monotonic() + wait_timeout_s
            while any(_active(RunDir(o.run_dir)) for o in live) and time.monotonic() < end:
                time.sleep(poll_s)
        for run, out in zip(suite.runs, outs, strict=True):
            if out.status == "error":
                continue
            rd = RunDir(out.run_dir)
            _settle(rd, out)
            if out.status == "complete":
                _compare(suite, night, run, rd, out)
        outcome = NightOutcome(suite, night, outs)
        atomic_write_json(ndir / "night.json", {
            "suite": suite.name, "suite_file": str(suite.source), "night": night,
            "updated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "exit_code": outcome.exit_code, "entries": {o.name: o.to_json() for o in outs}})
        if report:
            outcome.report = _write_report(suite, night, outs)
        return outcome
