"""A `RegressReport` as markdown (terminal, cron mail) and as an HTML fragment (`launch report`).

Order follows BenchExec's table-generator diff view, most serious first: the exit status
and configuration differences (so a change is attributable before it is read), then
per stage the counts, then the instance list grouped by kind — TRUE↔FALSE flips first —
then table cells whose change is a regression, then everything else that changed.
"""

from __future__ import annotations

import html
from typing import Any

from .regress import (
    IMPROVEMENT_KINDS,
    KINDS,
    NEUTRAL_KINDS,
    REGRESSION_KINDS,
    CellChange,
    RecordChange,
    RegressReport,
)

KIND_TITLES = {
    "flip": "Verdict flips (decided → another decided verdict, e.g. TRUE ↔ FALSE)",
    "lost": "Decided → undecided",
    "new_error": "New errors / crashes",
    "missing": "Records missing in CURRENT",
    "slower": "Slower (beyond the time factor, or the instance's own spread over the nights)",
    "gained": "Undecided → decided",
    "fixed_error": "Errors gone",
    "faster": "Faster (beyond the time factor)",
    "flapping": "Flapping timeouts (near the time limit on both sides; not counted)",
    "noisy": "Slower within the instance's own spread, from a retried shard, or re-timed within the rule (not counted)",
    "changed": "Other verdict changes (not counted)",
    "new_record": "Records only in CURRENT (not counted)",
}
MAX_LISTED = 200  # per kind; the JSON output always has them all


def _fmt(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _key(c: RecordChange) -> str:
    return ", ".join(f"{k}={_fmt(v)}" for k, v in c.key.items())


def headline(r: RegressReport) -> str:
    if r.refused:
        return f"NOT COMPARABLE: {r.refused}"
    n, m = len(r.regressions), len(r.cell_regressions)
    if not n and not m:
        return "no regressions"
    return f"REGRESSIONS: {n} instance record(s), {m} table cell(s)"


def _md_escape(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def to_markdown(r: RegressReport) -> str:
    lines = [f"# launch regress: {r.base.get('run_id')} → {r.current.get('run_id')}", "",
             f"**{headline(r)}** (exit {r.exit_code})", "",
             f"- BASE: `{r.base.get('run_dir')}` ({r.base.get('created')}, {r.base.get('code_version')})",
             f"- CURRENT: `{r.current.get('run_dir')}` ({r.current.get('created')}, "
             f"{r.current.get('code_version')})", ""]
    lines += ["## Configuration differences", ""]
    if r.config_diff:
        lines += ["| field | BASE | CURRENT |", "|---|---|---|"]
        lines += [f"| {_md_escape(k)} | {_md_escape(b)} | {_md_escape(c)} |" for k, b, c in r.config_diff]
    else:
        lines.append("none")
    lines.append("")
    if r.refused:
        return "\n".join(lines) + "\n"
    lines += ["## Per stage", "",
              "| stage | compared | same | " + " | ".join(KINDS) + " | not in both plans |",
              "|---|---|---|" + "---|" * len(KINDS) + "---|"]
    for s in r.stages:
        lines.append(f"| {s.stage} | {s.compared} | {s.same} | "
                     + " | ".join(str(s.counts.get(k, 0)) for k in KINDS)
                     + f" | {s.not_in_both_plans} |")
    lines.append("")
    for kind in (*REGRESSION_KINDS, *IMPROVEMENT_KINDS, *NEUTRAL_KINDS):
        items = [c for c in r.records if c.kind == kind]
        if not items:
            continue
        keyed = any(c.key for c in items)  # a stage without record_key: no key column
        lines += [f"## {KIND_TITLES[kind]}: {len(items)}", "",
                  "| stage | instance |" + (" key |" if keyed else "") + " BASE verdict | CURRENT verdict | "
                  "BASE time (s) | CURRENT time (s) | limits (s) | note |",
                  "|---|---|" + ("---|" if keyed else "") + "---|---|---|---|---|---|"]
        for c in items[:MAX_LISTED]:
            lines.append(f"| {c.stage} | {c.instance_id} |" + (f" {_key(c)} |" if keyed else "")
                         + f" {_fmt(c.base_verdict)} | {_fmt(c.current_verdict)} | {_fmt(c.base_time_s)} | "
                         f"{_fmt(c.current_time_s)} | {_fmt(c.base_limit_s)} / {_fmt(c.current_limit_s)} | "
                         f"{_md_escape(c.note)} |")
        if len(items) > MAX_LISTED:
            lines.append(f"\n… {len(items) - MAX_LISTED} more (see the JSON output)")
        lines.append("")
    lines += _cells_md("Table cells: regressions", r.cell_regressions)
    lines += _cells_md("Table cells: other changes", [c for c in r.cells if c.kind != "regression"])
    if r.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in r.notes] + [""]
    th = r.thresholds
    lines += [f"Thresholds: time factor {th['time_factor']}, min time {th['min_time_s']} s, near limit "
              f"{th['near_limit']}, alpha {th['alpha']}, metric tolerance {th['metric_tolerance']}."]
    return "\n".join(lines) + "\n"


def _cells_md(title: str, cells: list[CellChange]) -> list[str]:
    if not cells:
        return []
    out = [f"## {title}: {len(cells)}", "",
           "| table | row | metric | BASE | CURRENT | change | test | p | verdict | note |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for c in cells[:MAX_LISTED]:
        row = ", ".join(f"{k}={_fmt(v)}" for k, v in c.row.items())
        out.append(f"| {c.table} | {_md_escape(row)} | {c.metric} | {_fmt(c.base)} | {_fmt(c.current)} | "
                   f"{_fmt(c.delta)}{(' ' + c.unit) if c.unit else ''} | {c.test or '–'} | "
                   f"{_fmt(c.p_value)} | {c.kind} | {_md_escape(c.note)} |")
    return out + [""]


def _table(head: list[str], rows: list[list[str]], cls: str = "") -> str:
    h = "".join(f"<th>{html.escape(x)}</th>" for x in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(x)}</td>" for x in row) + "</tr>" for row in rows)
    return f'<table class="{cls}"><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>\n'


def to_html(r: RegressReport) -> str:
    """The regress summary for the report page (tables only; no script)."""
    status = "bad" if r.exit_code else "good"
    parts = [f'<p class="{status}"><strong>{html.escape(headline(r))}</strong> '
             f"(BASE {html.escape(r.base.get('run_id', ''))} → CURRENT "
             f"{html.escape(r.current.get('run_id', ''))})</p>\n", "<h4>Configuration differences</h4>\n"]
    parts.append(_table(["field", "BASE", "CURRENT"], [list(x) for x in r.config_diff])
                 if r.config_diff else "<p>none</p>\n")
    if r.refused:
        return "".join(parts)
    parts.append("<h4>Per stage</h4>\n")
    parts.append(_table(["stage", "compared", "same", *KINDS],
                        [[s.stage, str(s.compared), str(s.same), *[str(s.counts.get(k, 0)) for k in KINDS]]
                         for s in r.stages]))
    for kind in (*REGRESSION_KINDS, *IMPROVEMENT_KINDS, "flapping"):
        items = [c for c in r.records if c.kind == kind]
        if items:
            parts.append(f"<h4>{html.escape(KIND_TITLES[kind])}: {len(items)}</h4>\n")
            keyed = any(c.key for c in items)
            parts.append(_table(["stage", "instance", *(["key"] if keyed else []), "BASE", "CURRENT",
                                 "BASE time (s)", "CURRENT time (s)", "note"],
                                [[c.stage, c.instance_id, *([_key(c)] if keyed else []), _fmt(c.base_verdict),
                                  _fmt(c.current_verdict), _fmt(c.base_time_s), _fmt(c.current_time_s), c.note]
                                 for c in items[:MAX_LISTED]]))
    changed = [c for c in r.cells if c.kind in ("regression", "improvement", "noise")]
    if changed:
        parts.append("<h4>Table cells (sampled metrics, tested)</h4>\n")
        parts.append(_table(["table", "row", "metric", "BASE", "CURRENT", "test", "p", "verdict"],
                            [[c.table, ", ".join(f"{k}={_fmt(v)}" for k, v in c.row.items()), c.metric,
                              _fmt(c.base), _fmt(c.current), c.test or "–", _fmt(c.p_value), c.kind]
                             for c in changed[:MAX_LISTED]]))
    return "".join(parts)
