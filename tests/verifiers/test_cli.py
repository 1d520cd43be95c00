"""`launch verify`: prints the verdict; exit 0 for an answer, 1 for ERROR (the tool could not
read the input or crashed), 2 when nothing could run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from veribatch.launch.commands import verify


@pytest.fixture(scope="module")
def app() -> typer.Typer:
    a = typer.Typer()
    verify.register(a, {})

    @a.command("noop")  # a second command keeps Typer from collapsing the app into `verify`
    def _noop() -> None: ...

    return a


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {}
    for name, text in {
        "sum.py": "a, b = map(int, input().split())\nprint(a + b)\n",
        "in.txt": "20 22\n",
        "right.txt": "42\n",
        "wrong.txt": "41\n",
    }.items():
        out[name] = tmp_path / name
        out[name].write_text(text)
    return out


def test_verdicts_exit_zero_and_json_is_one_object(app, files, tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["verify", str(files["sum.py"]), str(files["in.txt"]),
                                 str(files["wrong.txt"]), "--tool", "judge", "--json",
                                 "--log-dir", str(tmp_path / "logs")])
    assert r.exit_code == 0, r.output
    obj = json.loads(r.stdout)
    assert obj["status"] == "FALSE" and obj["tool"] == "judge"
    assert Path(obj["log_path"]).is_file()
    r = CliRunner().invoke(app, ["verify", str(files["sum.py"]), str(files["in.txt"]),
                                 str(files["right.txt"]), "--tool", "judge"])
    assert r.exit_code == 0 and r.stdout.startswith("TRUE")


@pytest.mark.parametrize("args, message", [
    (["/nonexistent/p.c"], "no such file"),
    (["{c}", "--tool", "cbmc"], "unknown verifier 'cbmc'"),
    (["{c}", "--tool", "judge", "--runtime", "docker"], "unknown runtime"),
    (["{c}", "--tool", "uautomizer"], "Ultimate.py not found"),
    (["{c}", "--tool", "judge"], "judge query files"),  # the tool cannot express the query
])
def test_cannot_run_exits_2(app, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str],
                            message: str) -> None:
    monkeypatch.delenv("VERIBATCH_UAUTOMIZER", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    c = tmp_path / "p.c"
    c.write_text("int main(){return 0;}")
    r = CliRunner().invoke(app, ["verify", *[a.format(c=c) for a in args]])
    assert r.exit_code == 2
    assert message in " ".join(r.output.split())


@pytest.mark.parametrize("text", [
    Path("/etc/passwd").read_text() if Path("/etc/passwd").is_file() else "root:x:0:0:root:/root:/bin/sh\n",
    "int main( {\n",  # a C syntax error
])
def test_an_input_the_tool_cannot_read_is_error_and_exits_1(app, tmp_path: Path, text: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The rule UAutomizer's adapter follows (syntax error: ERROR) holds for z3 too; the summary
    line is one line even on a narrow terminal (it used to break in "ended by \\nexit")."""
    from rich.console import Console

    monkeypatch.setattr(verify, "out", Console(width=40))
    f = tmp_path / "input.c"
    f.write_text(text)
    r = CliRunner().invoke(app, ["verify", str(f), "--tool", "z3", "--log-dir", str(tmp_path / "l")])
    assert r.exit_code == 1, r.output
    first, second = r.stdout.splitlines()[:2]
    assert first.startswith("ERROR  z3 ") and first.endswith("ended by exit"), r.stdout
    assert second.startswith("reason: parse error: ") and "input.c" in second, r.stdout
    r = CliRunner().invoke(app, ["verify", str(f), "--tool", "z3", "--json"])
    assert r.exit_code == 1 and json.loads(r.stdout)["status"] == "ERROR"
