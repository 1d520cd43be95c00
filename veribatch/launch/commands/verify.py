"""``launch verify FILE... [--tool ...]``: ask one verifier one question, outside any run.

For a user checking a program, an image or a cluster node before launching a
benchmark.  The result is printed (one JSON object with ``--json``).  Exit code per
status (also in ``launch verify --help``): 0 for an answer — TRUE, FALSE, UNKNOWN,
TIMEOUT, OOM (read the status); 1 for ERROR: the tool ran but could not read the input (a parse error, the same
rule for every verifier: `verifiers.result`) or crashed; 2 when the query could not be
run at all: a missing file, an unknown tool or runtime, a tool that is not installed, a
query the tool cannot express (`UnsupportedQueryError`, e.g. two C files for uautomizer).

Nothing here names a tool: the tools are the registry's, the default property and which
files must be program text are the tool's declared facts (`verifiers.base.Tool`).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from veribatch.launch.console import EXIT_INCOMPLETE, EXIT_INPUT, err, out
from veribatch.verifiers.registry import verifier_names

EXIT_CANNOT_RUN = EXIT_INPUT  # nothing ran: bad input, unknown tool, tool missing
EXIT_TOOL_ERROR = EXIT_INCOMPLETE  # the tool ran and answered ERROR


def verify_cmd(
    files: Annotated[list[Path], typer.Argument(help="Program file(s); judge: PROGRAM INPUT [EXPECTED].")],
    tool: Annotated[str, typer.Option("--tool", help=" | ".join(verifier_names()))] = "z3",
    timeout: Annotated[float, typer.Option("--timeout", help="Wall-time limit, seconds (not a "
                                           "CPU-time limit: see --cpu-limit).")] = 60.0,
    cpu_limit: Annotated[float | None, typer.Option("--cpu-limit", help="CPU-time limit, seconds "
                                                    "(default: none).")] = None,
    memory: Annotated[int, typer.Option("--memory", help="Memory limit, MB.")] = 4096,
    prop: Annotated[str | None, typer.Option("--property", help="The property to check (default: the "
                                             "first the tool declares; another it does not "
                                             "take exits 2 naming those it does).")] = None,
    data_model: Annotated[str, typer.Option("--data-model", help="ILP32 (32bit) or LP64.")] = "ILP32",
    runtime: Annotated[str, typer.Option("--runtime", help="native | apptainer")] = "native",
    image: Annotated[Path | None, typer.Option("--image", help="SIF image (apptainer).")] = None,
    log_dir: Annotated[Path | None, typer.Option("--log-dir", help="Keep the raw log here "
                                                 "(default: not kept).")] = None,
    cache_dir: Annotated[Path | None, typer.Option("--cache-dir", help="Reuse/store results "
                                                   "here.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Run one verifier query and print its verdict.

    Exit code per status:
    0: TRUE, FALSE, UNKNOWN, TIMEOUT, OOM (an answer: read the status);
    1: ERROR (the tool could not read the input, e.g. a parse error, or crashed);
    2: the query could not be run (missing file, unknown or missing tool)."""
    from veribatch.verifiers.base import Query, UnsupportedQueryError
    from veribatch.verifiers.registry import UnknownToolError, get_verifier, tool_class
    from veribatch.verifiers.result import Limits

    try:
        for f in files:
            if not f.is_file():
                raise FileNotFoundError(f"no such file: {f}")
        facts = tool_class(tool)
        # Programs are text: a binary (or mis-encoded) file is a wrong argument, not a verdict.
        for f in files[:facts.text_files]:
            _check_text(f)
        verifier = get_verifier(tool, runtime=runtime, image=image, cache_dir=cache_dir)
        query = Query(files=tuple(f.resolve() for f in files),
                      property=prop or facts.properties[0], data_model=data_model)
        # Without --log-dir the raw log lives only for this call: a temp folder per call would
        # pile up in /tmp (one per check, never removed).  A CPU cap only when asked for
        # (verifiers.result.Limits): a multi-threaded tool uses more CPU than wall time and must
        # not be stopped before the wall limit it was given.
        with tempfile.TemporaryDirectory(prefix="veribatch-verify-") as tmp:
            logs = log_dir or Path(tmp)
            result = verifier.run(query, Limits(wall_s=timeout, cpu_s=cpu_limit, memory_mb=memory), logs)
    except (UnknownToolError, FileNotFoundError, UnsupportedQueryError, ValueError) as e:  # ToolNotFoundError included
        err.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False, markup=True)
        raise typer.Exit(EXIT_CANNOT_RUN) from None
    code = EXIT_TOOL_ERROR if result.status == "ERROR" else 0
    if as_json:
        print(json.dumps(result.to_json(), sort_keys=True))
        raise typer.Exit(code)
    # soft_wrap: one line each, wrapped (if at all) by the terminal, never cut mid-phrase by rich
    out.print(f"[bold]{result.status}[/]  " + escape(
        f"{result.tool} {result.tool_version}  {result.wall_s:.2f}s wall, {result.cpu_s:.2f}s CPU, "
        f"{result.peak_mem_mb:.0f} MB, ended by {result.termination_reason}"),
        highlight=False, soft_wrap=True, markup=True)
    if result.reason:
        out.print(f"reason: {result.reason}", highlight=False, markup=False, soft_wrap=True)
    for inv in result.extras.get("invariants", [])[:20]:
        out.print(f"invariant at line {inv['line']}: {inv['invariant']}", highlight=False,
                  markup=False, soft_wrap=True)
    for error in result.extras.get("errors", [])[:20]:
        where = f"{error['file']}({error['line']},{error['col']})" if error.get("file") else "-"
        out.print(escape(f"{error.get('kind', 'error')}: {where}: {error['message']}"), highlight=False,
                  markup=False, soft_wrap=True)
    out.print(f"log: {result.log_path}" if log_dir is not None
              else "log: not kept (--log-dir DIR keeps the raw log)", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _check_text(path: Path) -> None:
    data = path.read_bytes()
    nul = data.find(b"\0", 0, 8192)
    if nul >= 0:
        raise ValueError(f"{path}: not a program text (a binary file: NUL byte at offset {nul})")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise ValueError(f"{path}: line {line}: not UTF-8 text (byte 0x{data[e.start]:02x} at "
                         f"offset {e.start})") from None


def register(app: typer.Typer, task_apps: dict[str, typer.Typer]) -> None:
    app.command("verify")(verify_cmd)
