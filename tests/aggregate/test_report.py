"""`launch report`: one self-contained page from real runs (InvBench reference arms on two
sample programs; two selftest runs, the second with errors injected), checked as text and in
a real headless Chromium: no console error, every table present, every declared plot drawn,
a full-page screenshot taken (kept under $VERIBATCH_ARTIFACTS when set)."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from tests.support import cli
from tests.support.browser import Browser, chromium_binary
from veribatch.aggregate.history import append_night, night_rows
from veribatch.aggregate.render import load_tables
from veribatch.rundir.manifest import Manifest

pytestmark = pytest.mark.slow  # one InvBench run and two selftest runs, shared by the module


launch = functools.partial(cli.launch, timeout=600)  # `launch ...` in a fresh process


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("report")
    runs = tmp / "runs"
    for name, args in (("inv", ["invbench", "--limit", "2", "-o", "budget_s=60"]),
                       ("sel_a", ["selftest"]), ("sel_b", ["selftest", "-o", "fail=1,4"])):
        r = launch(*args, "--runs-dir", str(runs), "--run-name", name, "-q")
        assert r.returncode == 0, r.stdout + r.stderr
    # a history of three nights of the InvBench run (the nightly appends exactly these rows)
    hist = tmp / "hist"
    manifest = Manifest.read(runs / "inv")
    for night in ("2026-04-01", "2026-04-02", "2026-04-03"):
        append_night(hist / "history.parquet", night_rows(
            suite="embedded", night=night, entry="invbench-reference", manifest=manifest,
            tables=load_tables(runs / "inv"), reference_night="", regress_exit=-1, regressions=0))
    out = {"inv": tmp / "inv.html", "sel": tmp / "sel.html"}
    r = launch("report", "inv", "--runs-dir", str(runs), "--history", str(hist), "--out", str(out["inv"]))
    assert r.returncode == 0, r.stderr
    r = launch("report", "sel_a", "sel_b", "--runs-dir", str(runs), "--out", str(out["sel"]))
    assert r.returncode == 0, r.stderr
    out["runs"] = runs
    return out


def _keys(run: Path) -> list[str]:
    return [t.key for t in load_tables(run)]


def test_page_is_self_contained_with_every_table_and_plot(pages: dict[str, Path]) -> None:
    inv = pages["inv"].read_text()
    assert "<script" not in inv and not re.search(r"(src|href)=\"(https?:)?//", inv)
    assert "script-src &#x27;none&#x27;" in inv.split("<body>")[0]  # the CSP, in the head
    keys = _keys(pages["runs"] / "inv")
    assert {"table2_invbench_sample", "solved_baseline_vs_arm_sample", "table4_verifiers_sample", "speedup_distribution_sample",
            "solved_vs_budget_sample", "summary_invbench"} <= set(keys)
    assert re.findall(r'data-table="([^"]+)"', inv) == keys
    # the two declared InvBench plots, with axis titles and units (matplotlib keeps the text of
    # each label as a comment beside its glyph paths), then the trend figures
    assert "<!-- speedup = baseline time / (generation + decision time) -->" in inv
    assert "<!-- time budget (s) -->" in inv and "<!-- instances solved -->" in inv
    assert "Trends over nights" in inv and "<!-- night -->" in inv
    figures = inv.count('<svg class="figure"')
    assert figures > 2
    for field in ("code_version", "dataset_hash", "cluster_profile", "image_digest", "model_revision",
                  "verifier_version"):
        assert f"<td>{field}</td>" in inv
    sel = pages["sel"].read_text()
    assert "Regress summary" in sel and "New errors / crashes: 2" in sel
    assert "selftest/smoke/00004" in sel and re.findall(r'data-table="([^"]+)"', sel) == \
        _keys(pages["runs"] / "sel_a") + _keys(pages["runs"] / "sel_b")


def _browser_or_skip(tmp_path: Path) -> Browser:
    if chromium_binary() is None:
        if os.environ.get("CI"):
            pytest.fail("chromium not installed (CI=true: .ci/run installs it)")
        pytest.skip("chromium not installed (apt-get install chromium)")
    return Browser(tmp_path / "profile")


def test_report_in_headless_chromium(pages: dict[str, Path], tmp_path: Path) -> None:
    query = ("JSON.stringify({tables: [...document.querySelectorAll('table.data')].map(t => t.dataset.table),"
             " figures: [...document.querySelectorAll('svg.figure')].filter(s => s.getBBox().width > 100).length,"
             " title: document.title})")
    artifacts = Path(os.environ.get("VERIBATCH_ARTIFACTS", tmp_path))
    artifacts.mkdir(parents=True, exist_ok=True)
    with _browser_or_skip(tmp_path) as browser:
        # the check can fail: a page that logs an error is caught
        bad = tmp_path / "bad.html"
        bad.write_text("<!doctype html><title>x</title><script>console.error('boom')</script>")
        assert any("boom" in e for e in browser.load(bad.as_uri()).errors)
        for name, run_keys in (("inv", _keys(pages["runs"] / "inv")),
                               ("sel", _keys(pages["runs"] / "sel_a") + _keys(pages["runs"] / "sel_b"))):
            res = browser.load(pages[name].as_uri(), query)
            assert res.errors == [], res.errors
            seen = json.loads(res.value)
            assert seen["tables"] == run_keys
            assert seen["figures"] == pages[name].read_text().count('<svg class="figure"')
            assert res.screenshot.startswith(b"\x89PNG\r\n\x1a\n") and len(res.screenshot) > 20_000
            shot = artifacts / f"report-{name}.png"
            shot.write_bytes(res.screenshot)
            shutil.copy(pages[name], artifacts / f"report-{name}.html")
            print(f"screenshot: {shot}")


def test_headline_first_provenance_last(pages: dict[str, Path]) -> None:
    """What ran, coverage, each table's key figure and the plots come before the tables in
    full; the long provenance table comes last."""
    from veribatch.aggregate.report import key_figure

    inv = pages["inv"].read_text()
    head_end = inv.index('id="run0"')  # the tables section of the run
    headline = inv[inv.index('id="run0-headline"'):head_end]
    assert "task <b>invbench</b>" in headline and "no model (the task&#x27;s reference arms)" in headline
    assert "2 instance(s) in 1 shard(s)" in headline and "aggregate: complete" in headline
    tables = load_tables(pages["runs"] / "inv")
    for t in tables:  # one line per table: a link to it and its first declared metric per row
        assert f'href="#run0-{t.key}"' in headline and key_figure(t) in headline
    assert any(next(iter(t.metrics), None) for t in tables)
    first_metric = next(m for t in tables for m in t.metrics if m in t.frame.columns)
    assert f"<code>{first_metric}</code>" in headline
    assert headline.count('<svg class="figure"') == sum(len(t.plots) for t in tables) > 0
    order = [inv.index(s) for s in ('id="run0-headline"', 'data-table=', 'id="trends"',
                                     'id="provenance"', "<td>code_version</td>")]
    assert order == sorted(order), order
    sel = pages["sel"].read_text()  # two runs: both headlines, then regress, tables, provenance
    order = [sel.index(s) for s in ('id="run0-headline"', 'id="run1-headline"', 'id="regress"',
                                     'id="run0"', 'id="run1"', 'id="provenance"')]
    assert order == sorted(order), order
