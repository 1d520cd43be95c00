"""`launch regress BASE CURRENT`: what changed between two runs of one task on one data set.

Two levels, both driven by what the task declared, never by its name:

- **Per record** (each stage's `verdict_column`, `time_column`, `time_limit_column`,
  `record_key`, `record_filter`, written into manifest.json by `launch`).  Records of the
  two runs are matched on ``(instance_id, *record_key)`` and each pair gets one kind.
  As in BenchExec's table-generator, a change of status is what counts, and timeouts
  that flap are not regressions:

  | kind | meaning | counts as |
  |---|---|---|
  | flip | decided → another decided verdict (TRUE ↔ FALSE): the tool or the data is wrong | regression |
  | lost | decided → undecided (UNKNOWN, TIMEOUT, OOM, none) | regression |
  | new_error | anything → an error / crash verdict | regression |
  | missing | a record of BASE has none in CURRENT (for an instance both runs planned) | regression |
  | slower | time × `time_factor` or more (and `min_time_s` more), same verdict | regression |
  | gained / fixed_error / faster | the reverse of lost / new_error / slower | improvement |
  | flapping | lost or slower, but BASE and CURRENT were both near their time limits | neither |
  | noisy | slower, but within the instance's own spread over earlier nights, or either side's shard was retried (a requeued or resumed element), or re-timed within the rule (`apply_retimes`) | neither |
  | changed / new_record | another change of verdict, or a record only CURRENT has | neither |

- **Per table cell** (each table's `index` and `metrics`, read from the sidecars
  `aggregate/render.py` writes).  A metric that comes from sampled generations
  (`Metric.sampled`) gets a significance test — McNemar's exact test or a paired bootstrap
  over instances when the table ships per-instance samples, else Fisher's exact test on
  the row's counts — and is a regression only when it is worse with p < `alpha`, so a
  one-instance wobble is not reported.  Other metrics are deterministic up to timing; their
  per-instance causes are judged above, so their cell changes are shown, not counted,
  unless `metric_tolerance` is set.

Runs of different tasks or different dataset content are refused (`Refused`); every other
difference of configuration is listed (see `aggregate.provenance`).

A `slower` record rests on one timing of CURRENT.  Where the caller can run the stage
again (`launch nightly` re-runs the flagged instances' CPU stage, same inputs, `retime_k`
more times, at most `retime_max` instances: `launch.retime`), `apply_retimes` judges the
median of those re-timings by the same rule: still beyond it, the record stays `slower`;
within it, the single timing was a one-off and the record is `noisy`.  Either way the
record carries the re-timings (`retimed`).  This module only judges: it runs nothing.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from veribatch.rundir.manifest import Manifest
from veribatch.rundir.paths import RunDir, read_json
from veribatch.rundir.shards import shard_of_ids

from . import stats
from .provenance import differences, provenance
from .records import StageRecords, load_run
from .render import load_tables
from .table import Metric, Table

REGRESSION_KINDS = ("flip", "lost", "new_error", "missing", "slower")
IMPROVEMENT_KINDS = ("gained", "fixed_error", "faster")
NEUTRAL_KINDS = ("flapping", "noisy", "changed", "new_record")
KINDS = REGRESSION_KINDS + IMPROVEMENT_KINDS + NEUTRAL_KINDS

# Verdict vocabulary shared by the tools (BenchExec's) and the tasks' own statuses: what is
# not an answer.  Anything else that is not an error counts as a decided verdict.
UNDECIDED = {"UNKNOWN", "TIMEOUT", "OOM", "OUT OF MEMORY", "CANCELLED", "KILLED", "UNDECIDED",
             "NONE", "NO-VALUE", "NO_VALUE", "NO VALUE", ""}
ERROR_WORDS = ("ERROR", "CRASH", "EXCEPTION")


class RegressError(ValueError):
    """A run directory cannot be read (missing or broken manifest)."""


@dataclass(frozen=True)
class Thresholds:
    """The knobs of `launch regress` (defaults documented in docs/nightly.md)."""

    time_factor: float = 2.0        # slower/faster when the time changes by this factor...
    min_time_s: float = 1.0         # ...and by at least this many seconds (sub-second jitter)
    near_limit: float = 0.8         # a time ≥ near_limit × its limit is "near the limit"
    alpha: float = 0.05             # significance level for sampled metrics
    metric_tolerance: float | None = None  # count non-sampled metric drops beyond this relative change
    resamples: int = 2000           # bootstrap resamples
    # With the instance's clean times of earlier nights (`regress(history=...)`), the time
    # rule is its own spread instead of time_factor/min_time_s: see `_beyond_spread`.
    spread_factor: float = 1.5      # slower only at this many times its median over the nights...
    min_spread_s: float = 0.5       # ...this many seconds above it, and beyond its observed range
    # (0.5 s: two unchanged SLURM runs of the shipped sample on the loaded 2-core machine
    # timed one 0.15 s program at 0.31 s; a tight spread of three quiet nights would call it)
    spread_min_nights: int = 3      # clean timings (BASE and earlier nights) needed for a spread
    # Re-timing a `slower` record's instance (where the caller can: `launch nightly`): this
    # many more runs, for at most this many instances per comparison (0: no re-timing).
    retime_k: int = 2
    retime_max: int = 20

    def __post_init__(self) -> None:
        if self.time_factor <= 1.0:
            raise ValueError(f"time_factor must be > 1, got {self.time_factor}")
        if not 0.0 < self.near_limit <= 1.0:
            raise ValueError(f"near_limit must be in (0, 1], got {self.near_limit}")
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"alpha must be in (0, 1), got {self.alpha}")
        if self.spread_factor <= 1.0:
            raise ValueError(f"spread_factor must be > 1, got {self.spread_factor}")
        if self.spread_min_nights < 2:
            raise ValueError(f"spread_min_nights must be >= 2, got {self.spread_min_nights}")
        if self.min_time_s < 0:
            raise ValueError(f"min_time_s must be >= 0, got {self.min_time_s}")
        if self.retime_k < 0 or self.retime_max < 0:
            raise ValueError(f"retime_k and retime_max must be >= 0, got {self.retime_k}, "
                             f"{self.retime_max}")
        if self.metric_tolerance is not None and self.metric_tolerance < 0:
            raise ValueError(f"metric_tolerance must be >= 0, got {self.metric_tolerance}")


@dataclass
class RecordChange:
    stage: str
    instance_id: str
    key: dict[str, Any]
    kind: str
    base_verdict: Any = None
    current_verdict: Any = None
    base_time_s: float | None = None
    current_time_s: float | None = None
    base_limit_s: float | None = None
    current_limit_s: float | None = None
    note: str = ""
    retried: str = ""             # "BASE"/"CURRENT"/"both": whose shard ran more than once
    spread_s: list[float] | None = None  # the clean times the spread rule judged against
    retimed: list[float] | None = None   # CURRENT's re-timings of a flagged instance (`apply_retimes`)

    @property
    def record_key(self) -> tuple[str, str, tuple[tuple[str, Any], ...]]:
        """(stage, instance id, record key items): what a re-timing is matched on."""
        return (self.stage, self.instance_id, tuple(sorted(self.key.items())))


@dataclass
class CellChange:
    table: str
    row: dict[str, Any]
    metric: str
    kind: str                     # regression | improvement | noise | changed
    base: float | None
    current: float | None
    delta: float | None
    unit: str = ""
    sampled: bool = False
    test: str = ""                # fisher | mcnemar | bootstrap | "" (untested)
    p_value: float | None = None
    note: str = ""


@dataclass
class StageSummary:
    stage: str
    declared: dict[str, Any]
    compared: int = 0
    same: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    not_in_both_plans: int = 0
    duplicates: int = 0


@dataclass
class RegressReport:
    base: dict[str, str]              # provenance of BASE
    current: dict[str, str]
    thresholds: dict[str, Any]
    refused: str = ""                 # why the runs cannot be compared ("" = compared)
    config_diff: list[tuple[str, str, str]] = field(default_factory=list)
    stages: list[StageSummary] = field(default_factory=list)
    records: list[RecordChange] = field(default_factory=list)
    cells: list[CellChange] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def regressions(self) -> list[RecordChange]:
        return [c for c in self.records if c.kind in REGRESSION_KINDS]

    @property
    def cell_regressions(self) -> list[CellChange]:
        return [c for c in self.cells if c.kind == "regression"]

    @property
    def exit_code(self) -> int:
        """0 nothing regressed, 1 regressions, 2 the runs could not be compared."""
        if self.refused:
            return 2
        return 1 if self.regressions or self.cell_regressions else 0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["config_diff"] = [{"field": k, "base": b, "current": c} for k, b, c in self.config_diff]
        data["exit_code"] = self.exit_code
        data["regression_count"] = len(self.regressions) + len(self.cell_regressions)
        return _finite(data)


def _finite(v: Any) -> Any:
    """JSON output without NaN/Infinity (strict parsers reject them)."""
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, dict):
        return {k: _finite(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_finite(x) for x in v]
    return v


# ---------------------------------------------------------------- values


def _scalar(v: Any) -> Any:
    """Normalize a record value for matching and printing: NA → None, integral floats → int."""
    if v is None or v is pd.NA:
        return None
    if hasattr(v, "item") and not isinstance(v, str | bytes):
        v = v.item()
    if isinstance(v, float):
        if math.isnan(v):
            return None
        if v.is_integer():
            return int(v)
    return v


def _number(v: Any) -> float | None:
    v = _scalar(v)
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def verdict_class(v: Any) -> str:
    """decided | undecided | error, from the value alone (BenchExec's status vocabulary plus
    the tasks' own: 'ok'/'agree'/'GENUINE' are decided, 'engine_error' is an error)."""
    v = _scalar(v)
    if v is None:
        return "undecided"
    if isinstance(v, bool):
        return "decided"
    text = str(v).strip().upper()
    if any(w in text for w in ERROR_WORDS):
        return "error"
    if text in UNDECIDED or text.startswith("TIMEOUT") or text.startswith("UNKNOWN"):
        return "undecided"
    return "decided"


def _near(t: float | None, limit: float | None, th: Thresholds) -> bool:
    return t is not None and limit is not None and limit > 0 and t >= th.near_limit * limit


# ---------------------------------------------------------------- loading


@dataclass
class _Side:
    root: Path
    manifest: Manifest
    records: dict[str, StageRecords]
    tables: list[Table]
    provenance: dict[str, str]
    shard_of: dict[str, int]
    retried: dict[str, dict[int, int]] = field(default_factory=dict)  # stage -> shard -> attempt
    first_attempt: dict[str, set[str]] = field(default_factory=dict)  # stage -> instance ids

    def is_retried(self, stage: str, iid: str) -> bool:
        """Was this instance's record made after its shard's first attempt ended?"""
        return (self.shard_of.get(iid) in self.retried.get(stage, {})
                and iid not in self.first_attempt.get(stage, set()))

    def stage_entry(self, name: str) -> Mapping[str, Any] | None:
        """The task stage's manifest entry as written (its declared columns), or None."""
        entry = self.manifest.task_stage(name)
        return entry.raw if entry is not None else None


def _load(run_dir: Path) -> _Side:
    run_dir = Path(run_dir)
    if not RunDir(run_dir).manifest.is_file():
        raise RegressError(f"{run_dir}: not a run directory (no manifest.json)")
    try:
        manifest, records = load_run(run_dir)
    except (OSError, ValueError, KeyError) as e:
        raise RegressError(f"{run_dir}: unreadable run directory ({e})") from None
    try:
        tables = load_tables(run_dir)
    except ValueError as e:
        raise RegressError(str(e)) from None
    try:  # the assignment frozen at plan time (contiguous or by cost: docs/run-directory.md)
        shard_of = shard_of_ids(run_dir) if records else {}
    except (OSError, ValueError, KeyError) as e:
        raise RegressError(f"{run_dir}: unreadable shard index ({e})") from None
    prov = provenance(run_dir, manifest, {s: r.frame for s, r in records.items()})
    retried, first = retried_shards(run_dir, manifest)
    return _Side(run_dir, manifest, records, tables, prov, shard_of, retried, first)


def retried_shards(run_dir: Path, manifest: Manifest
                   ) -> tuple[dict[str, dict[int, int]], dict[str, set[str]]]:
    """Per stage, the shards whose records came from more than one attempt (stats.json
    `attempt` > 1 or instances resumed from the ledger) — an element that was requeued,
    lost with its node or resumed ran partly on another node, at another time, often beside
    the others' work: its times are not a clean measurement — and, per stage, the instances
    of such shards recorded by their first attempt (a second attempt that resumed
    `resumed_from_ledger` instances: the ledger's first ones), which ran as usual."""
    rd = RunDir(run_dir)
    out: dict[str, dict[int, int]] = {}
    first: dict[str, set[str]] = {}
    for st in manifest.task_stages:
        for k in range(manifest.shards):
            try:
                stats = read_json(rd.stats(st.name, k))
            except (OSError, ValueError):
                continue
            if not isinstance(stats, dict):
                continue
            attempt = int(stats.get("attempt") or 1)
            resumed = int(stats.get("resumed_from_ledger") or 0)
            if attempt > 1 or resumed:
                out.setdefault(st.name, {})[k] = max(attempt, 2)
                if attempt == 2 and resumed:
                    first.setdefault(st.name, set()).update(
                        _ledger_ids(rd.ledger(st.name, k), resumed))
    return out, first


def _ledger_ids(path: Path, limit: int) -> list[str]:
    """The first `limit` instance ids in a shard ledger's order (header, torn or unparsable
    lines skipped)."""
    ids: dict[str, None] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if len(ids) >= limit:
                    break
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                iid = row.get("instance_id") if isinstance(row, dict) else None
                if isinstance(iid, str):
                    ids.setdefault(iid)
    except OSError:
        pass
    return list(ids)


# ---------------------------------------------------------------- records


def _keyed(frame: pd.DataFrame, key_cols: Sequence[str], where: Mapping[str, Any]
           ) -> tuple[dict[tuple[Any, ...], dict[str, Any]], int]:
    """Records by (instance_id, *key values), the last one winning; also the duplicate count."""
    if len(frame) and where:
        for col, want in where.items():
            if col not in frame.columns:
                return {}, 0
            frame = frame[frame[col].map(_scalar) == want]
    cols = ["instance_id", *[c for c in key_cols if c in frame.columns]]
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    dups = 0
    for rec in frame.to_dict("records"):
        key = (str(rec["instance_id"]),
               *[_scalar(rec.get(c)) for c in key_cols]) if len(cols) else ()
        if key in out:
            dups += 1
        out[key] = rec
    return out, dups


def _beyond_spread(tc: float, times: Sequence[float], th: Thresholds) -> bool:
    """The noise-aware time rule: `tc` is slower than the instance's clean times `times`
    (BASE and earlier nights) only when it is at least `spread_factor` x their median,
    `min_spread_s` above it, and above their highest by more than their range — a time
    inside what the instance has done on unchanged nights is not a change."""
    ts = sorted(times)
    med = ts[len(ts) // 2] if len(ts) % 2 else (ts[len(ts) // 2 - 1] + ts[len(ts) // 2]) / 2
    return (tc >= th.spread_factor * med and tc - med >= th.min_spread_s
            and tc > ts[-1] + (ts[-1] - ts[0]))


def _classify(b: dict[str, Any], c: dict[str, Any], decl: Mapping[str, Any],
              th: Thresholds, *, retried: str = "",
              spread: Sequence[float] | None = None) -> tuple[str, dict[str, Any]]:
    """One record pair's kind.  `retried`: which side's shard ran more than once (its time
    is not compared as if clean); `spread`: the instance's clean times of BASE and earlier
    nights, when there are `spread_min_nights` of them (the time rule is then
    `_beyond_spread`, not time_factor/min_time_s)."""
    vcol, tcol, lcol = decl.get("verdict_column"), decl.get("time_column"), decl.get("time_limit_column")
    info: dict[str, Any] = {
        "base_verdict": _scalar(b.get(vcol)) if vcol else None,
        "current_verdict": _scalar(c.get(vcol)) if vcol else None,
        "base_time_s": _number(b.get(tcol)) if tcol else None,
        "current_time_s": _number(c.get(tcol)) if tcol else None,
        "base_limit_s": _number(b.get(lcol)) if lcol else None,
        "current_limit_s": _number(c.get(lcol)) if lcol else None,
    }
    vb, vc = info["base_verdict"], info["current_verdict"]
    near_b = _near(info["base_time_s"], info["base_limit_s"], th)
    near_c = _near(info["current_time_s"], info["current_limit_s"], th)
    if vcol and vb != vc:
        cb, cc = verdict_class(vb), verdict_class(vc)
        if cb == cc == "decided":
            return "flip", info
        if cb == "decided" and cc == "undecided":
            if near_b:
                info["note"] = "BASE decided near its time limit: a flapping timeout"
                return "flapping", info
            return "lost", info
        if cb == "undecided" and cc == "decided":
            return "gained", info
        if cc == "error" and cb != "error":
            return "new_error", info
        if cb == "error" and cc != "error":
            return "fixed_error", info
        return "changed", info
    tb, tc = info["base_time_s"], info["current_time_s"]
    if retried:
        info["retried"] = retried
    if tb is not None and tc is not None:
        use_spread = spread is not None and len(spread) >= th.spread_min_nights
        if use_spread:
            info["spread_s"] = [round(t, 4) for t in sorted(spread)]
            slower = _beyond_spread(tc, spread, th)
            within = tc >= th.time_factor * tb and tc - tb >= th.min_time_s and not slower
        else:
            slower = tc >= th.time_factor * tb and tc - tb >= th.min_time_s
            within = False
        if slower:
            if near_b and near_c:
                info["note"] = "both near their time limits"
                return "flapping", info
            if retried:
                info["note"] = (f"{retried}: the shard ran more than once (requeued, lost with "
                                "its node or resumed); its times are not compared as clean")
                return "noisy", info
            return "slower", info
        if within:
            info["note"] = (f"within the instance's own spread over {len(spread or ())} clean "
                            "timings (BASE and earlier nights)")
            return "noisy", info
        if tb >= th.time_factor * tc and tb - tc >= th.min_time_s:
            return "faster", info
    return "same", info


def still_slower(change: RecordChange, time_s: float, th: Thresholds) -> bool:
    """Whether CURRENT's time `time_s` for `change`'s record is beyond the rule that flagged
    it: the instance's spread where it was judged by one (`spread_s`), else the fixed
    `time_factor`/`min_time_s` rule against BASE."""
    if change.spread_s is not None and len(change.spread_s) >= th.spread_min_nights:
        return _beyond_spread(time_s, change.spread_s, th)
    tb = change.base_time_s
    return tb is not None and time_s >= th.time_factor * tb and time_s - tb >= th.min_time_s


def retime_candidates(report: RegressReport, th: Thresholds) -> list[RecordChange]:
    """The `slower` records whose instances a caller should re-time: the first
    `th.retime_max` instances (in the report's order), every slower record of each."""
    if th.retime_k <= 0:
        return []
    chosen: list[tuple[str, str]] = []
    for c in report.records:
        if c.kind == "slower" and (c.stage, c.instance_id) not in chosen:
            chosen.append((c.stage, c.instance_id))
    keep = set(chosen[:th.retime_max])
    return [c for c in report.records if c.kind == "slower" and (c.stage, c.instance_id) in keep]


def apply_retimes(report: RegressReport,
                  timings: Mapping[tuple[str, str, tuple[tuple[str, Any], ...]], Sequence[float]],
                  th: Thresholds, *, where: str = "",
                  failed: Mapping[tuple[str, str], str] | None = None) -> RegressReport:
    """Judge each `slower` record that was re-timed (`timings`, by `RecordChange.record_key`)
    by the median of its re-timings: still beyond the rule → stays `slower`; within it → a
    one-off timing, `noisy`.  Both carry `retimed`.  The stage counts follow; `failed`
    (stage, instance) → why a re-timing could not be done (the record stays as it was).
    Returns `report`, changed in place."""
    moved: Counter[str] = Counter()
    done = 0
    for c in report.records:
        if c.kind != "slower":
            continue
        why = (failed or {}).get((c.stage, c.instance_id))
        if why:
            c.note = (c.note + "; " if c.note else "") + f"re-timing failed: {why}"
            continue
        times = timings.get(c.record_key)
        if not times:
            continue
        done += 1
        c.retimed = [round(float(t), 4) for t in times]
        med = statistics.median(times)
        if still_slower(c, med, th):
            c.note = (f"re-timed {len(times)} more time(s){where}: median {med:.3g} s is still "
                      "beyond the rule")
            continue
        c.kind = "noisy"
        c.note = (f"re-timed {len(times)} more time(s){where}: median {med:.3g} s is within the "
                  f"rule; the night's {c.current_time_s} s was a one-off")
        moved[c.stage] += 1
    for s in report.stages:
        n = moved.get(s.stage, 0)
        if n:
            counts = Counter(s.counts)
            counts["slower"] -= n
            counts["noisy"] += n
            s.counts = {k: counts[k] for k in KINDS if counts[k] > 0}
    if done:
        report.notes = sorted(dict.fromkeys(report.notes + [
            f"re-timing: {done} slower record(s) re-timed {th.retime_k} more time(s){where}, "
            f"{sum(moved.values())} of them within the rule (noisy)"]))
    order = {k: i for i, k in enumerate(KINDS)}
    report.records.sort(key=lambda c: (order[c.kind], c.stage, c.instance_id, str(c.key)))
    return report


def _clean_times(side: _Side, name: str, keys: tuple[str, ...], where: Mapping[str, Any],
                 tcol: str | None) -> dict[tuple[Any, ...], float]:
    """A run's times of stage `name` by record key, from shards that ran once only."""
    if not tcol or name not in side.records:
        return {}
    recs, _ = _keyed(side.records[name].frame, keys, where)
    out = {}
    for k, rec in recs.items():
        t = _number(rec.get(tcol))
        if t is not None and not side.is_retried(name, k[0]):
            out[k] = t
    return out


def compare_stage(name: str, base: _Side, cur: _Side, th: Thresholds,
                  history: Sequence[_Side] = ()) -> tuple[StageSummary, list[RecordChange]]:
    """Records of stage `name` compared pair by pair; `history`: earlier runs of the same
    entry (nightly: the nights before BASE) whose clean times give each instance's spread."""
    decl = cur.stage_entry(name) or {}
    bdecl = base.stage_entry(name) or {}
    keys = tuple(decl.get("record_key") or ())
    where = decl.get("record_filter") or {}
    summary = StageSummary(name, {k: decl.get(k) for k in ("verdict_column", "time_column",
                                                           "time_limit_column", "record_key",
                                                           "record_filter")})
    brecs, bd = _keyed(base.records[name].frame, keys, where)
    crecs, cd = _keyed(cur.records[name].frame, keys, where)
    tcol = decl.get("time_column")
    spreads: dict[tuple[Any, ...], list[float]] = {}
    for side in (base, *history):
        for k, t in _clean_times(side, name, keys, where, tcol).items():
            spreads.setdefault(k, []).append(t)
    summary.duplicates = bd + cd
    bmiss, cmiss = set(base.records[name].missing_shards), set(cur.records[name].missing_shards)
    changes: list[RecordChange] = []
    counts: Counter[str] = Counter()

    def key_dict(k: tuple[Any, ...]) -> dict[str, Any]:
        return dict(zip(keys, k[1:], strict=False))

    for k in sorted(set(brecs) | set(crecs), key=lambda t: tuple(str(x) for x in t)):
        iid = k[0]
        if iid not in base.shard_of or iid not in cur.shard_of:
            summary.not_in_both_plans += 1
            continue
        b, c = brecs.get(k), crecs.get(k)
        if b is None or c is None:
            side_missing = cmiss if c is None else bmiss
            shard = (cur if c is None else base).shard_of[iid]
            why = (f"shard {shard} of {'CURRENT' if c is None else 'BASE'} is incomplete"
                   if shard in side_missing else "no record in a complete shard")
            kind = "missing" if c is None else "new_record"
            rec = b if c is None else c
            vcol = decl.get("verdict_column") or bdecl.get("verdict_column")
            ch = RecordChange(name, iid, key_dict(k), kind, note=why)
            if vcol and rec is not None:
                if c is None:
                    ch.base_verdict = _scalar(rec.get(vcol))
                else:
                    ch.current_verdict = _scalar(rec.get(vcol))
            changes.append(ch)
            counts[kind] += 1
            continue
        summary.compared += 1
        sides = [label for label, side in (("BASE", base), ("CURRENT", cur))
                 if side.is_retried(name, iid)]
        kind, info = _classify(b, c, decl, th,
                               retried="both" if len(sides) == 2 else "".join(sides),
                               spread=spreads.get(k) if history else None)
        if kind == "same":
            summary.same += 1
            continue
        counts[kind] += 1
        changes.append(RecordChange(name, iid, key_dict(k), kind, **info))
    summary.counts = {k: counts[k] for k in KINDS if counts[k]}
    return summary, changes


# ---------------------------------------------------------------- tables


def _row_key(frame_row: Mapping[str, Any], index: Sequence[str], pos: int) -> tuple[Any, ...]:
    if not index:
        return (pos,)
    return tuple(_scalar(frame_row.get(c)) for c in index)


def _samples_for(t: Table, row: Mapping[str, Any], metric: str) -> dict[str, float] | None:
    s = t.samples
    if s is None or metric not in s.columns or "instance_id" not in s.columns:
        return None
    mask = pd.Series(True, index=s.index)
    for c in t.index:
        if c in s.columns:
            mask &= s[c].map(_scalar) == _scalar(row.get(c))
    part = s[mask]
    return {str(i): float(v) for i, v in zip(part["instance_id"], part[metric], strict=True)
            if _number(v) is not None}


def _test(metric: Metric, col: str, bt: Table, ct: Table, brow: Mapping[str, Any],
          crow: Mapping[str, Any], b: float, c: float, th: Thresholds) -> tuple[str, float | None, str]:
    """(test name, p-value, note) for a sampled metric; ("", None, why) when untestable."""
    bs, cs = _samples_for(bt, brow, col), _samples_for(ct, crow, col)
    if bs is not None and cs is not None:
        common = sorted(set(bs) & set(cs))
        if common:
            if metric.kind == "rate":
                only_b = sum(1 for i in common if bs[i] > 0 and not cs[i] > 0)
                only_c = sum(1 for i in common if cs[i] > 0 and not bs[i] > 0)
                return "mcnemar", stats.mcnemar_exact(only_b, only_c), f"{len(common)} paired instances"
            r = stats.paired_bootstrap([bs[i] for i in common], [cs[i] for i in common],
                                       resamples=th.resamples, alpha=th.alpha)
            return ("bootstrap", r.p_value,
                    f"{len(common)} paired instances; {1 - th.alpha:.0%} interval of the change "
                    f"[{r.low:.4g}, {r.high:.4g}]")
    if metric.kind in ("rate", "count"):
        nb, nc = _number(brow.get(metric.n_column)), _number(crow.get(metric.n_column))
        if nb and nc:
            kb = round(b / 100 * nb) if metric.kind == "rate" else round(b)
            kc = round(c / 100 * nc) if metric.kind == "rate" else round(c)
            if 0 <= kb <= nb and 0 <= kc <= nc:
                return "fisher", stats.fisher_exact(int(kb), int(nb), int(kc), int(nc)), \
                    f"{int(kb)}/{int(nb)} vs {int(kc)}/{int(nc)}"
    return "", None, "no samples or counts to test"


def compare_table(bt: Table, ct: Table, th: Thresholds) -> tuple[list[CellChange], list[str]]:
    notes: list[str] = []
    index = tuple(ct.index)
    if tuple(bt.index) != index:
        notes.append(f"table {ct.key}: index changed {list(bt.index)} → {list(index)}; rows matched "
                     "on the current index")
    brows = {_row_key(r, index, i): r for i, r in enumerate(bt.frame.to_dict("records"))}
    crows = {_row_key(r, index, i): r for i, r in enumerate(ct.frame.to_dict("records"))}
    for k in brows.keys() - crows.keys():
        notes.append(f"table {ct.key}: row {dict(zip(index or ('row',), k, strict=False))} only in BASE")
    for k in crows.keys() - brows.keys():
        notes.append(f"table {ct.key}: row {dict(zip(index or ('row',), k, strict=False))} only in CURRENT")
    for col in bt.metrics.keys() - ct.metrics.keys():
        notes.append(f"table {ct.key}: metric {col} no longer declared")
    out: list[CellChange] = []
    for k in [k for k in crows if k in brows]:
        brow, crow = brows[k], crows[k]
        row = dict(zip(index or ("row",), k, strict=False))
        for col, metric in ct.metrics.items():
            b, c = _number(brow.get(col)), _number(crow.get(col))
            if b is None and c is None:
                continue
            cell = CellChange(ct.key, row, col, "changed", b, c, None if b is None or c is None else c - b,
                              unit=metric.unit, sampled=metric.sampled)
            if b is None or c is None:
                cell.note = "value only in " + ("CURRENT" if b is None else "BASE")
                out.append(cell)
                continue
            delta = c - b
            if delta == 0:
                continue
            worse = delta < 0 if metric.higher_is_better else delta > 0
            if metric.sampled:
                cell.test, cell.p_value, cell.note = _test(metric, col, bt, ct, brow, crow, b, c, th)
                if cell.p_value is not None:
                    significant = cell.p_value < th.alpha
                    cell.kind = ("regression" if worse else "improvement") if significant else "noise"
            elif th.metric_tolerance is not None and worse and \
                    abs(delta) / max(abs(b), 1e-12) > th.metric_tolerance:
                cell.kind = "regression"
                cell.note = f"worse by more than {th.metric_tolerance:.0%} (metric_tolerance)"
            out.append(cell)
    return out, notes


# ---------------------------------------------------------------- the comparison


def refusal(base: Manifest, current: Manifest) -> str:
    """Why two manifests' runs are not comparable ("" when they are)."""
    bc, cc = base.config, current.config
    if bc.get("task") != cc.get("task"):
        return f"different tasks: {bc.get('task')!r} vs {cc.get('task')!r}"
    if bc.get("dataset_hash") != cc.get("dataset_hash"):
        return (f"different dataset content: {bc.get('dataset')!r} (hash {str(bc.get('dataset_hash'))[:12]}) "
                f"vs {cc.get('dataset')!r} (hash {str(cc.get('dataset_hash'))[:12]})")
    return ""


def regress(base_dir: Path, current_dir: Path, th: Thresholds | None = None,
            history: Sequence[Path] = ()) -> RegressReport:
    """Compare CURRENT with BASE.  `history`: earlier runs of the same series (not BASE);
    with them an instance's time is judged against its own spread (`_beyond_spread`)
    rather than one earlier timing.  Runs among them that are not comparable (another
    task or dataset) or unreadable are left out, with a note."""
    th = th or Thresholds()
    base, cur = _load(Path(base_dir)), _load(Path(current_dir))
    past: list[_Side] = []
    skipped: list[str] = []
    for h in history:
        try:
            side = _load(Path(h))
        except RegressError as e:
            skipped.append(f"{h}: {e}")
            continue
        why = refusal(side.manifest, cur.manifest)
        if why:
            skipped.append(f"{h}: {why}")
        else:
            past.append(side)
    report = RegressReport(base=base.provenance, current=cur.provenance, thresholds=asdict(th))
    report.config_diff = differences(base.provenance, cur.provenance)
    report.refused = refusal(base.manifest, cur.manifest)
    if report.refused:
        return report
    for side, label in ((base, "BASE"), (cur, "CURRENT")):
        for name, sr in side.records.items():
            if sr.missing_shards:
                report.notes.append(f"{label} {name}: shard(s) {sr.missing_shards} incomplete; their "
                                    "records are missing")
    for name in base.records.keys() - cur.records.keys():
        report.notes.append(f"stage {name} only in BASE: not compared")
    for name in cur.records.keys() - base.records.keys():
        report.notes.append(f"stage {name} only in CURRENT: not compared")
    for name in [s for s in cur.records if s in base.records]:
        entry = cur.stage_entry(name) or {}
        if "verdict_column" not in entry:
            report.notes.append(f"stage {name}: the manifest declares no verdict/time columns "
                                "(planned before launch recorded them); only presence is compared")
        summary, changes = compare_stage(name, base, cur, th, past)
        report.stages.append(summary)
        report.records += changes
    order = {k: i for i, k in enumerate(KINDS)}
    report.records.sort(key=lambda c: (order[c.kind], c.stage, c.instance_id, str(c.key)))
    btables, ctables = {t.key: t for t in base.tables}, {t.key: t for t in cur.tables}
    for side, tables in (("BASE", btables), ("CURRENT", ctables)):
        if not tables:
            report.notes.append(f"{side} has no table sidecars in tables/ (run `launch aggregate "
                                f"{(base if side == 'BASE' else cur).root}`); table cells not compared")
    if btables and ctables:
        for key in btables.keys() - ctables.keys():
            report.notes.append(f"table {key} only in BASE")
        for key in ctables.keys() - btables.keys():
            report.notes.append(f"table {key} only in CURRENT")
        for key in [k for k in ctables if k in btables]:
            cells, notes = compare_table(btables[key], ctables[key], th)
            report.cells += cells
            report.notes += notes
    if history:
        report.notes.append(f"time rule: each instance's spread over BASE and {len(past)} earlier "
                            f"run(s) where it has {th.spread_min_nights}+ clean timings")
    report.notes += [f"history run left out: {s}" for s in skipped]
    for side, label in ((base, "BASE"), (cur, "CURRENT")):
        for stage, shards in sorted(side.retried.items()):
            report.notes.append(f"{label} {stage}: shard(s) {sorted(shards)} ran more than once "
                                "(requeued, lost or resumed); the times recorded after a "
                                "first attempt are marked, not compared as clean")
    report.notes = sorted(dict.fromkeys(report.notes))
    cell_order = {"regression": 0, "improvement": 1, "noise": 2, "changed": 3}
    report.cells.sort(key=lambda c: cell_order.get(c.kind, 9))
    return report
