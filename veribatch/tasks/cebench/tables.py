"""CE-Bench tables from a run's records (reads only the frames `launch aggregate` hands in).

Build runs (stages collect, label):

- the built dataset is written to ``RUN/dataset/`` (`cebench_dataset`: parquet, `cebench_card`:
  the card);
- ``cebench_fig2_categories``: counts per category × label, decision rate, the paper's beside;
- ``cebench_fig3_per_program``: counterexamples per program (labelled set);
- ``cebench_table1_extremal``: extremal-value usage of UNSAT_Pre states, KNOWN vs UNKNOWN;
- ``cebench_skips``: named skips by kind;
- ``cebench_reference``: the reference rows on the labelled set (the labelling verifier,
  always-GENUINE, always-SPURIOUS) overall and per category — what an accuracy means.

Evaluation runs (stages [generate,] judge) — every table has the reference rows beside
the model:

- ``cebench_rq1_models`` (Table 2/3): correct, accuracy, unparsable answers, avg time;
- ``cebench_rq3_categories`` (Table 4): accuracy per category;
- ``cebench_rq4_bias`` (Table 5): genuine→spurious and spurious→genuine errors per
  category, genuine recall, precision, F1, balanced accuracy.

RQ2 (per strategy) compares runs: `compare_runs` (``launch cebench compare RUN...``).
An answer without a label counts as wrong in accuracy and is counted in ``unparsable``;
in RQ4 it is neither a G→S nor an S→G error but lowers the recalls.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from veribatch.aggregate.table import Metric, Table
from veribatch.rundir.instances import planned_instances
from veribatch.rundir.manifest import Manifest
from veribatch.tasks.cebench import dataset as cebench_dataset
from veribatch.tasks.cebench.card import PAPER_NAMES, card_markdown, make_card

CATEGORIES = ("SAT_Pre", "UNSAT_Pre", "Inductive")  # the paper's table order
REFERENCE_ARMS = ("verifier", "always-GENUINE", "always-SPURIOUS")


# ------------------------------------------------------------------ metrics


def confusion(labels: list[str], predicted: list[str | None]) -> dict[str, int]:
    """Counts with GENUINE as the positive class; a None prediction is unparsable."""
    c = {"genuine": 0, "spurious": 0, "tp": 0, "g2s": 0, "g_unparsable": 0, "tn": 0, "s2g": 0,
         "s_unparsable": 0}
    for truth, pred in zip(labels, predicted, strict=True):
        if truth == "GENUINE":
            c["genuine"] += 1
            c["tp" if pred == "GENUINE" else "g2s" if pred == "SPURIOUS" else "g_unparsable"] += 1
        else:
            c["spurious"] += 1
            c["tn" if pred == "SPURIOUS" else "s2g" if pred == "GENUINE" else "s_unparsable"] += 1
    return c


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def bias_metrics(c: dict[str, int]) -> dict[str, float | None]:
    """§4.4's figures as fractions (None where undefined): genuine recall = TP / genuine,
    precision = TP / (TP + S→G), F1 their harmonic mean, spurious recall = TN / spurious,
    balanced accuracy = mean of the two recalls — undefined (None) when either class is
    absent, as in every SAT_Pre row: the mean of one recall would pass for a balanced figure
    (always-SPURIOUS would score 100), accuracy = (TP + TN) / all."""
    recall = _ratio(c["tp"], c["genuine"])
    precision = _ratio(c["tp"], c["tp"] + c["s2g"])
    spurious_recall = _ratio(c["tn"], c["spurious"])
    f1 = (2 * precision * recall / (precision + recall)) if precision and recall else (
        0.0 if precision is not None and recall is not None else None)
    return {
        "genuine_recall": recall, "spurious_recall": spurious_recall, "precision": precision, "f1": f1,
        "balanced_accuracy": (recall + spurious_recall) / 2
        if recall is not None and spurious_recall is not None else None,
        "accuracy": _ratio(c["tp"] + c["tn"], c["genuine"] + c["spurious"]),
        "g2s_rate": _ratio(c["g2s"], c["genuine"]), "s2g_rate": _ratio(c["s2g"], c["spurious"]),
    }


def _p(x: float | None) -> float | None:
    return round(100.0 * x, 2) if x is not None else None


# ------------------------------------------------------------------ helpers


def _expected_ids(run_dir: Path, manifest: Manifest) -> list[str]:
    return [row["id"] for row in planned_instances(run_dir, manifest) or ()]


def _col(df: pd.DataFrame, name: str, default: Any = None) -> pd.Series:
    return df[name] if name in df else pd.Series([default] * len(df), index=df.index, dtype=object)


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return df.astype(object).where(df.notna(), None).to_dict("records") if len(df) else []


def _rate(n_column: str = "covered", sampled: bool = True, higher: bool = True) -> Metric:
    return Metric(kind="rate", n_column=n_column, sampled=sampled, higher_is_better=higher, unit="%")


# ------------------------------------------------------------------ build runs


def dataset_rows(collect: pd.DataFrame, label: pd.DataFrame) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(dataset rows, program records with parsed skips) from the two build stages."""
    programs = [r for r in _records(collect) if r.get("kind") == "program"]
    by_program = {p["instance_id"]: p for p in programs}
    collected = {(r["instance_id"], r["ce_id"]): r for r in _records(collect) if r.get("kind") == "counterexample"}
    rows = []
    for lab in _records(label):
        if lab.get("kind") != "counterexample":
            continue
        ce = collected.get((lab["instance_id"], lab["ce_id"]))
        prog = by_program.get(lab["instance_id"], {})
        if ce is None:
            continue
        rows.append({
            "uid": lab["ce_id"], "program": ce["program"], "category": ce["category"], "site": lab["site"],
            "state_json": ce["state_json"], "state_c": ce["state_c"], "origins_json": ce["origins_json"],
            "bounded_by_type": bool(ce["bounded_by_type"]), "n_vars": int(ce["n_vars"]),
            "n_extremal": int(ce["n_extremal"]), "extremal_usage": ce["extremal_usage"],
            "label": lab["label"], "verifier": lab["verifier"], "verifier_version": lab["verifier_version"],
            "verifier_status": lab["verifier_status"], "verifier_reason": lab.get("verifier_reason"),
            "verifier_time_s": float(lab["verifier_time_s"]), "verifier_cpu_s": float(lab["verifier_cpu_s"]),
            "budget_s": float(lab["budget_s"]), "evidence": lab["evidence"], "evidence_json": lab["evidence_json"],
            "program_text": prog.get("program_text"), "prompt_program": lab["prompt_program"],
            "instrumented": lab["instrumented"], "precondition": prog.get("precondition"),
            "guard": prog.get("guard"), "invariant": prog.get("final_invariant"), "log_file": prog.get("log_file"),
        })
    rows.sort(key=lambda r: r["uid"])
    for p in programs:
        p["skips"] = json.loads(p.get("skips_json") or "[]")
    return rows, programs


def build_dataset(run_dir: Path, manifest: Manifest,
                  stages: dict[str, pd.DataFrame]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Write ``RUN/dataset/`` from the build's records; returns the card and the rows."""
    config = manifest.config
    collect, label = stages.get("collect", pd.DataFrame()), stages.get("label", pd.DataFrame())
    rows, programs = dataset_rows(collect, label)
    expected = _expected_ids(run_dir, manifest)
    labelled = set(label["instance_id"]) if len(label) else set()
    missing = [i for i in expected if i not in labelled]
    meta = {
        "source": config.get("dataset"), "source_hash": config.get("dataset_hash"),
        "run_id": manifest.run_id, "code_version": manifest.code_version,
        "verifier": config.get("verifier"), "verifier_version": config.get("verifier_version"),
        "budget_s": (config.get("options") or {}).get("budget_s"),
        "collection": (config.get("versions") or {}).get("collection"),
        "inductive_rule": (config.get("options") or {}).get("inductive_rule", "consecution"),
        "precondition": (config.get("options") or {}).get("precondition", "exact"),
        "omt_variables": (config.get("options") or {}).get("omt_variables", "visible"),
        "limit": config.get("limit"),
        "complete": not missing, "missing_programs": len(missing),
    }
    card = make_card(rows, programs, meta)
    cebench_dataset.write(run_dir / "dataset", rows, card, card_markdown(card))
    return card, rows


def card_tables(card: dict[str, Any], covered: int, missing: int) -> list[Table]:
    """Figure 2, Figure 3, Table 1 and the skips, from a card (also `launch cebench card`)."""
    paper = card["paper"]
    fig2 = []
    for c in (*CATEGORIES, "all"):
        n = card["counts"][c] if c != "all" else {**card["totals"], "total": card["totals"]["before_labelling"]}
        p = paper["counts"][c] if c != "all" else {"GENUINE": paper["genuine"], "SPURIOUS": paper["spurious"],
                                                    "UNKNOWN": paper["unknown"], "total": paper["total_before"]}
        fig2.append({"category": c, "paper_name": PAPER_NAMES.get(c, "Overall"), "GENUINE": n["GENUINE"],
                     "SPURIOUS": n["SPURIOUS"], "UNKNOWN": n["UNKNOWN"], "total": n["total"],
                     "decided_pct": card["decision_rate"][c]["ours"],
                     "paper_GENUINE": p["GENUINE"], "paper_SPURIOUS": p["SPURIOUS"], "paper_UNKNOWN": p["UNKNOWN"],
                     "paper_total": p["total"], "paper_decided_pct": card["decision_rate"][c]["paper"],
                     "covered": covered, "missing": missing})
    count = Metric(kind="count", sampled=False)
    tables = [Table(
        key="cebench_fig2_categories",
        title=f"Figure 2: counterexamples per category and label ({card['version']}, {card.get('verifier')})",
        frame=pd.DataFrame(fig2), index=("category",),
        metrics={"GENUINE": count, "SPURIOUS": count, "UNKNOWN": count, "total": count,
                 "decided_pct": Metric(kind="value", unit="%")},
        caption=("Labels: verifier FALSE ⇒ GENUINE, TRUE ⇒ SPURIOUS, else UNKNOWN (excluded from evaluation). "
                 "decided % = (GENUINE + SPURIOUS) / total. paper_*: the paper's Figure 2 (UAutomizer, 100 s). "
                 "covered/missing: programs of the build with/without labels."),
    )]
    hist = [{"counterexamples": int(k), "programs": v, "covered": covered, "missing": missing}
            for k, v in card["per_program_histogram"].items()]
    tables.append(Table(
        key="cebench_fig3_per_program", title="Figure 3: labelled counterexamples per program",
        frame=pd.DataFrame(hist, columns=["counterexamples", "programs", "covered", "missing"]),
        index=("counterexamples",), metrics={"programs": count},
        caption=f"Programs by their number of GENUINE/SPURIOUS counterexamples. Paper: {paper['figure3']}."))
    t1 = []
    for u in ("all", "one", "multiple", "none"):
        t1.append({"extremal_values": u, "KNOWN_pct": card["table1_extremal_usage"]["KNOWN"][u],
                   "UNKNOWN_pct": card["table1_extremal_usage"]["UNKNOWN"][u],
                   "paper_KNOWN_pct": paper["table1"]["KNOWN"][u], "paper_UNKNOWN_pct": paper["table1"]["UNKNOWN"][u],
                   "covered": card["table1_extremal_usage"]["KNOWN"]["total"] + card["table1_extremal_usage"]["UNKNOWN"]["total"],
                   "missing": missing})
    tables.append(Table(
        key="cebench_table1_extremal", title="Table 1: extremal-value usage in UNSAT_Pre, KNOWN vs UNKNOWN",
        frame=pd.DataFrame(t1), index=("extremal_values",),
        metrics={"KNOWN_pct": Metric(kind="value", unit="%"), "UNKNOWN_pct": Metric(kind="value", unit="%")},
        caption=(f"KNOWN = GENUINE or SPURIOUS ({card['table1_extremal_usage']['KNOWN']['total']} cases), UNKNOWN "
                 f"({card['table1_extremal_usage']['UNKNOWN']['total']}). A value is extremal when it is a bound of "
                 "the variable's C type. covered = UNSAT_Pre counterexamples.")))
    skips = [{"kind": k, "count": v, "covered": covered, "missing": missing} for k, v in card["skips"]["by_kind"].items()]
    tables.append(Table(
        key="cebench_skips", title="Named skips during collection (by kind)",
        frame=pd.DataFrame(skips, columns=["kind", "count", "covered", "missing"]), index=("kind",),
        metrics={"count": Metric(kind="count", sampled=False, higher_is_better=False)},
        caption="Each skip names its file and line in the dataset card (card.json, skips.list)."))
    return tables


def _arm_rows(frame: pd.DataFrame, group: tuple[str, ...], expected: int | None) -> pd.DataFrame:
    """RQ1/RQ3 rows: correct, accuracy, unparsable, avg time per group."""
    out = []
    for key, g in frame.groupby(list(group), dropna=False, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        times = pd.to_numeric(_col(g, "time_s"), errors="coerce")
        correct = int(_col(g, "correct", False).fillna(False).astype(bool).sum())
        row = dict(zip(group, key, strict=True))
        row.update({"covered": len(g), "correct": correct,
                    "accuracy": round(100.0 * correct / len(g), 2) if len(g) else None,
                    "unparsable": int(_col(g, "predicted").isna().sum()),
                    # answers cut by max_tokens (a reasoning model's budget too small), apart
                    "truncated": int((_col(g, "finish_reason") == "length").sum()),
                    "avg_time_s": round(float(times.mean()), 3) if times.notna().any() else None})
        if expected is not None:
            row["missing"] = expected - len(g)
        out.append(row)
    return pd.DataFrame(out)


def _samples(frame: pd.DataFrame, index: tuple[str, ...]) -> pd.DataFrame:
    cols = [c for c in (*index, "instance_id") if c in frame]
    s = frame[cols].copy()
    s["avg_time_s"] = pd.to_numeric(_col(frame, "time_s"), errors="coerce")
    return s


def reference_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The judge stage's reference records, from dataset rows (build runs have no judge)."""
    out = []
    for r in rows:
        if r["label"] == "UNKNOWN":
            continue
        for arm in REFERENCE_ARMS:
            pred = r["label"] if arm == "verifier" else arm.split("-", 1)[1]
            out.append({"instance_id": r["uid"], "arm": arm, "model": arm, "strategy": "-", "category": r["category"],
                        "label": r["label"], "predicted": pred, "correct": pred == r["label"],
                        "time_s": r["verifier_time_s"] if arm == "verifier" else 0.0})
    return pd.DataFrame(out)


def _judge_tables(judge: pd.DataFrame, expected: int, version: str) -> list[Table]:
    if judge.empty:
        judge = pd.DataFrame(columns=["instance_id", "arm", "model", "strategy", "category", "label",
                                      "predicted", "correct", "time_s"])
    idx1 = ("model", "arm", "strategy")
    rq1 = _arm_rows(judge, idx1, expected)
    acc = _rate()
    time_m = Metric(kind="mean", sampled=True, higher_is_better=False, unit="s")
    tables = [Table(
        key="cebench_rq1_models", title=f"RQ1 (Table 2): counterexample validation per model ({version})",
        frame=rq1, index=idx1,
        metrics={"accuracy": acc, "correct": Metric(kind="count", sampled=True),
                 "unparsable": Metric(kind="count", sampled=True, higher_is_better=False),
                 "truncated": Metric(kind="count", sampled=True, higher_is_better=False), "avg_time_s": time_m},
        samples=_samples(judge, idx1),
        caption=("accuracy = correct / covered; an answer without a GENUINE/SPURIOUS label is wrong and counted in "
                 "unparsable. truncated: answers cut at max_tokens (finish_reason length), labelled or not — "
                 "raise --max-tokens when it is not 0. avg_time_s: per-request generation time (reference rows: the verifier's labelling time; "
                 "always-* 0). Reference rows need no model: the labelling verifier is right by definition on the "
                 "labelled set; always-GENUINE/always-SPURIOUS give the label balance."))]
    rows3 = []
    for (model, arm), g in judge.groupby(["model", "arm"], sort=False):
        part = _arm_rows(g, ("category",), None)
        part = part.set_index("category").reindex([c for c in CATEGORIES if c in set(g["category"])]).reset_index()
        overall = _arm_rows(g.assign(category="Overall"), ("category",), None)
        for r in [*_records(part), *_records(overall)]:
            rows3.append({"model": model, "arm": arm, **r,
                          "paper_name": PAPER_NAMES.get(r["category"], "Overall")})
    idx3 = ("model", "arm", "category")
    tables.append(Table(
        key="cebench_rq3_categories", title="RQ3 (Table 4): accuracy per counterexample category",
        frame=pd.DataFrame(rows3), index=idx3,
        metrics={"accuracy": acc, "correct": Metric(kind="count", sampled=True), "avg_time_s": time_m},
        samples=_samples(judge, idx3),
        caption="correct/covered per category (Overall: all); paper_name: the paper's category name."))
    rows4 = []
    for (model, arm), g in judge.groupby(["model", "arm"], sort=False):
        for cat in [*[c for c in CATEGORIES if c in set(g["category"])], "Overall"]:
            part = g if cat == "Overall" else g[g["category"] == cat]
            c = confusion(list(part["label"]), [p if isinstance(p, str) else None for p in part["predicted"]])
            m = bias_metrics(c)
            rows4.append({
                "model": model, "arm": arm, "category": cat, "covered": len(part),
                "genuine": c["genuine"], "g2s_errors": c["g2s"], "g2s_pct": _p(m["g2s_rate"]),
                "spurious": c["spurious"], "s2g_errors": c["s2g"], "s2g_pct": _p(m["s2g_rate"]),
                "unparsable": c["g_unparsable"] + c["s_unparsable"],
                "genuine_recall": _p(m["genuine_recall"]), "spurious_recall": _p(m["spurious_recall"]),
                "precision": _p(m["precision"]), "f1": _p(m["f1"]), "balanced_accuracy": _p(m["balanced_accuracy"]),
            })
    v = Metric(kind="value", sampled=True, unit="%")
    tables.append(Table(
        key="cebench_rq4_bias", title="RQ4 (Table 5): error tendency (genuineness bias)",
        frame=pd.DataFrame(rows4), index=idx3,
        metrics={"g2s_pct": Metric(kind="rate", n_column="genuine", sampled=True, higher_is_better=False, unit="%"),
                 "s2g_pct": Metric(kind="rate", n_column="spurious", sampled=True, higher_is_better=False, unit="%"),
                 "genuine_recall": Metric(kind="rate", n_column="genuine", sampled=True, unit="%"),
                 "precision": v, "f1": v, "balanced_accuracy": v},
        caption=("GENUINE is the positive class. g2s: genuine labelled SPURIOUS (errors/genuine); s2g: spurious "
                 "labelled GENUINE (errors/spurious); unparsable answers are neither but lower the recalls; "
                 "balanced accuracy is empty where a class is absent (SAT_Pre has no SPURIOUS state). "
                 "precision = TP/(TP+s2g), F1 = harmonic mean of precision and genuine recall, balanced accuracy = "
                 "mean of genuine and spurious recall.")))
    return tables


def build_tables(run_dir: Path, manifest: Manifest, stages: dict[str, pd.DataFrame]) -> list[Table]:
    config = manifest.config
    mode = (config.get("options") or {}).get("mode")
    expected = _expected_ids(run_dir, manifest)
    if mode == "build":
        card, rows = build_dataset(run_dir, manifest, stages)
        label = stages.get("label", pd.DataFrame())
        covered = int(label["instance_id"].nunique()) if len(label) else 0
        tables = card_tables(card, covered, len(expected) - covered)
        ref = reference_frame(rows)
        labelled = sum(1 for r in rows if r["label"] != "UNKNOWN")
        for t in _judge_tables(ref, labelled, card["version"]):
            t.key = t.key.replace("cebench_", "cebench_reference_")
            t.title = "Reference rows on the built dataset — " + t.title
            tables.append(t)
        return tables
    judge = stages.get("judge", pd.DataFrame())
    version = str(config.get("dataset", "")).rstrip("/").split("/")[-1]
    return _judge_tables(judge, len(expected), f"dataset {version}, hash {str(config.get('dataset_hash'))[:12]}")


def compare_runs(runs: list[tuple[str, Manifest, pd.DataFrame]]) -> list[Table]:
    """RQ1/RQ2 across evaluation runs: one row per run × (model, arm, strategy).  `runs` holds
    (label, manifest, judge frame); reference rows are shown once (from the first run)."""
    rows = []
    hashes = set()
    for i, (label, manifest, judge) in enumerate(runs):
        hashes.add(manifest.config.get("dataset_hash"))
        part = judge if i == 0 else judge[~judge["arm"].isin(REFERENCE_ARMS)]
        for r in _records(_arm_rows(part, ("model", "arm", "strategy"), None)):
            rows.append({"run": label, "run_id": manifest.run_id, **r})
    caption = "Columns as in RQ1. Runs on different datasets are not comparable." if len(hashes) > 1 else \
        "Columns as in RQ1; all runs evaluate the same dataset (same content hash)."
    idx = ("run", "model", "arm", "strategy")
    frame = pd.DataFrame(rows)
    return [Table(key="cebench_rq2_compare", title="RQ1/RQ2 (Tables 2–3): runs side by side (models, strategies)",
                  frame=frame, index=idx,
                  metrics={"accuracy": _rate(), "correct": Metric(kind="count", sampled=True),
                           "avg_time_s": Metric(kind="mean", sampled=True, higher_is_better=False, unit="s")},
                  caption=caption + (" WARNING: more than one dataset hash." if len(hashes) > 1 else ""))]
