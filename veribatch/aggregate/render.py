"""Render a `Table`: markdown, CSV and a JSON sidecar always; LaTeX and HTML on request.

Written by hand (no tabulate/jinja2): the outputs are small, and a renderer
that cannot be missing on a cluster login node is worth twenty lines.

The sidecar (``<key>.table.json``, plus ``<key>.samples.parquet`` when the table has
per-instance samples) carries what the markdown cannot: the table's `index`, `metrics`
and `plots` declarations and typed cells.  `launch regress` and `launch report` read
tables back from it, so they compare and draw what that night's code computed, without
importing any task's code.  Schema: docs/nightly.md.
"""

from __future__ import annotations

import contextlib
import html
import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .table import Metric, Plot, Table

SIDECAR_SCHEMA = 1
SIDECAR_SUFFIX = ".table.json"
SAMPLES_SUFFIX = ".samples.parquet"

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


def _md(s: str) -> str:
    """Text for a markdown table: markdown renderers pass raw HTML through, so a model name
    like ``<img onerror=…>`` is escaped; ``|`` and line breaks would end the cell or row."""
    return html.escape(s, quote=False).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def to_markdown(t: Table) -> str:
    cols = [_md(str(c)) for c in t.frame.columns]
    rows = [[_md(_cell(v)) for v in row] for row in t.frame.itertuples(index=False)]
    lines = [f"### {_md(t.title)}", "", "| " + " | ".join(cols) + " |",
             "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    if t.caption:
        lines += ["", html.escape(t.caption, quote=False)]
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


def json_value(v: Any) -> Any:
    """A cell as a JSON scalar: numpy scalars unwrapped, NaN/NA → null.  ±inf stays a float
    (Python's json writes and reads it as ``Infinity``): a histogram's last bin is open."""
    if v is None:
        return None
    if hasattr(v, "item") and not isinstance(v, str | bytes):
        with contextlib.suppress(ValueError, AttributeError):
            v = v.item()
    try:
        import pandas as pd

        if v is pd.NA or v is pd.NaT:
            return None
    except ImportError:  # pragma: no cover
        pass
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, bool | int | float | str):
        return v
    return str(v)


def to_sidecar(t: Table) -> dict[str, Any]:
    cols = [str(c) for c in t.frame.columns]
    return {
        "schema": SIDECAR_SCHEMA,
        "key": t.key,
        "title": t.title,
        "caption": t.caption,
        "index": list(t.index),
        "metrics": {c: asdict(m) for c, m in t.metrics.items()},
        "plots": [{**asdict(p), "y": list(p.y)} for p in t.plots],
        "columns": cols,
        "rows": [[json_value(v) for v in row] for row in t.frame.itertuples(index=False)],
        "samples": f"{t.key}{SAMPLES_SUFFIX}" if t.samples is not None else None,
    }


def write_table(t: Table, out_dir: Path, formats: tuple[str, ...]) -> list[Path]:
    """md, csv and the JSON sidecar always (+ samples parquet), then the extra `formats`."""
    unknown = [f for f in formats if f not in RENDERERS]
    if unknown:
        raise ValueError(f"unknown table format(s) {unknown}; known: {', '.join(FORMATS)}")
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in dict.fromkeys(("md", "csv", *formats)):
        p = out_dir / f"{t.key}.{fmt}"
        p.write_text(RENDERERS[fmt](t), encoding="utf-8")
        paths.append(p)
    side = out_dir / f"{t.key}{SIDECAR_SUFFIX}"
    side.write_text(json.dumps(to_sidecar(t), indent=1) + "\n", encoding="utf-8")
    paths.append(side)
    samples = out_dir / f"{t.key}{SAMPLES_SUFFIX}"
    if t.samples is not None:
        t.samples.to_parquet(samples, index=False)
        paths.append(samples)
    elif samples.exists():  # a stale file from an older build must not be read as this table's
        samples.unlink()
    return paths


def read_sidecar(path: Path) -> Table:
    """A table back from its sidecar (and samples parquet).  Raises ValueError naming the file."""
    import pandas as pd

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if data.get("schema") != SIDECAR_SCHEMA:
            raise ValueError(f"schema {data.get('schema')!r}, expected {SIDECAR_SCHEMA}")
        frame = pd.DataFrame(data["rows"], columns=data["columns"])
        metrics = {c: Metric(**m) for c, m in data.get("metrics", {}).items()}
        plots = tuple(Plot(**{**p, "y": tuple(p["y"])}) for p in data.get("plots", []))
        samples = None
        if data.get("samples"):
            samples = pd.read_parquet(Path(path).parent / data["samples"])
    except (OSError, KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path}: not a readable table sidecar ({e})") from None
    return Table(key=data["key"], title=data["title"], frame=frame, caption=data.get("caption", ""),
                 index=tuple(data.get("index", ())), metrics=metrics, samples=samples, plots=plots)


def load_tables(run_dir: Path) -> list[Table]:
    """The tables of the run's last aggregation, in build order (``aggregate.json`` lists them;
    without it, every sidecar in tables/ by name)."""
    tables_dir = Path(run_dir) / "tables"
    order: list[Path] = []
    try:
        listed = json.loads((Path(run_dir) / "aggregate.json").read_text()).get("tables", [])
        order = [Path(run_dir) / p for p in listed if str(p).endswith(SIDECAR_SUFFIX)]
    except (OSError, ValueError):
        pass
    if not order:
        order = sorted(tables_dir.glob(f"*{SIDECAR_SUFFIX}"))
    return [read_sidecar(p) for p in order if p.is_file()]
