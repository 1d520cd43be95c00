"""`launch toyarith show`: the dataset's expressions and claimed answers, without a run."""

from __future__ import annotations

import typer


def show(dataset: str = typer.Option("sample", help="a dataset of toyarith")) -> None:
    """Print each instance: its id, expression and claimed answer."""
    from toy_benchmark import ToyArith

    for inst in ToyArith().load(dataset):
        typer.echo(f"{inst.id}\t{inst.payload['expression']} = {inst.payload['answer']}")


def register(app: typer.Typer, task_apps: dict[str, typer.Typer]) -> None:
    sub = task_apps.get("toyarith")
    if sub is not None:
        sub.command("show")(show)
