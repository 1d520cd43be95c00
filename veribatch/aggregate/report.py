"""`launch report RUN... [--history DIR]`: one static, self-contained HTML page.

In reading order — what a reader wants first, what they need to trust it last: the
headline per run (what ran: task, dataset, model or reference arms, strategy, verifier,
instances; coverage; the key figure of each table — its first declared metric per row —
and every plot the task declared), the regress summary when two runs are compared, then
per run every table in full with its caption, trends over nights from the history parquet,
and provenance last (code version, cluster profile, dataset hash, model revision, verifier
image digest, every config field) side by side.  No script, no external file or font:
plots are inline SVG from matplotlib (`aggregate/plots.py`), styles are inline, so the page
works offline and as a mail attachment.
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from veribatch.rundir.manifest import Manifest

from .history import RUN_TABLE, read_history
from .plots import plot_svg, trend_svg
from .provenance import provenance
from .records import load_run
from .regress import RegressReport
from .regress_render import headline
from .regress_render import to_html as regress_html
from .render import _cell, load_tables
from .table import Table

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:1.5rem auto;max-width:1200px;
     padding:0 1rem;color:#1d1d1f;line-height:1.4}
h1{font-size:1.5rem}h2{border-bottom:2px solid #ddd;padding-bottom:.2rem;margin-top:2rem}
h3{margin-bottom:.3rem}table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.85rem}
th,td{border:1px solid #ccc;padding:.2rem .5rem;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;font-variant-numeric:tabular-nums}
.caption{color:#555;font-size:.85rem;max-width:60rem}.coverage{font-size:.85rem;color:#333}
.good{color:#0a6b2c}.bad{color:#a01010}.figure{max-width:100%;height:auto;display:block}
.figures{display:flex;flex-wrap:wrap;gap:1rem}.prov td:first-child{font-weight:600}
nav a{margin-right:1rem}.scroll{overflow-x:auto}.headline li{margin:.15rem 0}
.what{font-size:1rem}
"""
CSP = ("default-src 'none'; script-src 'none'; object-src 'none'; base-uri 'none'; "
       "form-action 'none'; style-src 'unsafe-inline'; img-src data:")
"""The page's Content-Security-Policy: no script runs, nothing is fetched, even if some value
escaped the escaping (inline styles and the inline SVG figures are all a page uses)."""
KEY_ROWS = 6
"""Rows of a table whose key figure the headline lists (the table section has them all)."""


def _esc(v: Any) -> str:
    return html.escape(str(v))


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def table_html(t: Table) -> str:
    head = "".join(f"<th>{_esc(c)}</th>" for c in t.frame.columns)
    body = []
    for row in t.frame.itertuples(index=False):
        cells = "".join(f'<td class="num">{_esc(_cell(v))}</td>' if _is_num(v) else f"<td>{_esc(_cell(v))}</td>"
                        for v in row)
        body.append(f"<tr>{cells}</tr>")
    return (f'<div class="scroll"><table class="data" data-table="{_esc(t.key)}"><thead><tr>{head}</tr>'
            f"</thead><tbody>{''.join(body)}</tbody></table></div>\n")


def coverage_line(t: Table) -> str:
    f = t.frame
    if not {"covered", "missing"} <= set(f.columns) or not len(f):
        return "coverage: not reported by this table"
    cov = pd.to_numeric(f["covered"], errors="coerce")
    mis = pd.to_numeric(f["missing"], errors="coerce")

    def span(s: pd.Series) -> str:
        lo, hi = s.min(), s.max()
        return f"{lo:g}" if lo == hi else f"{lo:g}–{hi:g}"

    cls = "good" if (mis.fillna(0) == 0).all() else "bad"
    return (f'<span class="{cls}">coverage: {span(cov)} instance(s) covered, {span(mis)} missing '
            f"per row</span>")


def _provenance_html(provs: list[dict[str, str]]) -> str:
    keys = list(dict.fromkeys(k for p in provs for k in p))
    head = "<th>field</th>" + "".join(f"<th>{_esc(p.get('run_id'))}</th>" for p in provs)
    rows = []
    for k in keys:
        vals = [p.get(k, "") for p in provs]
        cls = ' class="bad"' if len(provs) > 1 and len(set(vals)) > 1 else ""
        rows.append(f"<tr{cls}><td>{_esc(k)}</td>" + "".join(f"<td>{_esc(v)}</td>" for v in vals) + "</tr>")
    return f'<table class="prov"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>\n'


def _what_ran(manifest: Manifest) -> str:
    c = manifest.config
    model = c.get("model") or "no model (the task's reference arms)"
    bits = [f"task <b>{_esc(c.get('task'))}</b>", f"dataset {_esc(c.get('dataset'))}",
            f"model {_esc(model)}", f"strategy {_esc(c.get('strategy'))}",
            f"verifier {_esc(c.get('verifier'))}",
            f"{_esc(manifest.instance_count)} instance(s) in {_esc(c.get('shards'))} shard(s)"]
    if c.get("limit"):
        bits.append(f"--limit {_esc(c.get('limit'))}")
    return " · ".join(bits)


def key_figure(t: Table, max_rows: int = KEY_ROWS) -> str:
    """The table's first declared metric, row by row (named by its index columns)."""
    metric = next((m for m in t.metrics if m in t.frame.columns), None)
    if metric is None or not len(t.frame):
        return "no metric declared" if metric is None else "no rows"
    unit = "%" if t.metrics[metric].kind == "rate" else (
        f" {t.metrics[metric].unit}" if t.metrics[metric].unit else "")
    index = [c for c in t.index if c in t.frame.columns]
    items: list[str] = []
    for _, row in t.frame.head(max_rows).iterrows():
        name = " / ".join(v for c in index if (v := _cell(row[c]))) or f"row {len(items) + 1}"
        value = row[metric]
        items.append(f"{_esc(name)}: <b>{_esc(_cell(value))}{_esc(unit) if _is_num(value) else ''}</b>")
    more = f" · … {len(t.frame) - max_rows} more row(s)" if len(t.frame) > max_rows else ""
    return f"<code>{_esc(metric)}</code> — " + " · ".join(items) + more


def _figures(t: Table) -> list[str]:
    figs = []
    for p in t.plots:
        try:
            figs.append(plot_svg(t, p))
        except ValueError as e:
            figs.append(f'<p class="bad">plot not drawn ({_esc(t.key)}): {_esc(e)}</p>')
    return figs


def _run_sections(run_dir: Path, anchor: str) -> tuple[str, str, dict[str, str]]:
    """(headline, tables section, provenance) of one run."""
    manifest, stages = load_run(run_dir)
    prov = provenance(run_dir, manifest, {s: r.frame for s, r in stages.items()})
    tables = load_tables(run_dir)
    try:
        agg = json.loads((run_dir / "aggregate.json").read_text())
    except (OSError, ValueError):
        agg = {}
    status = agg.get("status", "not aggregated")
    missing = agg.get("missing_shards") or []
    run_id = _esc(manifest.run_id)
    head = [f'<h2 id="{anchor}-headline">Run {run_id}</h2>\n',
            f'<p class="what">{_what_ran(manifest)}</p>\n',
            f'<p class="coverage"><span class="{"good" if status == "complete" else "bad"}">'
            f"aggregate: {_esc(status)}</span>"
            + (f"; incomplete shards: {_esc(', '.join(missing[:20]))}" if missing else "")
            + "; per stage: "
            + ", ".join(f"{_esc(n)} {sr.covered}/{len(sr.expected)} instances" for n, sr in stages.items())
            + "</p>\n"]
    body = [f'<h2 id="{anchor}">Tables of run {run_id}</h2>\n']
    if not tables:
        note = f"<p class=\"bad\">no tables: run <code>launch aggregate {_esc(run_dir)}</code></p>\n"
        head.append(note)
        body.append(note)
    figures: list[str] = []
    if tables:
        head.append('<ul class="headline">')
    for t in tables:
        section = f"{anchor}-{_esc(t.key)}"
        head.append(f'<li><a href="#{section}">{_esc(t.title)}</a>: {key_figure(t)}</li>')
        body.append(f'<section class="table" id="{section}"><h3>{_esc(t.title)}</h3>\n')
        body.append(f'<p class="coverage">{coverage_line(t)} · <code>{_esc(t.key)}</code></p>\n')
        body.append(table_html(t))
        if t.caption:
            body.append(f'<p class="caption">{_esc(t.caption)}</p>\n')
        if t.plots:
            body.append(f'<p class="coverage">plot(s): in the <a href="#{anchor}-headline">headline'
                        "</a></p>\n")
        figures += _figures(t)
        body.append("</section>\n")
    if tables:
        head.append("</ul>\n")
    if figures:
        head.append('<div class="figures">' + "".join(figures) + "</div>\n")
    return "".join(head), "".join(body), prov


def _row_name(row_json: str) -> str:
    try:
        values = json.loads(row_json)
    except ValueError:
        return row_json
    return " / ".join(str(v) for v in values.values()) if values else "run"


def trends_html(history: pd.DataFrame, run_ids: Sequence[str], max_lines: int = 12) -> str:
    """Per suite entry and table: metric values over nights, one figure per unit."""
    if history.empty:
        return "<p>no history yet</p>\n"
    entries = history[history["run_id"].isin(run_ids)][["suite", "entry"]].drop_duplicates()
    if entries.empty:
        entries = history[["suite", "entry"]].drop_duplicates()
    parts = []
    for suite, entry in entries.itertuples(index=False):
        h = history[(history["suite"] == suite) & (history["entry"] == entry)]
        nights = sorted(h["night"].unique())
        parts.append(f"<h3>{_esc(suite)} / {_esc(entry)} ({len(nights)} night(s))</h3>\n<div class=\"figures\">")
        for (table, unit), g in h.groupby(["table", "unit"], sort=False):
            lines: dict[str, list[tuple[str, float | None]]] = {}
            for (row, metric), s in g.groupby(["row", "metric"], sort=False):
                label = metric if table == RUN_TABLE else f"{_row_name(row)}: {metric}"
                lines[label] = [(n, None if pd.isna(v) else float(v))
                                for n, v in zip(s["night"], s["value"], strict=True)]
            note = ""
            if len(lines) > max_lines:
                note = f" (first {max_lines} of {len(lines)} series)"
                lines = dict(list(lines.items())[:max_lines])
            title = ("regressions against the reference night" if table == RUN_TABLE
                     else f"{table}{note}")
            parts.append(trend_svg(title, lines, unit or "value", nights))
        parts.append("</div>\n")
    return "".join(parts)


def build_report(runs: Sequence[Path], *, history: Path | None = None,
                 regressions: Sequence[RegressReport] = (), title: str = "") -> str:
    runs = [Path(r) for r in runs]
    heads, sections, provs = [], [], []
    for i, r in enumerate(runs):
        head, body, prov = _run_sections(r, f"run{i}")
        heads.append(head)
        sections.append(body)
        provs.append(prov)
    title = title or "veribatch report: " + ", ".join(p.get("run_id", "") for p in provs)
    nav = [f'<a href="#run{i}-headline">{_esc(p.get("run_id"))}</a>' for i, p in enumerate(provs)]
    parts = [f"<h1>{_esc(title)}</h1>\n",
             f'<p class="coverage">generated {time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime())} · '
             "self-contained (no script, no network) · headline first, provenance last</p>\n"]
    parts += heads
    if regressions:
        nav.append('<a href="#regress">regress</a>')
        parts.append('<h2 id="regress">Regress summary</h2>\n')
        for rep in regressions:
            parts.append(f"<h3>{_esc(rep.current.get('run_id'))} against {_esc(rep.base.get('run_id'))}: "
                         f"{_esc(headline(rep))}</h3>\n")
            parts.append(regress_html(rep))
    nav += [f'<a href="#run{i}">tables {_esc(p.get("run_id"))}</a>' for i, p in enumerate(provs)]
    parts += sections
    if history is not None:
        nav.append('<a href="#trends">trends</a>')
        parts.append('<h2 id="trends">Trends over nights</h2>\n')
        parts.append(trends_html(read_history(history), [p.get("run_id", "") for p in provs]))
    nav.append('<a href="#provenance">provenance</a>')
    parts.append('<h2 id="provenance">Provenance</h2>\n' + _provenance_html(provs))
    return html_page(title, f"<nav>{''.join(nav)}</nav>\n" + "".join(parts))


def html_page(title: str, body: str) -> str:
    """The page around `body`: charset, the script-forbidding CSP first, inline styles."""
    return ("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{_esc(CSP)}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<link rel="icon" href="data:,">'
            f"<title>{_esc(title)}</title><style>{CSS}</style></head><body>\n"
            + body + "</body></html>\n")
