"""REFUTE-only subcommands: ``launch refute filter | compare | pin-hub | probe``.

- ``filter``: the §4.1 construction filter as a run (same stages, shards, resume and
  executors as ``launch refute``): a blind random generator — the model's, written from the
  statement alone, or without a model the dataset's own / the trivial one — searches for a
  minute against the correct solution; problems it breaks are dropped.  Writes
  ``tables/filter.json`` (kept and dropped problem ids).
- ``compare``: success and solved-set overlap across runs (one run per strategy or model).
- ``pin-hub``: pin ``bethgelab/REFUTE`` to a hub commit with the sha256 of its files.
- ``probe``: which sandbox this node offers for untrusted code, and why.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from veribatch.launch.executors import executor_names


def filter_cmd(
    dataset: Annotated[str | None, typer.Option(help="Dataset name or export path.")] = None,
    model: Annotated[str | None, typer.Option(help="Engine spec that writes the blind generators; "
                                              "none: the dataset's own or the trivial one.")] = None,
    executor: Annotated[str, typer.Option(help=" | ".join(executor_names()))] = "local",
    profile: Annotated[str | None, typer.Option(help="SLURM profile name or YAML path.")] = None,
    partition: Annotated[list[str] | None, typer.Option(help="SLURM partition(s).")] = None,
    shards: Annotated[int, typer.Option(help="Shards per stage.")] = 1,
    limit: Annotated[int | None, typer.Option(help="Use only K problems.")] = None,
    option: Annotated[list[str] | None, typer.Option("--option", "-o", help="key=value")] = None,
    runs_dir: Annotated[Path | None, typer.Option("--runs-dir")] = None,
    run_name: Annotated[str | None, typer.Option(help="Directory name for the run.")] = None,
    workers: Annotated[int | None, typer.Option(help="Local executor: CPUs to use.")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q")] = False,
) -> None:
    """§4.1: drop problems a blind random generator breaks within the filter limit."""
    from veribatch.launch.console import EXIT_OK, guarded, out, report
    from veribatch.launch.run_control import ExecChoice, launch_run, plan_run, run_directory

    def go() -> int:
        plan = plan_run("refute", dataset=dataset, model=model, options=[*(option or ()), "filter=true"],
                        shards=shards, limit=limit)
        root = run_directory(plan, runs_dir, run_name)
        choice = ExecChoice(executor=executor, profile=profile, partitions=partition or (),
                            workers=workers)
        o = launch_run(plan, root, choice, progress=not quiet)
        code = report(o, quiet)
        table = o.rd.root / "tables" / "refute_filter.csv"
        if code == EXIT_OK and table.is_file():
            import pandas as pd

            df = pd.read_csv(table)
            result = {"run": str(o.rd.root), "filter_s": plan.config.options["filter_s"],
                      "kept": sorted(df.loc[df["decision"] == "kept", "instance_id"]),
                      "dropped": sorted(df.loc[df["decision"] == "dropped", "instance_id"])}
            (o.rd.root / "tables" / "filter.json").write_text(json.dumps(result, indent=1) + "\n")
            out.print(f"kept {len(result['kept'])}, dropped {len(result['dropped'])} "
                      f"→ {o.rd.root / 'tables' / 'filter.json'}", highlight=False)
        return code

    raise typer.Exit(guarded(go))


def compare_cmd(
    runs: Annotated[list[str], typer.Argument(help="two or more runs (e.g. one per strategy)")],
    out_dir: Annotated[Path | None, typer.Option("--out", help="folder for md/csv "
                                                 "(default: first run's tables/)")] = None,
) -> None:
    """Success per model x strategy and the overlap of solved problems, across runs."""
    from veribatch.launch.commands._runs import load_runs, show_tables
    from veribatch.tasks.refute.tables import compare_runs

    if len(runs) < 2:
        raise typer.BadParameter("compare needs at least two runs")
    loaded = load_runs(runs)
    show_tables(compare_runs([(name, manifest, frames) for name, _, manifest, frames in loaded]),
                out_dir or loaded[0][1] / "tables")


def pin_cmd(
    revision: Annotated[str, typer.Option(help="hub revision (branch, tag or commit) to pin")] = "main",
    out: Annotated[Path | None, typer.Option(help="pin file to write (default: the packaged one)")] = None,
) -> None:
    """Pin bethgelab/REFUTE to a commit: downloads the train split, records each file's sha256."""
    from veribatch.launch.console import guarded
    from veribatch.tasks.refute.upstream import pin

    pinned = guarded(lambda: pin(revision, out))  # a DatasetError: one line, exit 2
    typer.echo(f"pinned {pinned['repo']} @ {pinned['revision']}: " + ", ".join(
        f"{k} ({v[:12]})" for k, v in pinned["files"].items()))


def probe_cmd(
    sandbox: Annotated[str, typer.Option(help="auto | bwrap | apptainer | unsafe")] = "auto",
) -> None:
    """Which sandbox this node offers for model-written code (exit 1 when none)."""
    from veribatch.verifiers.judge import probe

    raise typer.Exit(probe(sandbox))


def register(app: typer.Typer, task_apps: dict[str, typer.Typer]) -> None:
    sub = task_apps.get("refute")
    if sub is None:
        return
    sub.command("filter")(filter_cmd)
    sub.command("compare")(compare_cmd)
    sub.command("pin-hub")(pin_cmd)
    sub.command("probe")(probe_cmd)
