"""`launch dafnycomp strip FILE` and `launch dafnycomp integrity ORIGINAL CANDIDATE`."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.testing import CliRunner

from veribatch.tasks.dafnycomp.cli import register
from veribatch.tasks.dafnycomp.strip import strip

PROGRAM = Path(__file__).resolve().parents[3] / "veribatch" / "tasks" / "dafnycomp" / "sample" / "main_2node_fill_sum.dfy"


def _app() -> typer.Typer:
    sub = typer.Typer()
    sub.callback()(lambda: None)
    register(typer.Typer(), {"dafnycomp": sub})
    return sub


def test_strip_and_integrity_commands(tmp_path: Path) -> None:
    cli, app = CliRunner(), _app()
    res = cli.invoke(app, ["strip", str(PROGRAM)])
    assert res.exit_code == 0 and res.stdout == strip(PROGRAM.read_text())
    assert "removed decreases 1, ensures 3, modifies 1, reads 1, requires 3" in res.stderr
    stripped = tmp_path / "stripped.dfy"
    stripped.write_text(res.stdout)
    bad = cli.invoke(app, ["integrity", str(PROGRAM), str(stripped)])
    assert bad.exit_code == 1 and bad.stdout.startswith("cheat") and "trivial_spec" in bad.stdout
    good = cli.invoke(app, ["integrity", str(PROGRAM), str(PROGRAM)])
    assert good.exit_code == 0 and good.stdout.strip() == "ok"
    wrapped = tmp_path / "wrapped.dfy"
    wrapped.write_text("module Answer {\n" + PROGRAM.read_text() + "}\n")
    allowed = cli.invoke(app, ["integrity", str(PROGRAM), str(wrapped)])
    assert allowed.exit_code == 0 and "allowed: module_wrapped" in allowed.stdout
    broken = tmp_path / "broken.dfy"
    broken.write_text("method M() {")
    assert cli.invoke(app, ["strip", str(broken)]).exit_code == 2
