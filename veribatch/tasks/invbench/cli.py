"""InvBench-only subcommands: ``launch invbench build-splits | compare | table4 | measure-sample``.

Discovered by the CLI (every module in `launch/commands` defines `register`).  They read
run directories the way ``launch aggregate`` does (`aggregate.records`: completed shards
only), so they work from any login node.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from veribatch.launch.commands._runs import load_runs, show_tables, stage_frames
from veribatch.launch.rundir import resolve_run


def build_splits_cmd(
    run: Annotated[str, typer.Argument(help="run id, name or directory with a finished baseline")],
    threshold_s: Annotated[float, typer.Option(help="easy: solved in less than this many seconds")] = 30.0,
    out: Annotated[Path | None, typer.Option(help="splits.json path (default: RUN/tables/)")] = None,
) -> None:
    """Split a pool into easy/hard by the baseline solve time (InvBench §4 construction)."""
    from veribatch.tasks.invbench.splits import build_splits

    rd = resolve_run(run)
    _, frames = stage_frames(rd.root)
    base = frames.get("baseline")
    if base is None or base.empty:
        raise typer.BadParameter(f"{rd.root}: no completed baseline shard")
    records = base.astype(object).where(base.notna(), None).to_dict("records")
    splits = build_splits(records, threshold_s=threshold_s)
    target = out or rd.root / "tables" / "splits.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(splits, indent=1) + "\n")
    typer.echo(
        f"easy (< {threshold_s:g} s): {len(splits['easy'])}  hard: {len(splits['hard'])}  "
        f"unsolved (budget {splits['budget_s']} s): {len(splits['unsolved'])}  → {target}"
    )


def compare_cmd(
    runs: Annotated[list[str], typer.Argument(help="two or more runs, e.g. BASE_RUN FT_RUN")],
    out: Annotated[Path | None, typer.Option(help="folder for md/csv (default: first run's tables/)")] = None,
) -> None:
    """Table 6 (base vs fine-tuned) or Table 7 (N=1 vs Best-of-N): Table 2 columns per run."""
    from veribatch.tasks.invbench.tables import compare_runs

    if len(runs) < 2:
        raise typer.BadParameter("compare needs at least two runs")
    loaded = load_runs(runs)
    show_tables([compare_runs(loaded)], out or loaded[0][1] / "tables")


def table4_cmd(
    runs: Annotated[list[str], typer.Argument(help="one or more runs (e.g. a UAutomizer and a z3 baseline run, model runs)")],
    out: Annotated[Path | None, typer.Option(help="folder for md/csv (default: first run's tables/)")] = None,
) -> None:
    """The paper's Table 4: solved instances per verifier under 10/100/300/600 s, for any number
    of runs (each run's baseline verifier and arm, and the dataset's recorded reference times)."""
    from veribatch.tasks.invbench.tables import compare_verifiers

    loaded = load_runs(runs)
    show_tables([compare_verifiers(loaded)], out or loaded[0][1] / "tables")


def measure_sample_cmd(
    verifier: Annotated[str, typer.Option(help="verifier that measures the sample")] = "z3",
    budget_s: Annotated[float, typer.Option(help="wall-time limit per run")] = 60.0,
    repeats: Annotated[int, typer.Option(help="runs per program (the median is kept)")] = 3,
) -> None:
    """Re-measure the shipped sample's verdicts and times (writes sample/reference.json)."""
    from veribatch.tasks.invbench.measure import measure_sample

    ref = measure_sample(verifier=verifier, budget_s=budget_s, repeats=repeats)
    for name, row in ref["programs"].items():
        typer.echo(f"{name:24} {row['verdict']:5} {row['time_s']:.3f} s")
    typer.echo(f"{ref['tool']} {ref['tool_version']}: {len(ref['programs'])} programs measured")


def register(app: typer.Typer, task_apps: dict[str, typer.Typer]) -> None:
    sub = task_apps.get("invbench")
    if sub is None:
        return
    sub.command("build-splits")(build_splits_cmd)
    sub.command("compare")(compare_cmd)
    sub.command("table4")(table4_cmd)
    sub.command("measure-sample")(measure_sample_cmd)
