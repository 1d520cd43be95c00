"""CE-Bench subcommands: ``launch cebench build | card | compare``.

``build`` plans a build run (stages collect → label) of a LaM4Inv source with the same
machinery as every run — shards, ledger, resume, SLURM — and, when it is complete, its
aggregate step has written the versioned dataset into ``RUN/dataset/``; ``--out`` also
copies it elsewhere.  Evaluate it with ``launch cebench --dataset RUN --model M``.
``card`` prints a built dataset's card; ``compare`` puts evaluation runs side by side
(RQ1 across models, RQ2 across strategies).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Annotated

import typer

from veribatch.launch.executors import executor_names
from veribatch.launch.rundir import resolve_run


def build_cmd(
    source: Annotated[str, typer.Option(help="LaM4Inv source: lam4inv (pinned download or "
                                        "$VERIBATCH_LAM4INV_ROOT), lam4inv:PATH, PATH, or sample.")] = "lam4inv",
    verifier: Annotated[str, typer.Option(help="Labelling verifier: z3 (embedded) or uautomizer.")] = "z3",
    budget_s: Annotated[float, typer.Option(help="Verifier wall-time limit per counterexample (paper: 100).")] = 100.0,
    shards: Annotated[int, typer.Option(help="Shards per stage.")] = 1,
    limit: Annotated[int | None, typer.Option(help="Only the first K programs (a slice).")] = None,
    option: Annotated[list[str] | None, typer.Option("--option", "-o", help="Task option key=value.")] = None,
    executor: Annotated[str, typer.Option(help=" | ".join(executor_names()))] = "local",
    profile: Annotated[str | None, typer.Option(help="SLURM profile name or YAML path.")] = None,
    partition: Annotated[list[str] | None, typer.Option(help="SLURM partition (RESOURCE=NAME).")] = None,
    runs_dir: Annotated[Path | None, typer.Option("--runs-dir", help="Where run directories live.")] = None,
    run_name: Annotated[str | None, typer.Option(help="Directory name for the run.")] = None,
    workers: Annotated[int | None, typer.Option(help="Local executor: CPUs for shard processes.")] = None,
    out: Annotated[Path | None, typer.Option(help="Also copy the built dataset folder here.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan, run nothing.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars or tables.")] = False,
) -> None:
    """Build the labelled counterexample benchmark from LaM4Inv's programs and logs (§3)."""
    from veribatch.launch import console
    from veribatch.launch.run_control import ExecChoice, launch_run, plan_run, run_directory

    choice = ExecChoice(executor=executor, profile=profile, partitions=partition or (), workers=workers)

    def go() -> int:
        plan = plan_run("cebench", dataset=source, options=[f"budget_s={budget_s}", *(option or [])],
                        shards=shards, limit=limit, verifier=verifier)
        if plan.config.options.get("mode") != "build":
            raise ValueError(f"--source {source!r} is a built dataset, not a LaM4Inv source")
        root = run_directory(plan, runs_dir, run_name)
        if dry_run:
            console.describe_plan(plan, root, choice)
            return console.EXIT_OK
        outcome = launch_run(plan, root, choice, progress=not quiet,
                             on_ready=lambda rd, created: console.out.print(
                                 f"run {plan.run_id}: {rd.root}" + ("" if created else " (existing: only what "
                                                                     "is incomplete runs)"), highlight=False))
        code = console.report(outcome, quiet)
        dataset = outcome.rd.root / "dataset"
        if (dataset / "card.json").is_file():
            console.out.print(f"dataset: {dataset}", highlight=False)
            if out is not None and outcome.ok:
                shutil.copytree(dataset, out, dirs_exist_ok=True)
                console.out.print(f"copied to {out}", highlight=False)
            console.out.print(f"evaluate: launch cebench --dataset {outcome.rd.root} --model ENGINE:NAME "
                          "--strategy zero-shot|one-shot|cot", highlight=False)
        return code

    raise typer.Exit(console.guarded(go))


def card_cmd(
    dataset: Annotated[str, typer.Argument(help="Built dataset folder or build run (id, name or directory).")],
) -> None:
    """Print a built dataset's card (counts, decision rates, the paper's figures beside)."""
    from veribatch.launch import console
    from veribatch.tasks.cebench import dataset as ds

    def go() -> int:
        path = Path(dataset)
        if not path.exists():
            path = resolve_run(dataset).root
        folder = ds.dataset_folder(path)
        if folder is None:
            raise ValueError(f"{path}: no built CE-Bench dataset (card.json) here or in dataset/")
        ds.read_rows(folder)  # checks the content hash against the card
        console.out.print((folder / ds.CARD_MD).read_text(), highlight=False, markup=False)
        return console.EXIT_OK

    raise typer.Exit(console.guarded(go))


def compare_cmd(
    runs: Annotated[list[str], typer.Argument(help="Evaluation runs (ids, names or directories).")],
    out: Annotated[Path | None, typer.Option(help="Folder for md/csv (default: first run's tables/).")] = None,
) -> None:
    """RQ1/RQ2: several evaluation runs (models, strategies) side by side, reference rows once."""
    from veribatch.aggregate.records import load_run
    from veribatch.aggregate.render import to_markdown, write_table
    from veribatch.launch import console
    from veribatch.tasks.cebench.tables import compare_runs

    def go() -> int:
        loaded = []
        for r in runs:
            rd = resolve_run(r)
            manifest, stages = load_run(rd.root)
            judge = stages.get("judge")
            if judge is None or judge.frame.empty:
                raise ValueError(f"{rd.root}: not a CE-Bench evaluation run with judge records")
            loaded.append((r, manifest, judge.frame))
        target = out or resolve_run(runs[0]).root / "tables"
        for table in compare_runs(loaded):
            write_table(table, target, ("md", "csv"))
            console.out.print(to_markdown(table), highlight=False, markup=False)
        console.out.print(f"→ {target}", highlight=False)
        return console.EXIT_OK

    raise typer.Exit(console.guarded(go))


def register(app: typer.Typer, task_apps: dict[str, typer.Typer]) -> None:
    sub = task_apps.get("cebench")
    if sub is None:
        return
    sub.command("build")(build_cmd)
    sub.command("card")(card_cmd)
    sub.command("compare")(compare_cmd)
