"""Figures for `launch report`: a table's `Plot` declarations and history trends, drawn by
matplotlib and returned as inline SVG text (fonts as paths), so the page needs no network,
no script and no image files.

The task decides *what* to plot (`aggregate.table.Plot`); this module decides *how*
(axes, units, legends), the same way for every task.  matplotlib is imported here only,
and only when a report is drawn: aggregation on a compute node never pays for it.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from .table import Plot, Table

WIDTH_IN, HEIGHT_IN = 6.4, 3.6


def _figure() -> Any:
    import matplotlib

    matplotlib.rcParams["svg.hashsalt"] = "veribatch"   # stable element ids: same data, same bytes
    matplotlib.rcParams["svg.fonttype"] = "path"        # no font needed by the viewer
    # Labels are data (model names, row values): `openai:$\\foo$` is a name, not a formula,
    # and mathtext would raise on it, failing the whole page.
    matplotlib.rcParams["text.parse_math"] = False
    from matplotlib.figure import Figure

    return Figure(figsize=(WIDTH_IN, HEIGHT_IN), layout="constrained")


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    # Inline in HTML: drop the XML prolog and DOCTYPE; let the figure shrink with the page.
    text = re.sub(r"^.*?(<svg\b)", r"\1", text, count=1, flags=re.S)
    return text.replace("<svg ", '<svg class="figure" role="img" ', 1)


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _edge(v: float) -> str:
    return "∞" if math.isinf(v) else f"{v:g}"


def _labels(frame: pd.DataFrame, plot: Plot) -> list[str]:
    out = []
    for _, row in frame.iterrows():
        a = _num(row.get(plot.x)) if plot.x_to else None
        if plot.x_to:
            b = _num(row.get(plot.x_to))
            out.append("none" if a is None or b is None else f"[{_edge(a)}, {_edge(b)})")
        else:
            v = row.get(plot.x)
            out.append("none" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v))
    return out


def _groups(frame: pd.DataFrame, plot: Plot) -> list[tuple[str, pd.DataFrame]]:
    if plot.series and plot.series in frame.columns:
        return [(str(k), g) for k, g in frame.groupby(plot.series, dropna=False, sort=False)]
    return [("", frame)]


def plot_svg(table: Table, plot: Plot) -> str:
    """One declared plot of a table as SVG.  Raises ValueError naming a missing column."""
    frame = table.frame
    for col in (plot.x, *plot.y, *([plot.x_to] if plot.x_to else [])):
        if col not in frame.columns:
            raise ValueError(f"table {table.key}: plot column {col!r} not in {list(frame.columns)}")
    fig = _figure()
    ax = fig.add_subplot()
    groups = _groups(frame, plot)
    series = [(g, y) for g, _ in groups for y in plot.y]
    if plot.kind == "bar":
        labels = list(dict.fromkeys(lab for _, part in groups for lab in _labels(part, plot)))
        width = 0.8 / max(len(series), 1)
        for i, (name, part) in enumerate(groups):
            labs = _labels(part, plot)
            for j, y in enumerate(plot.y):
                k = i * len(plot.y) + j
                xs = [labels.index(lab) + (k - (len(series) - 1) / 2) * width for lab in labs]
                ys = [_num(v) or 0.0 for v in part[y]]
                bars = ax.bar(xs, ys, width=width * 0.95, label=_legend(name, y, plot))
                ax.bar_label(bars, fmt="%g", fontsize=8)
        ax.set_xticks(range(len(labels)), labels, rotation=20 if len(labels) > 6 else 0)
    else:
        for name, part in groups:
            part = part.assign(_x=[_num(v) for v in part[plot.x]]).dropna(subset=["_x"]).sort_values("_x")
            for y in plot.y:
                ax.plot(part["_x"], [_num(v) for v in part[y]], marker="o", markersize=4,
                        label=_legend(name, y, plot))
        if plot.log_x:
            from matplotlib.ticker import FuncFormatter

            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.grid(True, alpha=0.3)
    ax.set_xlabel(plot.x_label or plot.x)
    ax.set_ylabel(plot.y_label or ", ".join(plot.y))
    ax.set_title(plot.title or table.title, fontsize=10)
    if len(series) > 1:
        ax.legend(fontsize=8)
    ax.set_ylim(bottom=0)
    return _svg(fig)


def _legend(group: str, y: str, plot: Plot) -> str:
    if group and len(plot.y) > 1:
        return f"{group}: {y}"
    return group or y


def trend_svg(title: str, lines: Mapping[str, Sequence[tuple[str, float | None]]], y_label: str,
              nights: Sequence[str]) -> str:
    """Metric values over nights: one line per (row, metric); x is the night label."""
    fig = _figure()
    ax = fig.add_subplot()
    pos = {n: i for i, n in enumerate(nights)}
    for label, points in lines.items():
        pts = [(pos[n], v) for n, v in points if v is not None and n in pos]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=4, label=label)
    ax.set_xticks(range(len(nights)), list(nights), rotation=30 if len(nights) > 4 else 0)
    ax.set_xlabel("night")
    ax.set_ylabel(y_label)
    ax.set_title(title, fontsize=10)
    ax.grid(True, alpha=0.3)
    if lines:
        ax.legend(fontsize=7)
    return _svg(fig)
