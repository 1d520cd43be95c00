"""``launch images list|check|build``: the pinned verifier images (see `containers/`).

``check`` exits 1 when an image does not match its lock entry, its definition
changed since the build, or its ``%test`` fails (``--strict``: also when anything is
unpinned); unpinned items are always listed.  ``build`` needs apptainer and exits 2
with a clear message where there is none.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from veribatch.launch.console import EXIT_INCOMPLETE, EXIT_INPUT, err, out

DirOpt = Annotated[Path | None, typer.Option("--dir", help="Where SIF images and images.lock.json "
                                             "live (env VERIBATCH_IMAGES; default ./images).")]

images_app = typer.Typer(help="Pinned Apptainer images of the verifiers.", no_args_is_help=True)


@images_app.command("list")
def list_cmd(directory: DirOpt = None) -> None:
    """Definitions, their pinned versions, and what is built."""
    from veribatch.containers.definitions import load_definitions
    from veribatch.containers.images import images_dir, read_lock

    d = images_dir(directory)
    lock = read_lock(d)
    t = Table(title=f"verifier images ({d})")
    for col in ("image", "tool version", "base", "unpinned", "built sha256"):
        t.add_column(col)
    for name, definition in load_definitions().items():
        entry = lock.get(name)
        t.add_row(name, definition.tool_version, definition.base, str(len(definition.unpinned())),
                  entry["sha256"][:16] if entry else "-")
    out.print(t)


@images_app.command("check")
def check_cmd(
    directory: DirOpt = None,
    strict: Annotated[bool, typer.Option("--strict", help="Fail on unpinned items too.")] = False,
    no_test: Annotated[bool, typer.Option("--no-test", help="Do not run %test.")] = False,
) -> None:
    """Verify built images against the lock file, list unpinned items, run each %test."""
    from veribatch.containers.images import check, images_dir

    results = check(images_dir(directory), run_tests=not no_test, strict=strict)
    for c in results:
        out.print(f"[bold]{c.name}[/]: {'ok' if c.ok else '[red]FAILED[/]'}", highlight=False, markup=True)
        for p in c.problems:
            out.print(f"  problem: {escape(str(p))}", highlight=False)
        for u in c.unpinned:
            out.print(f"  UNPINNED: {u}", highlight=False)
        for n in c.notes:
            out.print(f"  {n}", highlight=False)
    if not all(c.ok for c in results):
        raise typer.Exit(EXIT_INCOMPLETE)


@images_app.command("build")
def build_cmd(
    names: Annotated[list[str], typer.Argument(help="Images to build (default: all).")] = None,  # type: ignore[assignment]
    directory: DirOpt = None,
) -> None:
    """Build images with apptainer and record their sha256 in the lock file."""
    from veribatch.containers.definitions import load_definitions
    from veribatch.containers.images import ApptainerMissing, UnknownImageError, build, images_dir

    d = images_dir(directory)
    try:
        for name in names or sorted(load_definitions()):
            entry = build(name, d)
            out.print(f"built {d / entry['sif']} sha256 {entry['sha256']}", highlight=False)
            for u in entry["unpinned"]:
                out.print(f"  UNPINNED: {u}", highlight=False)
    except (ApptainerMissing, UnknownImageError) as e:
        err.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False, markup=True)
        raise typer.Exit(EXIT_INPUT) from None
    except subprocess.CalledProcessError as e:
        err.print(f"[bold red]error:[/] apptainer build failed with exit code {e.returncode}",
                  highlight=False, markup=True)
        raise typer.Exit(EXIT_INCOMPLETE) from None


def register(app: typer.Typer, task_apps: dict[str, typer.Typer]) -> None:
    app.add_typer(images_app, name="images")
