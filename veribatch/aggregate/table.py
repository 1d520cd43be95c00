"""The table type every per-task aggregation module returns.

A table is a DataFrame plus what a reader needs to trust it: which research
question / paper table it reproduces and how many instances it covers or misses.
Rendering (markdown, CSV, LaTeX, HTML) lives in `aggregate.render`.

A table also says what its cells *are* (`index`, `metrics`), so that `launch regress`
can compare two runs cell by cell — and test whether a change is more than noise —
without knowing any task by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import pandas as pd

MetricKind = Literal["rate", "mean", "count", "value"]


@dataclass(frozen=True)
class Metric:
    """What one metric column of a table holds.

    - ``rate``: a percentage of the row's `n_column` instances (e.g. % verified); the
      count behind it is ``round(value / 100 * n)``, so an exact test needs no more data.
    - ``mean``: a mean over per-instance values; the values themselves go in
      `Table.samples` (one row per instance), so a change can be bootstrapped over instances.
    - ``count``: a number of instances; ``value``: anything else (compared, never tested).

    `sampled` marks metrics that come from sampled model generations: only those get a
    significance test in `launch regress` (a verifier's verdict count is not noise).
    """

    kind: MetricKind
    n_column: str = "covered"
    sampled: bool = False
    higher_is_better: bool = True
    unit: str = ""


PlotKind = Literal["bar", "line"]


@dataclass(frozen=True)
class Plot:
    """How `launch report` draws a table (matplotlib → inline SVG), declared by the task so the
    report needs no task names: CE-Bench accuracy per category is ``Plot("bar", x="category",
    y=("accuracy",))``, DafnyComp pass@k curves ``Plot("line", x="k", y=("pass_at_k",),
    series="model")``.

    - ``bar``: one group of bars per row, labelled by `x` (or by the interval ``[x, x_to)``
      when `x_to` is given; a row whose `x` is null is labelled "none"), one bar per `y` column.
    - ``line``: `x` numeric; one line per `y` column, and per value of `series` when given.
    """

    kind: PlotKind
    x: str
    y: tuple[str, ...]
    x_label: str = ""            # axis titles; the unit belongs in them, e.g. "time budget (s)"
    y_label: str = ""
    title: str = ""              # default: the table's title
    series: str | None = None    # column splitting rows into lines / bar groups (e.g. "model")
    x_to: str | None = None      # bar: upper edge column, for interval labels
    log_x: bool = False


@dataclass
class Table:
    key: str        # file stem, e.g. "table2_invbench_easy"
    title: str      # e.g. "Table 2: invariant correctness and speedup (easy split)"
    frame: pd.DataFrame  # every row carries `covered` and `missing` columns
    caption: str = ""    # definitions of the columns, caveats
    # Columns that name a row (e.g. ("split", "model", "arm")): rows of two runs with the same
    # index values are the same cell row.  Empty: the row position.
    index: tuple[str, ...] = ()
    # Metric column → what it holds (see `Metric`).  Columns not listed are not compared.
    metrics: Mapping[str, Metric] = field(default_factory=dict)
    # Per-instance values behind ``mean`` metrics: the `index` columns, ``instance_id`` and one
    # column per such metric.  None when the table has no mean metric worth testing.
    samples: pd.DataFrame | None = None
    # How `launch report` draws this table; empty: the table is shown, not plotted.
    plots: tuple[Plot, ...] = ()
