"""The dataset card: what a build produced, beside what the paper reports (§3.3).

Statistics (all from the build's records):

* counts per category × label and the verifier's decision rate per category (Figure 2);
* counterexamples per program in the labelled benchmark (Figure 3), and programs with none;
* extremal-value usage of UNSAT_Pre states, KNOWN vs UNKNOWN (Table 1): a variable is
  *extremal* when its value is a bound of its C type (INT_MAX, INT_MIN, UINT_MAX, 0 for
  unsigned) — the values an unbounded objective is pushed to;
* named skips by kind (programs, candidates and objectives that gave no state, and why).

`evidence` says what the labels rest on, from the rows' ``evidence`` column (a replayed
trace, a re-checked proof, a verdict trusted as reported) rather than from the labelling
tool's name; `differences` explains, where it can, why our figures differ from the paper's.
Written at aggregation time (`aggregate.cebench.build_dataset`), from records alone.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from veribatch.tasks.cebench.dataset import ALL_LABELS, SCHEMA_VERSION, content_hash, version_of

# §3.3, Figure 2 and Tables 1, 4, 5 of the paper.  Its labelling verifier is one of its
# facts: `labelling_verifier` is that tool's name here (``--verifier``), compared by name.
PAPER: dict[str, Any] = {
    "verifier": "Ultimate Automizer (100 s)",
    "labelling_verifier": "uautomizer", "labelling_verifier_title": "Ultimate Automizer",
    "counts": {
        "Inductive": {"GENUINE": 103, "SPURIOUS": 395, "UNKNOWN": 117, "total": 615},
        "UNSAT_Pre": {"GENUINE": 74, "SPURIOUS": 516, "UNKNOWN": 401, "total": 991},
        "SAT_Pre": {"GENUINE": 848, "SPURIOUS": 0, "UNKNOWN": 34, "total": 882},
    },
    "total_before": 2488, "total_after": 1936, "genuine": 1025, "spurious": 911, "unknown": 552,
    "programs": 316, "programs_with_counterexamples": 300, "programs_without": 16,
    "lam4inv_verified": 309,
    "figure3": "mode: 40 programs with 5 counterexamples, then 33 with 2 and 33 with 4; most 2–8; "
               "a few 18–26; 16 programs with none",
    "table1": {  # % of UNSAT_Pre cases
        "KNOWN": {"total": 590, "all": 14.6, "one": 43.1, "multiple": 29.8, "none": 12.5},
        "UNKNOWN": {"total": 401, "all": 9.5, "one": 36.2, "multiple": 27.2, "none": 27.2},
    },
}
USAGE = ("all", "one", "multiple", "none")
# The categories in the order of the paper's Figure 2, and their names there.
CATEGORIES = tuple(PAPER["counts"])
PAPER_NAMES = {"Inductive": "Inductive_CEs", "UNSAT_Pre": "OMT_UNSAT_Pre_CEs", "SAT_Pre": "OMT_SAT_Pre_CEs"}
# What an ``evidence`` value (its part before ``:``) means: the label vocabulary of
# `tasks.cebench.label`, as the dataset's rows carry it.
EVIDENCE = {
    "replayed-trace": "a concrete input sequence gcc replayed into reach_error",
    "checked-proof": "a proof re-checked before it was trusted",
    "trusted-verdict": "the verifier's verdict alone, trusted as reported (as the paper does)",
    "none": "no verdict, or one without its evidence",
}


def _pct(a: float, b: float) -> float | None:
    return round(100.0 * a / b, 1) if b else None


def make_card(rows: list[dict[str, Any]], programs: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    """`rows`: one per counterexample (dataset schema); `programs`: the collect stage's program
    records; `meta`: source, build run, verifier, completeness (copied into the card)."""
    digest = content_hash(rows)
    counts = {c: {lab: 0 for lab in ALL_LABELS} for c in CATEGORIES}
    for r in rows:
        counts[r["category"]][r["label"]] += 1
    for c in CATEGORIES:
        counts[c]["total"] = sum(counts[c][lab] for lab in ALL_LABELS)
    decision = {}
    for c in CATEGORIES:
        ours = counts[c]["total"] - counts[c]["UNKNOWN"]
        p = PAPER["counts"][c]
        decision[c] = {"ours": _pct(ours, counts[c]["total"]),
                       "paper": _pct(p["total"] - p["UNKNOWN"], p["total"])}
    totals = {lab: sum(counts[c][lab] for c in CATEGORIES) for lab in ALL_LABELS}
    total = sum(totals.values())
    decision["all"] = {"ours": _pct(total - totals["UNKNOWN"], total),
                       "paper": _pct(PAPER["total_after"], PAPER["total_before"])}
    per_program = Counter(r["program"] for r in rows if r["label"] != "UNKNOWN")
    collected = Counter(r["program"] for r in rows)  # before labelling (UNKNOWN included)
    program_names = [p["program"] for p in programs]
    histogram = Counter(per_program.get(name, 0) for name in program_names)
    table1: dict[str, dict[str, Any]] = {}
    unsat = [r for r in rows if r["category"] == "UNSAT_Pre"]
    for group, members in (("KNOWN", [r for r in unsat if r["label"] != "UNKNOWN"]),
                           ("UNKNOWN", [r for r in unsat if r["label"] == "UNKNOWN"])):
        usage = Counter(r["extremal_usage"] for r in members)
        table1[group] = {"total": len(members), **{u: _pct(usage[u], len(members)) for u in USAGE}}
    skips: list[dict[str, Any]] = []
    for p in programs:
        skips += p.get("skips", [])
    status = Counter(p.get("status") for p in programs)
    card: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "version": version_of(digest),
        "content_sha256": digest,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        **meta,
        "programs": {
            "files": len(programs),
            "by_status": dict(sorted(status.items(), key=lambda kv: str(kv[0]))),
            "with_final_invariant": sum(1 for p in programs if p.get("final_invariant")),
            "with_counterexamples": sum(1 for v in per_program.values() if v),
            # like the paper's "16 programs with none": after UNKNOWN states are removed
            "without_counterexamples": histogram.get(0, 0),
            "without_counterexamples_before_labelling": sum(1 for n in program_names if not collected.get(n)),
        },
        "counts": counts,
        "totals": {**totals, "before_labelling": total, "after_labelling": total - totals["UNKNOWN"]},
        "decision_rate": decision,
        "per_program_histogram": {str(k): v for k, v in sorted(histogram.items())},
        "table1_extremal_usage": table1,
        "skips": {"by_kind": dict(Counter(s.get("kind", "?") for s in skips).most_common()),
                  "count": len(skips), "list": skips},
        "evidence": evidence_counts(rows),
        "paper": PAPER,
    }
    card["differences"] = differences(card)
    return card


def evidence_counts(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per label, how many rows rest on which ``evidence``; and how many verdicts (TRUE or
    FALSE) were left UNKNOWN because their evidence was missing or did not check."""
    by_label: dict[str, dict[str, int]] = {}
    for r in rows:
        kinds = by_label.setdefault(str(r["label"]), {})
        kinds[str(r.get("evidence") or "none")] = kinds.get(str(r.get("evidence") or "none"), 0) + 1
    untrusted = sum(1 for r in rows if r["label"] == "UNKNOWN" and r.get("verifier_status") in ("TRUE", "FALSE"))
    return {"by_label": {lab: dict(sorted(by_label[lab].items())) for lab in ALL_LABELS if lab in by_label},
            "verdicts_not_trusted": untrusted}


def evidence_text(card: dict[str, Any]) -> str:
    """What the labels rest on, said from the rows' ``evidence`` column."""
    ev = card.get("evidence") or {}
    parts = []
    for label, kinds in (ev.get("by_label") or {}).items():
        meanings = {EVIDENCE.get(k.split(":", 1)[0], k) for k in kinds}
        counts = ", ".join(f"{k} {n}" for k, n in kinds.items())
        parts.append(f"{label}: {'; '.join(sorted(meanings))} ({counts})")
    if not parts:
        return "no labelled counterexample"
    untrusted = ev.get("verdicts_not_trusted") or 0
    tail = (f"; {untrusted} verdict(s) came without a trace or proof that checked and were left "
            "UNKNOWN") if untrusted else ""
    return " — ".join(parts) + tail


def differences(card: dict[str, Any]) -> list[str]:
    """What explains the gap to the paper, said with our own numbers where we have them."""
    out = []
    verifier = card.get("verifier", "?")
    if verifier != card["paper"]["labelling_verifier"]:
        out.append(f"Labels come from {verifier}, not from the paper's {card['paper']['verifier']} "
                   "(what each label rests on: the card's evidence). Decision rates differ per category, "
                   "most where reachability needs very long executions (UNSAT_Pre states near INT_MAX, "
                   "reachable only after ~2^31 loop iterations): no trace that long is found within the "
                   "budget, so they stay UNKNOWN.")
    programs = card["programs"]
    if programs["files"] != card["paper"]["programs"]:
        out.append(f"{programs['files']} program files were read; the paper's benchmark has "
                   f"{card['paper']['programs']} (LaM4Inv's folder also holds test.c, which has no log).")
    with_inv = programs["with_final_invariant"]
    out.append(f"{with_inv} programs have a final invariant in the log (the paper: LaM4Inv verified "
               f"{card['paper']['lam4inv_verified']}); only those give OMT counterexamples.")
    kinds = card["skips"]["by_kind"]
    if kinds:
        top = ", ".join(f"{k} {v}" for k, v in list(kinds.items())[:6])
        out.append(f"Named skips ({card['skips']['count']}): {top}. A candidate that is not a C expression "
                   "over the program's variables, or a program outside the solver's C subset (floats), "
                   "gives no state.")
    if card.get("inductive_rule", "consecution") == "consecution":
        out.append("Inductive rule `consecution`: every consecution failure of a raw candidate counts, "
                   "also when its initiation fails; LaM4Inv's own checker stops at the first failing "
                   "check (initiation), so the paper's re-check collects fewer (the default rule `lam4inv`).")
    out.append("Inductive states are re-checked with C semantics (each variable within its type's range, "
               "ILP32), so candidates whose consecution fails only through overflow, or only with "
               "unbounded integers, differ from the paper's Z3 re-check; every raw candidate of the log "
               "is checked once, and states are deduplicated per program and category.")
    if card.get("precondition", "exact") == "lam4inv":
        p_text = ("P is LaM4Inv's textual reading of the code before the loop (extract_preconditions.py's "
                  "rules: misses Code2Inv's `(x = 1);`, nested-parenthesis assumes and negative literals, "
                  "so many programs get an empty P — lossy, chosen to match the paper's counts)")
    else:
        p_text = ("P is the loop-free code before the loop executed symbolically (values and "
                  "assumptions; the paper does not say how its P is written)")
    variables = {"visible": "every variable visible at the loop head (unused ones included)",
                 "invariant": "the variables the final invariant I mentions",
                 "formula": "the variables of the query's formula (I, P and, for SAT_Pre, B)"}
    out.append(f"OMT objectives run over {variables.get(card.get('omt_variables', 'visible'), '?')}, "
               "within C type ranges, each optimal state with the other variables as close to 0 as the "
               "optimum allows (a canonical model: Z3's own choice follows its history); an objective without an integer optimum is pushed to its type's "
               f"bound and marked bounded_by_type. {p_text}; B is the guard with nondeterministic choices "
               "eliminated.")
    return out


def labelled_by(card: dict[str, Any]) -> str:
    """Who decided the labels, said first: a dataset labelled by another verifier than the
    paper's differs from the paper's labels by design, and a reader must not mistake one for
    the other (the paper's labelling verifier is compared by name)."""
    verifier = str(card.get("verifier") or "?")
    who = f"{verifier} {card.get('verifier_version') or ''}".strip()
    paper = card["paper"]
    if verifier == paper["labelling_verifier"]:
        return f"labelled by {who}, {card.get('budget_s')} s per counterexample (the paper's verifier)"
    return (f"labelled by {who}, {card.get('budget_s')} s per counterexample — NOT the paper's "
            f"{paper['labelling_verifier_title']}: labels and decision rates differ by design")


def construction(card: dict[str, Any]) -> str:
    """The construction options that decide which states exist (docs/cebench.md)."""
    rule = card.get("inductive_rule", "consecution")
    pre = card.get("precondition", "exact")
    rules = {"lam4inv": "LaM4Inv's check order (initiation must hold)",
             "consecution": "every consecution failure"}
    pres = {"exact": "exact (symbolic execution of the code before the loop)",
            "lam4inv": "LaM4Inv's textual reading (lossy)"}
    variables = card.get("omt_variables", "visible")
    choices = {"visible": "every variable visible at the loop head",
               "invariant": "the variables of I", "formula": "the variables of the query (I, P, B)"}
    return (f"inductive rule `{rule}` — {rules.get(rule, rule)}; precondition P `{pre}` — "
            f"{pres.get(pre, pre)}; OMT objectives `{variables}` — {choices.get(variables, variables)}")


def card_markdown(card: dict[str, Any]) -> str:
    """The card for people: who labelled it first, figures beside the paper's, then the
    explanations."""
    programs = card["programs"]
    lines = [f"# CE-Bench dataset {card['version']}, {labelled_by(card)}", "",
             f"- content sha256: `{card['content_sha256']}`",
             f"- source: {card.get('source')} (hash `{str(card.get('source_hash', ''))[:12]}`)",
             f"- built by run {card.get('run_id')} with {card.get('verifier')} {card.get('verifier_version')}, "
             f"budget {card.get('budget_s')} s per counterexample",
             f"- construction: {construction(card)}",
             f"- labels rest on (evidence column): {evidence_text(card)}",
             f"- complete: {card.get('complete')}",
             f"- programs without a labelled counterexample (UNKNOWN removed, as the paper's "
             f"{card['paper']['programs_without']}): {programs.get('without_counterexamples')}; "
             f"without any counterexample before labelling: "
             f"{programs.get('without_counterexamples_before_labelling', '?')}", "",
             "## Counterexamples per category and label (Figure 2)", "",
             "| category | paper name | GENUINE | SPURIOUS | UNKNOWN | total | decided % | paper decided % | paper G/S/U/total |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c in CATEGORIES:
        n, p = card["counts"][c], card["paper"]["counts"][c]
        lines.append(f"| {c} | {PAPER_NAMES[c]} | {n['GENUINE']} | {n['SPURIOUS']} | {n['UNKNOWN']} | {n['total']} | "
                     f"{card['decision_rate'][c]['ours']} | {card['decision_rate'][c]['paper']} | "
                     f"{p['GENUINE']}/{p['SPURIOUS']}/{p['UNKNOWN']}/{p['total']} |")
    t = card["totals"]
    lines += [f"| all | | {t['GENUINE']} | {t['SPURIOUS']} | {t['UNKNOWN']} | {t['before_labelling']} | "
              f"{card['decision_rate']['all']['ours']} | {card['decision_rate']['all']['paper']} | "
              f"{card['paper']['genuine']}/{card['paper']['spurious']}/{card['paper']['unknown']}/"
              f"{card['paper']['total_before']} |", "",
              "## Counterexamples per program in the labelled set (Figure 3)", "",
              "| counterexamples | programs |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in card["per_program_histogram"].items()]
    lines += ["", f"Paper: {card['paper']['figure3']}.", "",
              "## Extremal-value usage in UNSAT_Pre (Table 1)", "",
              "| | KNOWN | UNKNOWN | paper KNOWN | paper UNKNOWN |", "|---|---|---|---|---|"]
    t1, p1 = card["table1_extremal_usage"], card["paper"]["table1"]
    lines.append(f"| cases | {t1['KNOWN']['total']} | {t1['UNKNOWN']['total']} | {p1['KNOWN']['total']} | "
                 f"{p1['UNKNOWN']['total']} |")
    for u in USAGE:
        lines.append(f"| {u} extremal (%) | {t1['KNOWN'][u]} | {t1['UNKNOWN'][u]} | {p1['KNOWN'][u]} | {p1['UNKNOWN'][u]} |")
    lines += ["", "## Skips by kind", "", "| kind | count |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in card["skips"]["by_kind"].items()]
    lines += ["", "## Differences from the paper", ""]
    lines += [f"- {d}" for d in card["differences"]]
    return "\n".join(lines) + "\n"
