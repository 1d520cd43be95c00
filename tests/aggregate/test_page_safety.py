"""Report pages and tables with hostile names in them: a model name with raw HTML stays text in
the markdown tables, `$...$` in a label is drawn as text (mathtext would raise and fail the
page), and the page's Content-Security-Policy stops a script that escaped the escaping
(checked in a real headless Chromium)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from tests.support.browser import Browser, chromium_binary
from veribatch.aggregate.history import append_night, night_rows, read_history
from veribatch.aggregate.plots import plot_svg
from veribatch.aggregate.render import to_markdown
from veribatch.aggregate.report import CSP, html_page, trends_html
from veribatch.aggregate.table import Metric, Plot, Table
from veribatch.rundir.manifest import Manifest

HTML_NAME = "openai:<img src=x onerror=alert(1)>|x"
MATH_NAME = "openai:$\\foo$"


def _table(model: str) -> Table:
    frame = pd.DataFrame({"model": [model, "hf:/m"], "k": [1, 1], "solved": [50.0, 25.0],
                          "covered": [2, 2], "missing": [0, 0]})
    return Table(key="t_safety", title="Safety <b>table</b>", frame=frame, caption="a < b",
                 index=("model",), metrics={"solved": Metric("rate")},
                 plots=(Plot("line", x="k", y=("solved",), series="model"),
                        Plot("bar", x="model", y=("solved",))))


def test_markdown_cells_carry_no_raw_html() -> None:
    md = to_markdown(_table(HTML_NAME))
    assert "<img" not in md and "<b>" not in md
    assert "openai:&lt;img src=x onerror=alert(1)&gt;\\|x" in md  # text, the pipe kept in its cell
    row = next(line for line in md.splitlines() if "openai:" in line)
    assert row.count(" | ") == 4  # five cells: the name did not split the row
    assert "a &lt; b" in md


def test_mathtext_in_labels_is_drawn_as_text(tmp_path: Path) -> None:
    t = _table(MATH_NAME)
    for p in t.plots:  # series legend and bar tick labels
        assert "<!-- openai:$\\foo$ -->" in plot_svg(t, p)
    hist = tmp_path / "history.parquet"
    for night in ("2026-04-01", "2026-04-02"):
        append_night(hist, night_rows(suite="s", night=night, entry=MATH_NAME,
                                      manifest=Manifest.from_json({"run_id": "r1", "config": {"model": MATH_NAME}}),
                                      tables=[t], reference_night="", regress_exit=-1, regressions=0))
    page = trends_html(read_history(hist), ["r1"])  # raised ValueError (mathtext) before
    assert page.count('<svg class="figure"') == 2 and "$\\foo$: solved -->" in page


def _browser(tmp_path: Path) -> Browser:
    if chromium_binary() is None:
        if os.environ.get("CI"):
            pytest.fail("chromium not installed (CI=true: .ci/run installs it)")
        pytest.skip("chromium not installed (apt-get install chromium)")
    return Browser(tmp_path / "profile")


def test_csp_stops_a_script_that_reached_the_page(tmp_path: Path) -> None:
    """A `<script>` and an inline handler in the body (as if some value escaped the escaping):
    with the page's CSP neither runs; the same body without the CSP runs both (the check can
    fail)."""
    body = ("<p>x</p><script>window.ran = (window.ran || 0) + 1</script>"
            '<img src="data:," onerror="window.ran = (window.ran || 0) + 10">'
            '<img src="data:image/png;base64,AAAA" onerror="window.ran = (window.ran || 0) + 10">')
    page = html_page("t", body)
    assert f'<meta http-equiv="Content-Security-Policy" content="{CSP.replace(chr(39), "&#x27;")}">' in page
    assert page.index("Content-Security-Policy") < page.index("<body>")
    safe, open_ = tmp_path / "safe.html", tmp_path / "open.html"
    safe.write_text(page)
    open_.write_text(page.replace("Content-Security-Policy", "X-Nothing"))
    with _browser(tmp_path) as browser:
        assert browser.load(open_.as_uri(), "String(window.ran)").value != "undefined"
        assert browser.load(safe.as_uri(), "String(window.ran)").value == "undefined"
