"""REFUTE tables from a run's judge records (reads only the frames `launch aggregate` hands in).

- `refute_success` (paper Tables 1–2): per model × strategy (arm) — problems covered, solved
  (any attempt a counterexample), success rate with its 95 % Wilson interval, pass@1 over
  the attempts, errors (judge/data faults, never successes), mean generation time;
- `refute_validation` (§4.2's validation failures): per arm, the attempts whose input never
  reached the comparison, by named reason (invalid input, generator crash/timeout...);
- `refute_outcomes`: every judgement reason per arm (what the successes and failures were);
- `refute_buckets` (§5, Fig. 4): success by problem rating, author rating and failing test
  number, each cut into five percentile buckets of the run's problems;
- `refute_overlap` (§4.3's disjointness): for each pair of arms, problems solved by both, by
  one only, and per arm those no other arm solved; across runs with `launch refute compare`;
- `refute_randsearch` (§4.3's failure analysis): per search arm, the share of attempts that
  succeeded, ended on a wrong brute force (a valid input where the wrong and the correct
  solution agree), on an invalid input, found nothing, or could not run;
- `refute_filter` (§4.1, runs with ``-o filter=true``): per problem, kept or dropped.

Rows carry ``covered`` / ``missing`` (instances of the run without a judge record).  Record
columns are documented in docs/refute.md.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd

from veribatch.aggregate.stats import mean_pass_at_k, wilson_interval
from veribatch.aggregate.table import Metric, Plot, Table
from veribatch.rundir.instances import planned_instances
from veribatch.rundir.manifest import Manifest

BUCKET_ATTRS = ("problem_rating", "author_rating", "fail_tc")
VALIDATION_REASONS = ("generator_compile_error", "generator_crash",
                      "generator_timeout", "generator_memory", "generator_output_limit",
                      "empty_input", "invalid_input", "validator_timeout")
FAILURE_MODES = ("success", "wrong_brute_force", "invalid_input", "nothing_found",
                 "generator_error", "brute_error", "no_program", "other")
INDEX = ("model", "arm")
SEARCH_ARMS = ("randsearch", "randsearch-oracle", "blind-random", "fuzzer-random-filter",
               "trivial-randsearch-oracle")
PROMPTING_AGENTIC_ARMS = ("zero-shot", "few-shot", "agentic", "agentic-few-shot")
"""§4.3's "previous prompting and agentic strategies": the non-oracle arms that the search arms'
distinct invalidated submissions are counted against."""
POOLED = "(pooled §5)"
"""§5 Fig. 4's pool: "average success ... of the best two models, R1 and o3-mini (high), across
prompting (Zero-shot, Few-shot), agentic (with and without demos) and search strategies"."""
POOLED_ALL = "(pooled, every arm)"
"""Ours, named: every model x arm of the runs given, oracle and reference rows included."""
PAPER_POOL_ARMS = ("zero-shot", "few-shot", "agentic", "agentic-few-shot", "randsearch")
PAPER_POOL_MODELS = re.compile(r"deepseek-r1|(?<![a-z0-9])r1(?![a-z0-9])|o3-mini", re.IGNORECASE)


def attempts(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    judge = frames.get("judge")
    if judge is None or judge.empty or "kind" not in judge:
        return pd.DataFrame(columns=["instance_id", "model", "arm", "outcome", "reason"])
    return judge[judge["kind"] == "attempt"].copy()


def _num(g: pd.DataFrame, col: str) -> pd.Series:
    """A numeric column, all NaN when the records lack it (e.g. every attempt refused)."""
    if col not in g:
        return pd.Series([float("nan")] * len(g), index=g.index, dtype=float)
    return pd.to_numeric(g[col], errors="coerce")


def _truncated(g: pd.DataFrame) -> pd.Series:
    """Attempts whose (last) answer was cut at max_tokens."""
    if "truncated" not in g:
        return pd.Series([False] * len(g), index=g.index)
    return g["truncated"].fillna(False).astype(bool)


def _rate(k: int, n: int) -> float | None:
    return round(100.0 * k / n, 1) if n else None


def solved_sets(att: pd.DataFrame) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for (model, arm), g in att.groupby(["model", "arm"], dropna=False):
        out[(str(model), str(arm))] = set(g.loc[g["outcome"] == "success", "instance_id"])
    return out


def sandbox_label(g: pd.DataFrame) -> str:
    """The isolation mechanism(s) of a row's attempts, named (records: `sandbox`,
    `sandbox_unsafe`): kind "none" is either the explicit unsafe mode or the fallback of a
    run of shipped programs only (`tasks.refute.problem.shipped_programs_only`)."""
    kinds = sorted(set(g.get("sandbox", pd.Series(dtype=str)).dropna()))
    unsafe = bool(g.get("sandbox_unsafe", pd.Series([False])).fillna(False).astype(bool).any())
    names = [k if k != "none" or unsafe else "none (no namespaces; shipped programs only)"
             for k in kinds]
    return ",".join(names) + (" UNSAFE" if unsafe else "")


def success_table(att: pd.DataFrame, expected: int, key: str = "refute_success",
                  sampled: bool = True) -> Table:
    rows, samples = [], []
    for (model, arm), g in att.groupby(["model", "arm"], dropna=False):
        per = g.groupby("instance_id")["outcome"].apply(lambda s: (len(s), int((s == "success").sum())))
        n_solved = sum(1 for _, c in per if c > 0)
        covered = len(per)
        lo, hi = wilson_interval(n_solved, covered)
        gen = _num(g, "generation_time_s")
        rows.append({
            "model": model, "arm": arm, "covered": covered, "missing": expected - covered,
            "attempts": len(g), "solved": n_solved, "success_rate": _rate(n_solved, covered),
            "ci95": f"[{100 * lo:.1f}, {100 * hi:.1f}]",
            "pass_at_1": round(100 * mean_pass_at_k(list(per), 1), 1) if covered else None,
            "errors": int((g["outcome"] == "error").sum()),
            "validation_failures": int(g["reason"].isin(VALIDATION_REASONS).sum()),
            "truncated": int(_truncated(g).sum()),
            "no_program_truncated": int(((g["reason"] == "no_program") & _truncated(g)).sum()),
            "mean_generation_s": round(float(gen.mean()), 3) if gen.notna().any() else None,
            "sandbox": sandbox_label(g),
        })
        for iid, (_n, c) in per.items():
            samples.append({"model": model, "arm": arm, "instance_id": iid, "solved": float(c > 0)})
    frame = pd.DataFrame(rows) if rows else pd.DataFrame(
        [{"model": None, "arm": None, "covered": 0, "missing": expected}])
    return Table(
        key=key, title="REFUTE Tables 1-2: counterexample success rate per model x strategy",
        frame=frame, index=INDEX,
        metrics={"success_rate": Metric("rate", sampled=sampled),
                 "pass_at_1": Metric("rate", sampled=sampled),
                 "errors": Metric("count", higher_is_better=False),
                 "validation_failures": Metric("count", sampled=sampled, higher_is_better=False),
                 "mean_generation_s": Metric("value", higher_is_better=False, unit="s")},
        samples=pd.DataFrame(samples) if samples else None,
        caption=("truncated: attempts whose answer hit max_tokens (no_program_truncated: of "
                 "those, the ones left without a usable program — a budget problem, not the "
                 "model's inability). "
                 "solved: problems with at least one attempt judged a counterexample (the "
                 "validator accepts the input and the wrong solution's output differs from the "
                 "correct one's in one of up to 5 runs, or it crashes or exceeds the time limit). "
                 "success_rate = solved / covered, ci95 its Wilson interval; pass_at_1 the "
                 "unbiased estimate over the attempts. errors: the correct solution failed or the "
                 "judge could not run (never counted as success). Reference rows "
                 "('reference (no model)') use no model. sandbox: the isolation the attempts ran "
                 "under: bwrap (bubblewrap namespaces), apptainer, or 'none (no namespaces; "
                 "shipped programs only)' where the node has neither and the run executes only "
                 "programs shipped with veribatch (the no-model default on the sample: limits, "
                 "own temp dir, uid 65534 when root); 'UNSAFE' marks attempts run without a "
                 "sandbox on explicit request (sandbox=unsafe)."),
    )


def _reason_counts(att: pd.DataFrame, reasons: tuple[str, ...] | None, key: str, title: str,
                   expected: int, caption: str, sampled: bool,
                   extra: tuple[str, ...] = ()) -> Table:
    rows = []
    names = reasons or tuple(sorted(set(att["reason"].dropna())))
    for (model, arm), g in att.groupby(["model", "arm"], dropna=False):
        row = {"model": model, "arm": arm, "covered": int(g["instance_id"].nunique()),
               "missing": expected - int(g["instance_id"].nunique()), "attempts": len(g)}
        for r in names:
            row[r] = int((g["reason"] == r).sum())
        if reasons:
            row["total"] = int(g["reason"].isin(reasons).sum())
        for r in extra:
            row[r] = int((g["reason"] == r).sum())
            row[f"{r}_truncated"] = int(((g["reason"] == r) & _truncated(g)).sum())
        rows.append(row)
    cols = [*names, *(["total"] if reasons else []), *(c for r in extra for c in (r, f"{r}_truncated"))]
    return Table(key=key, title=title, frame=pd.DataFrame(rows) if rows else pd.DataFrame(
        [{"covered": 0, "missing": expected}]), index=INDEX,
        metrics={c: Metric("count", n_column="attempts", sampled=sampled) for c in cols},
        caption=caption)


def paper_pool(att: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The attempts §5 pooled — its strategies (`PAPER_POOL_ARMS`) of R1 and o3-mini — and the
    models pooled, in words.  Runs of neither model pool the §5 strategies of the models given
    (the row's model column names them)."""
    part = att[att["arm"].isin(PAPER_POOL_ARMS)]
    models = sorted({str(m) for m in part["model"].dropna()})
    paper = [m for m in models if PAPER_POOL_MODELS.search(m.split(":", 1)[-1])]
    if paper:
        part, models = part[part["model"].astype(str).isin(paper)], paper
    return part, ", ".join(models)


def _bucket_rows(att: pd.DataFrame, attr: str, problems: pd.DataFrame,
                 pooled: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    """Per (model, arm), or with `pooled` = (model, arm) labels one row per bucket over every
    (model, arm, problem) of `att` — §5's "average success ... across strategies"."""
    vals = pd.to_numeric(problems[attr], errors="coerce")
    known = problems[vals.notna()]
    if known.empty:
        return []
    try:
        cuts = pd.qcut(pd.to_numeric(known[attr]), 5, duplicates="drop")
    except ValueError:
        return []
    # one distinct value leaves qcut nothing to cut (NaN labels): no buckets then
    label = {iid: cut for iid, cut in zip(known["instance_id"], cuts, strict=True)
             if isinstance(cut, pd.Interval)}
    rows = []
    groups: dict[tuple[str, str], dict[Any, list[bool]]] = {}
    for (model, arm), g in att.groupby(["model", "arm"], dropna=False):
        solved = g.groupby("instance_id")["outcome"].agg(lambda s: bool((s == "success").any()))
        by = groups.setdefault(pooled if pooled else (model, arm), {})
        for iid, ok in solved.items():
            if iid in label:
                by.setdefault(label[iid], []).append(bool(ok))
    for (model, arm), by_bucket in groups.items():
        for k, cut in enumerate(sorted(by_bucket, key=lambda c: c.left), start=1):
            oks = by_bucket[cut]
            rows.append({"model": model, "arm": arm, "attribute": attr, "bucket": k,
                         "range": f"({cut.left:g}, {cut.right:g}]",
                         "bucket_label": f"{attr} ({cut.left:g}, {cut.right:g}]",
                         "who": f"{model} ({arm})", "covered": len(oks),
                         "missing": 0, "solved": sum(oks), "success_rate": _rate(sum(oks), len(oks))})
    return rows


def buckets_table(att: pd.DataFrame, sampled: bool, key: str = "refute_buckets",
                  pooled: bool = False) -> Table:
    problems = att.drop_duplicates("instance_id")
    rows = [r for attr in BUCKET_ATTRS if attr in att for r in _bucket_rows(att, attr, problems)]
    if pooled:
        # buckets cut on the problems of all runs; the §5 pool, then ours (every arm) beside
        paper, models = paper_pool(att)
        for part, label in ((paper, (f"{POOLED}: {models}", POOLED)), (att, (POOLED_ALL, POOLED_ALL))):
            if len(part):
                rows += [r for attr in BUCKET_ATTRS if attr in att
                         for r in _bucket_rows(part, attr, problems, pooled=label)]
    return Table(
        key=key,
        title="REFUTE Fig. 4: success by problem rating, author rating and failing test number",
        frame=pd.DataFrame(rows) if rows else pd.DataFrame([{"covered": 0, "missing": 0}]),
        index=("model", "arm", "attribute", "bucket"),
        metrics={"success_rate": Metric("rate", sampled=sampled)},
        plots=(Plot("bar", x="bucket_label", y=("success_rate",), series="who",
                    x_label="bucket (attribute and its value range)",
                    y_label="success rate (% of problems)"),) if rows else (),
        caption=("Five percentile buckets of the problems per attribute (fewer when values "
                 "repeat); success_rate: problems solved / problems in the bucket. Rows "
                 f"'{POOLED}' (across runs): as §5, R1 and o3-mini (where the runs have them; else "
                 "the models named in the row) x zero-shot, few-shot, agentic, agentic-few-shot and "
                 f"randsearch x problem of the bucket; '{POOLED_ALL}' (ours): every model x arm, "
                 "oracle and reference rows included; "
                 "together, as §5 averages over strategies; covered counts those pairs."),
    )


def overlap_table(sets: dict[tuple[str, str], set[str]], key: str = "refute_overlap") -> Table:
    rows = []
    names = sorted(sets)
    for i, a in enumerate(names):
        others = set().union(*(sets[b] for b in names if b != a)) if len(names) > 1 else set()
        rows.append({"model": a[0], "arm": a[1], "other_model": "(all others)", "other_arm": "",
                     "covered": len(sets[a]), "missing": 0, "solved": len(sets[a]), "both": None,
                     "only_this": len(sets[a] - others), "only_other": None})
        for b in names[i + 1:]:
            rows.append({"model": a[0], "arm": a[1], "other_model": b[0], "other_arm": b[1],
                         "covered": len(sets[a] | sets[b]), "missing": 0, "solved": len(sets[a]),
                         "both": len(sets[a] & sets[b]), "only_this": len(sets[a] - sets[b]),
                         "only_other": len(sets[b] - sets[a])})
    return Table(
        key=key, title="REFUTE §4.3: overlap of the problems solved by different strategies",
        frame=pd.DataFrame(rows) if rows else pd.DataFrame([{"covered": 0, "missing": 0}]),
        index=("model", "arm", "other_model", "other_arm"),
        metrics={"only_this": Metric("count", sampled=True), "both": Metric("count", sampled=True)},
        caption=("Rows '(all others)': problems this arm solved that no other arm in the table "
                 "did (the paper's 'distinct submissions invalidated'). Pair rows: solved by "
                 "both, by this arm only, by the other only; covered = solved by either."),
    )


def distinct_table(att: pd.DataFrame, key: str = "refute_distinct") -> Table | None:
    """§4.3's "distinct submissions invalidated": per arm of a model, the problems it solved
    that none of that model's prompting and agentic arms (`PROMPTING_AGENTIC_ARMS`, never the
    oracle ones, never itself) did, as a % of the problems the arm covered (the paper: 6 % for
    o3-mini's RandSearch, 3 % with the correct solution)."""
    sets = solved_sets(att)
    rows = []
    for (model, arm), g in att.groupby(["model", "arm"], dropna=False):
        against = sorted(a for (m, a) in sets if m == model and a in PROMPTING_AGENTIC_ARMS and a != arm)
        if not against:
            continue
        others = set().union(*(sets[(str(model), a)] for a in against))
        mine = sets[(str(model), str(arm))]
        covered = int(g["instance_id"].nunique())
        rows.append({"model": model, "arm": arm, "against": ", ".join(against), "covered": covered,
                     "missing": 0, "solved": len(mine), "distinct_invalidated": len(mine - others),
                     "pct_of_covered": _rate(len(mine - others), covered)})
    if not rows:
        return None
    return Table(
        key=key, title="REFUTE §4.3: distinct submissions invalidated (vs. prompting and agentic arms)",
        frame=pd.DataFrame(rows), index=INDEX,
        metrics={"pct_of_covered": Metric("rate", n_column="covered", sampled=True)},
        caption=("distinct_invalidated: problems this arm solved that none of the model's "
                 "non-oracle prompting and agentic arms ('against') solved; pct_of_covered = that / "
                 "problems this arm covered (the paper's 6 % RandSearch, 3 % oracle RandSearch "
                 "for o3-mini)."),
    )


def failure_mode(row: pd.Series) -> str:
    if row.get("outcome") == "success":
        return "success"
    mode = row.get("randsearch_failure")
    return mode if mode in FAILURE_MODES else "other"


def randsearch_table(att: pd.DataFrame, expected: int, sampled: bool) -> Table | None:
    search = att[att["arm"].isin(SEARCH_ARMS)]  # every attempt, also those without a program
    if search.empty:
        return None
    rows = []
    for (model, arm), g in search.groupby(["model", "arm"], dropna=False):
        modes = g.apply(failure_mode, axis=1)
        n = len(g)
        row = {"model": model, "arm": arm, "covered": int(g["instance_id"].nunique()),
               "missing": expected - int(g["instance_id"].nunique()), "attempts": n}
        for m in FAILURE_MODES:
            row[f"pct_{m}"] = _rate(int((modes == m).sum()), n)
        wrong_ce = int(modes.isin(["wrong_brute_force", "invalid_input"]).sum())
        row["pct_incorrect_counterexample"] = _rate(wrong_ce, n)
        row["of_which_invalid_pct"] = _rate(int((modes == "invalid_input").sum()), wrong_ce)
        row["of_which_brute_pct"] = _rate(int((modes == "wrong_brute_force").sum()), wrong_ce)
        iters = _num(g, "search_iterations")
        row["mean_iterations"] = round(float(iters.mean()), 1) if iters.notna().any() else None
        rows.append(row)
    return Table(
        key="refute_randsearch", title="REFUTE §4.3: RandSearch failure modes",
        frame=pd.DataFrame(rows), index=INDEX,
        metrics={f"pct_{m}": Metric("rate", n_column="attempts", sampled=sampled,
                                    higher_is_better=m == "success") for m in FAILURE_MODES},
        caption=("Shares of the search attempts (percent): success; wrong_brute_force (the search "
                 "stopped on a valid input where the wrong and the correct solution agree: the "
                 "brute force was wrong); invalid_input (the input it stopped on breaks a "
                 "constraint); nothing_found (time limit or no new inputs); generator_error / "
                 "brute_error (the model's program kept failing); no_program (unusable answer). "
                 "incorrect counterexample = wrong_brute_force + invalid_input, split in the last "
                 "two columns as in the paper."),
    )


def filter_table(att: pd.DataFrame, expected_ids: list[str]) -> Table:
    by = att.groupby("instance_id")
    rows = []
    for iid in expected_ids:
        if iid not in by.groups:
            rows.append({"instance_id": iid, "decision": "missing", "covered": 0, "missing": 1})
            continue
        g = by.get_group(iid)
        broken = bool((g["outcome"] == "success").any())
        first = g.iloc[0]
        rows.append({"instance_id": iid, "decision": "dropped" if broken else "kept",
                     "reason": first.get("reason"), "generator": first.get("generator_source"),
                     "search_s": first.get("search_s"), "covered": 1, "missing": 0})
    return Table(
        key="refute_filter", title="REFUTE §4.1 construction filter: blind random generator",
        frame=pd.DataFrame(rows), index=("instance_id",),
        metrics={"decision": Metric("value")},
        caption=("dropped: a random generator written without seeing the wrong code broke the "
                 "wrong solution within the filter limit (the paper drops these samples)."),
    )


def build_tables(run_dir: Path, manifest: Manifest, frames: dict[str, pd.DataFrame]) -> list[Table]:
    ids = [row["id"] for row in planned_instances(run_dir, manifest) or ()]
    expected = len(ids) or (manifest.instance_count or 0)
    att = attempts(frames)
    config = manifest.config
    sampled = bool(config.get("model"))
    tables = [success_table(att, expected, sampled=sampled)]
    if att.empty:
        return tables
    tables.append(_reason_counts(
        att, VALIDATION_REASONS, "refute_validation", "REFUTE §4.2: validation failures per strategy",
        expected, "Attempts whose program ran but whose input never reached the comparison, by "
        "reason (total); no_program (an answer without a usable program) is counted apart, and "
        "no_program_truncated says how many of those were cut at max_tokens.",
        sampled, extra=("no_program",)))
    tables.append(_reason_counts(
        att, None, "refute_outcomes", "REFUTE: judgement reasons per strategy", expected,
        "Every attempt's named reason (see docs/refute.md for their meaning).", sampled))
    tables.append(buckets_table(att, sampled))
    tables.append(overlap_table(solved_sets(att)))
    distinct = distinct_table(att)
    if distinct is not None:
        tables.append(distinct)
    rs = randsearch_table(att, expected, sampled)
    if rs is not None:
        tables.append(rs)
    if (config.get("options") or {}).get("filter"):
        tables.append(filter_table(att, ids))
    return tables


def compare_runs(loaded: list[tuple[str, Manifest, dict[str, pd.DataFrame]]]) -> list[Table]:
    """Success, overlap, distinct invalidated submissions and pooled rating buckets across
    runs (e.g. one run per strategy): rows keyed by model × arm."""
    frames = []
    for name, _manifest, fr in loaded:
        att = attempts(fr)
        att["run"] = name
        frames.append(att)
    att = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    ids = set(att["instance_id"]) if len(att) else set()
    tables = [success_table(att, len(ids), key="refute_compare_success")]
    tables.append(overlap_table(solved_sets(att), key="refute_compare_overlap"))
    distinct = distinct_table(att, key="refute_compare_distinct") if len(att) else None
    if distinct is not None:
        tables.append(distinct)
    if len(att):
        tables.append(buckets_table(att, sampled=True, key="refute_compare_buckets", pooled=True))
    return tables
