"""The table type every per-task aggregation module returns.

A table is a DataFrame plus what a reader needs to trust it: which research
question / paper table it reproduces and how many instances it covers or misses.
Rendering (markdown, CSV, LaTeX, HTML) lives in `aggregate.render`.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd


@dataclass
class Table:
    key: str        # file stem, e.g. "table2_invbench_easy"
    title: str      # e.g. "Table 2: invariant correctness and speedup (easy split)"
    frame: pd.DataFrame  # every row carries `covered` and `missing` columns
    caption: str = ""    # definitions of the columns, caveats
