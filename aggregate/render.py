"""Render a `Table`: markdown and CSV always; LaTeX and HTML on request.

Written by hand (no tabulate/jinja2): the outputs are small, and a renderer
that cannot be missing on a cluster login node is worth twenty lines.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from .table import Table

FORMATS = ("md", "csv", "tex", "html")


def _cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    try:
        import pandas as pd

        if v is pd.NA:
            return ""
    except ImportError:  # pragma: no cover
        pass
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def to_markdown(t: Table) -> str:
    cols = [str(c) for c in t.frame.columns]
    rows = [[_cell(v) for v in row] for row in t.frame.itertuples(index=False)]
    esc = [[c.replace("|", "\\|") for c in r] for r in rows]
    lines = [f"### {t.title}", "", "| " + " | ".join(cols) + " |",
             "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in esc]
    if t.caption:
        lines += ["", t.caption]
    return "\n".join(lines) + "\n"


def to_csv(t: Table) -> str:
    return t.frame.to_csv(index=False)


def _tex(s: str) -> str:
    for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("$", r"\$"),
                 ("#", r"\#"), ("_", r"\_"), ("{", r"\{"), ("}", r"\}")):
        s = s.replace(a, b) if a != "\\" else s.replace(a, "\x00")
    return s.replace("\x00", r"\textbackslash{}")


def to_latex(t: Table) -> str:
    cols = [_tex(str(c)) for c in t.frame.columns]
    lines = [r"\begin{table}[t]", r"\centering", r"\begin{tabular}{" + "l" * len(cols) + "}",
             r"\toprule", " & ".join(cols) + r" \\", r"\midrule"]
    for row in t.frame.itertuples(index=False):
        lines.append(" & ".join(_tex(_cell(v)) for v in row) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", r"\caption{" + _tex(t.title) + "}",
              r"\label{tab:" + t.key + "}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def to_html(t: Table) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in t.frame.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>"
                   for row in t.frame.itertuples(index=False))
    cap = f"<p>{html.escape(t.caption)}</p>" if t.caption else ""
    return (f"<h3>{html.escape(t.title)}</h3>\n<table>\n<thead><tr>{head}</tr></thead>\n"
            f"<tbody>{body}</tbody>\n</table>\n{cap}\n")


RENDERERS = {"md": to_markdown, "csv": to_csv, "tex": to_latex, "html": to_html}


def write_table(t: Table, out_dir: Path, formats: tuple[str, ...]) -> list[Path]:
    unknown = [f for f in formats if f not in RENDERERS]
    if unknown:
        raise ValueError(f"unknown table format(s) {unknown}; known: {', '.join(FORMATS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in dict.fromkeys(("md", "csv", *formats)):
        p = out_dir / f"{t.key}.{fmt}"
        p.write_text(RENDERERS[fmt](t), encoding="utf-8")
        paths.append(p)
    return paths
