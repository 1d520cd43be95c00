"""The contract every registered verifier keeps (BenchExec's `test_tool_info`, over every tool).

Nothing here names a tool: each test runs for every name in `verifiers.registry`, so a new
adapter is checked the moment its registry line exists — its declared facts, a pure command
line and environment, the named error for a query it cannot express, a verdict (never an
exception) from an empty, killed or garbled run, and the version parsed from the tool's real
output where `../shared/data/recorded/<name>/version/` holds some.  None of it needs the
tool installed.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from typer.testing import CliRunner

from veribatch.verifiers.base import (
    FinishedRun,
    Query,
    Tool,
    ToolEnvironment,
    ToolNotFoundError,
    ToolVerdict,
    UnsupportedQueryError,
)
from veribatch.verifiers.registry import get_tool, get_verifier, tool_class, verifier_names
from veribatch.verifiers.result import Limits, Status

NAMES = verifier_names()
EXECUTABLE = "/opt/some tool/bin/tool"  # absolute, with a space: argv must keep it one word
SUFFIX = {"C": ".c", "Dafny": ".dfy", "C++": ".cpp", "Python": ".py"}
PROGRAM = {
    ".c": "extern void reach_error(void);\nint main(void) {\n  int x = 0;\n  while (x < 3) x++;\n"
          "  if (x != 3) reach_error();\n  return 0;\n}\n",
    ".dfy": "method Main() {\n  assert 1 + 1 == 2;\n}\n",
    ".cpp": "#include <cstdio>\nint main() { std::puts(\"1\"); }\n",
    ".py": "print(1)\n",
}


def _files(tool: type[Tool], tmp_path: Path, n: int) -> tuple[Path, ...]:
    """A program in the tool's first language, then plain data files (inputs, expectations)."""
    suffix = SUFFIX.get(tool.languages[0], ".txt")
    program = tmp_path / f"program{suffix}"
    program.write_text(PROGRAM.get(suffix, "1\n"))
    rest = []
    for i in range(1, n):
        f = tmp_path / f"data{i}.txt"
        f.write_text("1\n")
        rest.append(f)
    return (program, *rest)


def _supported_query(tool: Tool, tmp_path: Path, options: tuple[str, ...] = ()) -> Query:
    """The tool's default property on the fewest files it takes (1 to 3)."""
    workdir = tmp_path / "work"
    for n in (1, 2, 3):
        query = Query(_files(type(tool), tmp_path, n), property=type(tool).properties[0], options=options)
        try:
            tool.support_files(query)
            tool.cmdline(EXECUTABLE, query, Limits(), workdir)
        except UnsupportedQueryError:
            continue
        return query
    raise AssertionError(f"{tool.name}: no query of its default property on 1-3 files is supported")


@pytest.mark.parametrize("name", NAMES)
def test_the_adapter_is_a_tool_that_declares_every_fact(name: str) -> None:
    cls = tool_class(name)
    assert issubclass(cls, Tool) and not inspect.isabstract(cls)
    assert cls.missing_facts() == []
    for fact in Tool.FACTS:  # declared by the adapter (or a base of its own), not inherited from Tool
        assert any(fact in vars(k) for k in cls.__mro__ if k is not Tool), f"{name}: {fact} not declared"
    assert cls.name == name
    assert isinstance(cls.description, str) and cls.description.strip() and "\n" not in cls.description
    for facts in (cls.properties, cls.languages):
        assert isinstance(facts, tuple) and facts and all(isinstance(f, str) and f.strip() for f in facts)
        assert len(set(facts)) == len(facts)
    assert type(cls.memory_mb) is int and cls.memory_mb >= 256
    assert type(cls.query_cores) is int and cls.query_cores >= 1
    assert type(cls.certified_verdicts) is bool
    assert cls.container_executable is None or cls.container_executable.startswith("/")
    assert isinstance(cls.version_args, tuple) and all(isinstance(a, str) for a in cls.version_args)
    assert cls.text_files is None or (type(cls.text_files) is int and cls.text_files >= 1)
    assert inspect.getdoc(inspect.getmodule(cls)), f"{name}: its module says why it is shaped as it is"


def test_a_forgotten_fact_is_named() -> None:
    """What the test above and `registry.tool_class` catch in a new adapter."""

    class Forgetful(Tool):
        name = "forgetful"
        description = "forgets its cores and calls its memory a yes"
        properties = ("unreach-call",)
        languages = ("C",)
        memory_mb = True  # type: ignore[assignment]
        certified_verdicts = False

        def executable(self) -> str:
            return "/bin/true"

        def cmdline(self, executable: str, query: Query, limits: Limits, workdir: Path) -> list[str]:
            return [executable]

        def determine_result(self, run: FinishedRun) -> ToolVerdict:
            return ToolVerdict(Status.UNKNOWN)

    assert Forgetful.missing_facts() == ["memory_mb", "query_cores"]


@pytest.mark.parametrize("name", NAMES)
def test_cmdline_environment_and_support_files_are_pure(name: str, tmp_path: Path) -> None:
    tool = get_tool(name)
    query = _supported_query(tool, tmp_path, options=("--some-option",))
    workdir = tmp_path / "work"
    limits = Limits(wall_s=30, memory_mb=4096)
    argv = tool.cmdline(EXECUTABLE, query, limits, workdir)
    assert argv == get_tool(name).cmdline(EXECUTABLE, query, limits, workdir)  # same args, same argv
    assert isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)
    assert str(query.files[0]) in argv, f"{name} ignores its input file"
    assert "--some-option" in argv, f"{name} ignores the query's options"
    env = tool.environment(EXECUTABLE, limits)
    assert isinstance(env, ToolEnvironment) and env == get_tool(name).environment(EXECUTABLE, limits)
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in env.variables.items())
    assert all(isinstance(d, str) and d for d in env.path_prepend)
    files = tool.support_files(query)
    assert files == get_tool(name).support_files(query)
    assert all(isinstance(k, str) and "/" not in k and isinstance(v, str) for k, v in files.items())


@pytest.mark.parametrize("name", NAMES)
def test_a_property_the_tool_does_not_declare_is_an_unsupported_query(name: str, tmp_path: Path) -> None:
    tool = get_tool(name)
    good = _supported_query(tool, tmp_path)
    bad = Query(good.files, property="no-such-property")
    with pytest.raises(UnsupportedQueryError, match="no-such-property"):
        tool.support_files(bad)
        tool.cmdline(EXECUTABLE, bad, Limits(), tmp_path / "work")
    assert issubclass(UnsupportedQueryError, ValueError)  # callers that catch bad input keep working


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("run", [
    FinishedRun(0, None, "", "exit"),                                  # exited, said nothing
    FinishedRun(None, 9, "", "walltime"),                              # killed by the runner
    FinishedRun(None, 11, "Segmentation fault\n", "signal"),           # crashed
    FinishedRun(1, None, "garbled\n{ not json\n\x00\n", "exit"),       # printed nonsense
], ids=["empty", "killed", "crashed", "garbled"])
def test_determine_result_handles_a_run_without_a_verdict(name: str, run: FinishedRun, tmp_path: Path) -> None:
    for workdir in (None, tmp_path):  # may be called on a recording, with or without its files
        verdict = get_tool(name).determine_result(FinishedRun(run.returncode, run.signal, run.output,
                                                              run.termination_reason, workdir))
        assert isinstance(verdict, ToolVerdict) and isinstance(verdict.status, Status)
        assert not verdict.status.decided, f"{name} read a verdict into {run.output!r}"
        assert isinstance(verdict.extras, dict)


@pytest.mark.parametrize("name", NAMES)
def test_version_is_read_from_the_tool(name: str, shared_data: Path) -> None:
    """From the tool's real answer to `[executable, *version_args]` where it was recorded
    (``recorded/<name>/version/stdout<args>.txt``, the args joined as in the file name),
    else from the tool itself where it is installed here (the embedded z3 always is)."""
    tool = get_tool(name)
    recorded = shared_data / "recorded" / name / "version" / f"stdout{''.join(tool.version_args)}.txt"
    if recorded.is_file():
        version = tool.parse_version(recorded.read_text())
    else:
        try:
            version = tool.version(tool.executable())
        except ToolNotFoundError as e:
            pytest.skip(f"{name}: no recorded version output ({recorded.name}) and not installed: {e}")
    assert version and version == version.strip() and "\n" not in version


@pytest.mark.parametrize("name", NAMES)
def test_determine_result_reads_every_recorded_real_output(name: str, shared_data: Path) -> None:
    """Every recorded case (``recorded/<name>/<case>/``: a run's ``stdout.txt`` [+ ``stderr.txt``,
    ``exit_code.txt``], or a test suite's ``*.expect``) gives a verdict, never an exception;
    what each verdict must be is the adapter's own test."""
    folder = shared_data / "recorded" / name
    cases = sorted(d for d in folder.glob("*/") if d.name != "version") if folder.is_dir() else []
    if not cases:
        pytest.skip(f"no recorded output for {name}")
    tool, read = get_tool(name), 0
    for case in cases:
        code = case / "exit_code.txt"
        rc = int(code.read_text()) if code.is_file() else 0
        outputs = [(case / "stdout.txt").read_text() + ((case / "stderr.txt").read_text()
                                                         if (case / "stderr.txt").is_file() else "")
                   ] if (case / "stdout.txt").is_file() else [f.read_text() for f in sorted(case.glob("*.expect"))]
        for output in outputs:
            verdict = tool.determine_result(FinishedRun(rc, None, output, "exit", case))
            assert isinstance(verdict.status, Status), case
            read += 1
    assert read >= len(cases)


@pytest.mark.parametrize("name", NAMES)
def test_listing_and_planning_need_no_installed_tool(name: str) -> None:
    """A verifier object exists for every name on any machine; only using it needs the tool."""
    assert get_verifier(name).name == name


def test_launch_verify_lists_every_registered_tool() -> None:
    import typer

    from veribatch.launch.commands import verify

    app = typer.Typer()
    verify.register(app, {})

    @app.command("noop")
    def _noop() -> None: ...

    out = " ".join(CliRunner().invoke(app, ["verify", "--help"], terminal_width=200).output.split())
    assert " | ".join(NAMES) in out
