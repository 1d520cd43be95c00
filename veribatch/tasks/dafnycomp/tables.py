"""DafnyComp tables from a run's records (reads only the frames `launch aggregate` hands in).

- ``dafnycomp_strip``: what stripping removed, per split (programs, declarations, clauses by
  keyword) and its two self-checks (stable, bodies unchanged).
- ``dafnycomp_answers``: per model/arm, how answers turned into candidates: extraction
  outcomes (`tasks.extract`) and the integrity check (ok / cheat by kind / unchecked).
- ``table1_dafnycomp`` (Table 1): syntax-correct and verified rates at Pass@1/2/4/8 per
  model — the unbiased estimator of Chen et al. (`aggregate.stats.pass_at_k`) averaged over
  all programs (c = 0 for a program without candidates), from n ≥ k samples each (columns
  for k > n are left out).  The paper's protocol first (``syntax``: parses; ``verified``:
  Dafny's verdict alone), then ours: ``strict_syntax`` (resolve + integrity),
  ``strict_verified`` and ``strong`` (contracts as strong as the original's).
- ``table1_by_functions``: the same per number of chained functions (2–5).
- ``table2_failure_modes`` (Table 2): the candidates that did not verify, by failure mode
  (`tasks.dafnycomp.failure_modes`, primary = first error), with counts and % of the failed
  candidates, plus how many errors of each mode they contained: a ``paper`` view (the
  four modes, summing to 100 %) and a ``strict`` one (with our integrity rows).

Table 1 and 2 need the verify stage (Dafny); without it only the first two are built.
Every row carries ``covered`` and ``missing`` (instances of the run without a record).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from veribatch.aggregate.records import column
from veribatch.aggregate.stats import pass_at_k
from veribatch.aggregate.table import Metric, Plot, Table
from veribatch.rundir.instances import planned_instances
from veribatch.rundir.manifest import Manifest

KS = (1, 2, 4, 8)
REFERENCE_MODEL = "reference"
TABLE2_ORDER = ("specification_fragility", "implementation_proof_misalignment", "reasoning_instability",
                "other", "cheat", "unchecked", "no_program")


def _expected(run_dir: Path, manifest: Manifest) -> dict[int | None, int]:
    """Instances of the run per number of chained functions (instances.jsonl meta)."""
    planned = planned_instances(run_dir, manifest)
    if planned is None:
        return {None: (manifest.instance_count or 0)}
    out: dict[int | None, int] = {}
    for row in planned:
        k = (row.get("meta") or {}).get("chain_length")
        out[k] = out.get(k, 0) + 1
    return out


# ---------------------------------------------------------------- strip


def strip_table(strip: pd.DataFrame, expected: int) -> Table:
    rows = []
    keywords = ("requires", "ensures", "reads", "modifies", "decreases")
    reform = len(strip) > 0 and bool((column(strip, "strip", "") == "reform").any())
    reform_only = ("invariant", "assert", "assume", "comment") if reform else ()
    for split, g in (strip.groupby("split") if len(strip) else []):
        ok = g[g["status"] == "ok"]
        row = {"split": split, "covered": g["instance_id"].nunique(),
               "missing": expected - g["instance_id"].nunique(),
               "strip_errors": int((g["status"] == "strip_error").sum()),
               "mismatches": int((g["status"] == "strip_mismatch").sum()),
               "stable": int(column(g, "stable", False).fillna(False).astype(bool).sum()),
               "bodies_preserved": int(column(g, "bodies_preserved", False).fillna(False).astype(bool).sum()),
               "declarations": int(ok["declarations"].sum()),
               "clauses_removed": int(ok["clauses_removed"].sum())}
        for k in (*keywords, *reform_only):
            row[k] = int(column(ok, f"removed_{k}", 0).fillna(0).sum())
        rows.append(row)
    counts = ("covered", "strip_errors", "mismatches", "stable", "bodies_preserved", "declarations",
              "clauses_removed", *keywords, *reform_only)
    if reform_only:  # -o strip=reform: ReForm's scripts' line-based stripping
        return Table(
            key="dafnycomp_strip", title="DafnyComp: annotations stripped as ReForm's scripts strip (-o strip=reform)",
            frame=pd.DataFrame(rows or [{"split": None, "covered": 0, "missing": expected}]),
            caption=("Lines removed by their first word (requires, ensures, invariant, assert, modifies, "
                     "assume, reads, decreases; a line's continuation goes with it) and comments removed, "
                     "as ReForm's build_sft_data_from_json.py does; not §3.3's contract-only stripping. "
                     "stable: stripping again changes nothing; bodies lose their invariants and asserts "
                     "by design (bodies_preserved 0)."),
            index=("split",), metrics={c: Metric("count") for c in counts})
    return Table(
        key="dafnycomp_strip", title="DafnyComp: specifications stripped (§3.3)",
        frame=pd.DataFrame(rows or [{"split": None, "covered": 0, "missing": expected}]),
        caption=("Contract clauses removed before each body, by keyword. stable: strip(strip(p)) = "
                 "strip(p); bodies_preserved: every body byte-identical; mismatches: programs "
                 "failing either (never prompted); strip_errors: programs the scanner cannot read."),
        index=("split",), metrics={c: Metric("count") for c in counts})


# ---------------------------------------------------------------- answers


def answers_table(check: pd.DataFrame, expected: int) -> Table:
    cands = check[column(check, "sample_index", -1).fillna(-1).astype(int) >= 0] if len(check) else check
    rows = []
    for (model, arm), g in (cands.groupby(["model", "arm"], dropna=False) if len(cands) else []):
        row: dict[str, Any] = {"model": model, "arm": arm, "covered": g["instance_id"].nunique(),
                               "missing": expected - g["instance_id"].nunique(), "candidates": len(g)}
        status = column(g, "check_status", "")
        row["engine_errors"] = int((status == "engine_error").sum())
        for outcome, n in column(g, "extraction").dropna().value_counts().items():
            row[f"extraction={outcome}"] = int(n)
        integ = column(g, "integrity")
        for s in ("ok", "cheat", "unchecked"):
            row[f"integrity={s}"] = int((integ == s).sum())
        kinds: dict[str, int] = {}
        for raw in column(g, "integrity_kinds").dropna():
            for k in json.loads(raw):
                kinds[k] = kinds.get(k, 0) + 1
        for k, n in sorted(kinds.items()):
            row[f"cheat:{k}"] = n
        notes: dict[str, int] = {}
        for raw in column(g, "integrity_notes").dropna():
            for k in json.loads(raw):
                notes[k] = notes.get(k, 0) + 1
        for k, n in sorted(notes.items()):
            row[f"allowed:{k}"] = n
        rows.append(row)
    frame = pd.DataFrame(rows or [{"model": None, "arm": None, "covered": 0, "missing": expected}])
    counts = [c for c in frame.columns if c not in ("model", "arm", "missing")]
    return Table(
        key="dafnycomp_answers", title="DafnyComp: answers, extraction and integrity",
        frame=frame.fillna(0) if rows else frame,
        caption=("extraction=: how the program was taken from the answer (ok, multiple_blocks → the "
                 "block declaring most of the program's declarations, bare → the whole answer "
                 "(<think> dropped), truncated/no_block/empty → no program; reference: the "
                 "reference arms' own programs). integrity= (strict protocol): ok, cheat (any "
                 "cheat kind: not counted by the strict columns; the paper protocol scores "
                 "Dafny's verdict alone) or unchecked (unreadable, or a contract question z3 could not "
                 "settle, e.g. a recursive helper). cheat:K — candidates with "
                 "cheat kind K; allowed:K — allowed edits (App. H-style proof annotations, "
                 "helpers with bodies, module wrapper...) (docs/dafnycomp.md). Arm 'stripped' is "
                 "a cheat (trivial_spec) by construction: it has no specifications."),
        index=("model", "arm"), metrics={c: Metric("count") for c in counts})


# ---------------------------------------------------------------- Table 1


# Table 1's columns: (column prefix, per-candidate flag).  Paper protocol first (§4.1: Dafny's
# verdict on the output as is; syntax-correct = parses), then ours.
PASS_COLUMNS: tuple[tuple[str, str], ...] = (
    ("syntax", "parse_ok"),                 # paper: the program parses
    ("verified", "dafny_verified"),         # paper: Dafny verifies it
    ("strict_syntax", "syntax_correct"),    # extra: `dafny resolve` (parse + types) + strict integrity
    ("strict_verified", "verified"),        # strict protocol: nothing that makes Dafny accept a wrong program
    ("strong", "spec_as_strong"),           # strict, and every contract as strong as the original's
)


def _candidates(verify: pd.DataFrame) -> pd.DataFrame:
    if verify.empty:
        return verify
    v = verify[column(verify, "sample_index", -1).fillna(-1).astype(int) >= 0].copy()
    for _, c in PASS_COLUMNS:
        v[c] = column(v, c, False).fillna(False).astype(bool)
    return v


def pass_rows(v: pd.DataFrame, group: list[str], expected: dict[Any, int] | int
              ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per group: pass@k (in %) of each `PASS_COLUMNS` flag, averaged over *all* the group's
    programs (`expected`: a count, or per value of the group's last key): a program with no
    candidate (its strip failed, no program in any answer...) counts with c = 0, as the
    paper's denominator is every program; and the per-instance values."""
    rows, samples = [], []
    for key, g in v.groupby(group, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        agg = {f"c_{flag}": (flag, "sum") for _, flag in PASS_COLUMNS}
        per = g.groupby("instance_id").agg(n=("verified", "size"), **agg)
        n_min = int(per["n"].min())
        want = expected if isinstance(expected, int) else expected.get(
            None if pd.isna(key[-1]) else int(key[-1]), 0)
        denominator = max(want, len(per))
        row: dict[str, Any] = dict(zip(group, key, strict=True))
        row.update(covered=len(per), n=n_min, programs=denominator)
        inst_vals: dict[str, dict[str, float]] = {iid: {} for iid in per.index}
        for k in KS:
            if k > n_min:
                continue
            for name, flag in PASS_COLUMNS:
                vals = {iid: 100.0 * pass_at_k(int(r.n), int(getattr(r, f"c_{flag}")), k) for iid, r in per.iterrows()}
                row[f"{name}_at_{k}"] = round(sum(vals.values()) / denominator, 2)
                for iid, val in vals.items():
                    inst_vals[iid][f"{name}_at_{k}"] = val
        row["cheats"] = int((column(g, "outcome") == "cheat").sum())
        row["no_program"] = int((column(g, "outcome") == "no_program").sum())
        versions = sorted({str(x) for x in column(g, "dafny_version").dropna()})
        row["dafny_version"] = ",".join(versions)
        row["paper_comparable_dafny"] = bool(versions) and all(x.startswith("4.10.") for x in versions)
        rows.append(row)
        for iid, vals in inst_vals.items():
            samples.append({**dict(zip(group, key, strict=True)), "instance_id": iid, **vals})
    return rows, samples


def _pass_metrics(frame: pd.DataFrame, reference_only: bool) -> dict[str, Metric]:
    m: dict[str, Metric] = {}
    prefixes = tuple(f"{name}_at_" for name, _ in PASS_COLUMNS)
    for c in frame.columns:
        if c.startswith(prefixes):
            m[c] = Metric("mean", sampled=not reference_only, unit="%")
        elif c in ("cheats", "no_program"):
            m[c] = Metric("count", higher_is_better=False)
        elif c == "covered":
            m[c] = Metric("count")
    return m


def table1(verify: pd.DataFrame, by_chain: dict[int | None, int]) -> list[Table]:
    expected = sum(by_chain.values())
    v = _candidates(verify)
    if v.empty:
        return []
    reference_only = bool((column(v, "model") == REFERENCE_MODEL).all())
    caption = ("Pass@k (%): the unbiased estimator 1 - C(n-c, k)/C(n, k) per program, averaged "
               "over ALL the run's programs (one without a candidate, e.g. its strip failed, "
               "counts 0; `programs`), from the n samples each has (k > n not shown). PAPER "
               "PROTOCOL (App. G, §4.1; Dafny's verdict on the output as is): syntax = the "
               "program parses; verified = `dafny verify` with no errors, time-outs or "
               "out-of-resource. OURS: strict_verified = verified and nothing that makes Dafny "
               "accept a wrong program (integrity: no assume/axiom/verify-false/extern, "
               "decreases *, vacuous or trivially-true contracts, changed implementation, "
               "contradictory assumptions Dafny warns about; App. H-style proof edits allowed); "
               "strict_syntax = `dafny resolve` (parse + types) and that integrity; strong = "
               "strict_verified and every contract proved by Dafny at least as strong as the "
               "original's (generated lemmas). Model 'reference': arm 'original' is the "
               "benchmark's program (must verify), arm 'stripped' the program without specs (what "
               "verifies without them). paper_comparable_dafny: every verdict from Dafny 4.10.x.")
    rows, samples = pass_rows(v, ["model", "arm"], expected)
    for r in rows:
        r["missing"] = expected - r["covered"]
    frame = pd.DataFrame(rows)
    t1 = Table(key="table1_dafnycomp", title="Table 1: syntax-correct and verified rates (Pass@k, %), "
               "paper protocol; strict_* (ours) beside", frame=frame, caption=caption, index=("model", "arm"),
               metrics=_pass_metrics(frame, reference_only), samples=pd.DataFrame(samples))
    v = v.assign(chain_length=pd.to_numeric(column(v, "chain_length"), errors="coerce"))
    rows, samples = pass_rows(v, ["model", "arm", "chain_length"], by_chain)
    for r in rows:
        k = None if pd.isna(r["chain_length"]) else int(r["chain_length"])
        r["missing"] = by_chain.get(k, 0) - r["covered"]
    frame = pd.DataFrame(rows)
    frame["chain_length"] = frame["chain_length"].astype("Int64")
    by = Table(key="table1_by_functions", title="Pass@k by number of chained functions (%): ours, not a paper table "
               "(Table 1's columns per main_<K>node)",
               frame=frame, caption=caption + " Rows per number of chained functions (main_<K>node).",
               index=("model", "arm", "chain_length"), metrics=_pass_metrics(frame, reference_only),
               samples=pd.DataFrame(samples))
    return [t1, by, pass_curve(t1)]


def pass_curve(t1: Table) -> Table:
    """Table 1 in long form (one row per model × arm × k), so the report can draw the pass@k
    curves a reader of the paper expects; the numbers are Table 1's, nothing new."""
    rows = []
    for _, r in t1.frame.iterrows():
        for k in KS:
            if f"verified_at_{k}" in r and pd.notna(r[f"verified_at_{k}"]):
                rows.append({"model": r["model"], "arm": r["arm"], "who": f"{r['model']} ({r['arm']})",
                             "k": k, "syntax": r[f"syntax_at_{k}"], "verified": r[f"verified_at_{k}"],
                             "strict_verified": r[f"strict_verified_at_{k}"],
                             "covered": r["covered"], "missing": r["missing"]})
    return Table(key="pass_at_k_dafnycomp", title="Pass@k curves (Table 1's rows by k; strict_verified ours)",
                 frame=pd.DataFrame(rows), index=("model", "arm", "k"),
                 plots=(Plot("line", x="k", y=("syntax", "verified", "strict_verified"), series="who",
                             x_label="k (samples per program)", y_label="pass@k (%)"),),
                 caption="Table 1's Pass@k (paper protocol: syntax, verified; ours: strict_verified), "
                         "one row per k (for the plot).")


# ---------------------------------------------------------------- Table 2


PAPER_MODES = TABLE2_ORDER[:4]
PAPER_TABLE2_PCT = dict(zip(PAPER_MODES, (39.2, 21.7, 14.1, 25.0), strict=True))
"""Table 2 of the paper: % of its 900 analysed failures per mode (353, 195, 127, 225)."""


def _category(r: pd.Series) -> str:
    if r.get("outcome") == "no_program":
        return "no_program"
    if r.get("arm") == "model" and r.get("integrity") in ("cheat", "unchecked"):
        return str(r["integrity"])
    return str(r.get("dafny_failure_mode") or "other")


def _paper_category(r: pd.Series) -> str:
    """The paper's four modes only: Dafny's verdict alone; anything else (no program, our
    integrity rows) folds into Other."""
    mode = r.get("dafny_failure_mode")
    return str(mode) if mode in PAPER_MODES else "other"


def table2(verify: pd.DataFrame, expected: int) -> list[Table]:
    v = _candidates(verify)
    if v.empty:
        return []
    rows = []
    views = (("paper", ~v["dafny_verified"], _paper_category, PAPER_MODES),
             ("strict", ~v["verified"], _category, TABLE2_ORDER))
    for protocol, not_ok, categorize, order in views:
        failed = v[not_ok]
        if len(failed):
            failed = failed.assign(category=failed.apply(categorize, axis=1))
        for (model, arm), g in (v.groupby(["model", "arm"], dropna=False)):
            f = failed[(failed["model"] == model) & (failed["arm"] == arm)] if len(failed) else failed
            errors: dict[str, int] = {}
            for raw in column(f, "dafny_failure_modes").dropna():
                for mode in json.loads(raw):
                    errors[mode] = errors.get(mode, 0) + 1
            counts = f["category"].value_counts() if len(f) else pd.Series(dtype=int)
            for cat in order:
                n = int(counts.get(cat, 0))
                rows.append({"model": model, "arm": arm, "protocol": protocol, "failure_mode": cat,
                             "candidates": n, "failed": len(f),
                             "pct_of_failed": round(100.0 * n / len(f), 1) if len(f) else None,
                             "paper_pct_of_failed": PAPER_TABLE2_PCT.get(cat) if protocol == "paper" else None,
                             "errors": errors.get(cat, 0) if cat in PAPER_MODES else None,
                             "covered": g["instance_id"].nunique(),
                             "missing": expected - g["instance_id"].nunique()})
    frame = pd.DataFrame(rows)
    return [Table(
        key="table2_failure_modes", title="Table 2: failure modes of the candidates that did not verify",
        frame=frame,
        caption=("protocol=paper: the paper's four modes over the candidates Dafny did not verify; "
                 "they sum to 100 % (no program and anything else fold into Other). "
                 "protocol=strict: over the candidates the strict protocol does not count as "
                 "verified, with our extra rows cheat/unchecked (integrity) and no_program. "
                 "failure_mode of a candidate: that of the first error Dafny printed, by OUR "
                 "mapping (the paper publishes none; ours follows §1 and App. H where they place "
                 "a message): specification fragility: postcondition, call precondition, frames; "
                 "implementation–proof misalignment: invariant on entry, assertion, index/"
                 "well-formedness, a decreases clause that does not decrease, a method called in "
                 "an expression (App. H.4); reasoning instability: invariant maintained, a missing "
                 "termination measure; other: parse, other resolution errors, time-out, "
                 "out-of-resource, unclassified. paper_pct_of_failed: the paper's Table 2 (900 "
                 "failures of its models). "
                 "Reference arms are classified by Dafny's messages alone. errors: errors of that "
                 "mode in those candidates. Mapping: docs/dafnycomp.md."),
        index=("model", "arm", "protocol", "failure_mode"),
        metrics={"candidates": Metric("count", higher_is_better=False),
                 "pct_of_failed": Metric("rate", n_column="failed", higher_is_better=False),
                 "errors": Metric("count", higher_is_better=False)})]


def build_tables(run_dir: Path, manifest: Manifest, stages: dict[str, pd.DataFrame]) -> list[Table]:
    by_chain = _expected(run_dir, manifest)
    expected = sum(by_chain.values())
    tables = [strip_table(stages.get("strip", pd.DataFrame()), expected),
              answers_table(stages.get("check", pd.DataFrame()), expected)]
    verify = stages.get("verify")
    if verify is not None:
        tables += table1(verify, by_chain) + table2(verify, expected)
    return tables
