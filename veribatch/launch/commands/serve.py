"""``launch serve MODEL`` — a long-lived OpenAI-compatible endpoint, on SLURM or on this machine.

Multi-turn and agentic tasks talk to a model over HTTP instead of running offline
batches.  `launch serve` starts `inference.serve_job` in a serve directory — as one
SLURM job built from the profile's ``gpu`` partition (``--executor slurm``), or as a
detached local process (``--executor local``) — waits until the endpoint file appears
and ``/health`` answers, and prints the URL.  Clients use
``openai:NAME`` with ``serve_dir=DIR`` (or ``OPENAI_BASE_URL``).

``launch serve-stop DIR`` writes the STOP file and scancels the job; the server also
stops by itself when its registered clients are gone (see `inference.serve_job`).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from veribatch.launch.console import EXIT_CLUSTER, EXIT_INCOMPLETE, EXIT_INPUT

SERVE_FILE = "serve.json"
SCRIPT = "serve.sbatch"


def _slug(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", model.rstrip("/").split("/")[-1]).strip("-")[:40] or "model"


def default_serve_dir(model: str) -> Path:
    from veribatch.launch.rundir import default_runs_dir

    return default_runs_dir() / f"serve-{_slug(model)}-{time.strftime('%Y%m%d-%H%M%S')}"


def serve_job_argv(serve_dir: Path, model: str, *, backend: str, tp: int, nodes: int,
                   heartbeat_s: float, idle_exit_s: float | None, python: str | None = None,
                   vllm_args: str = "") -> list[str]:
    argv = [python or sys.executable, "-m", "veribatch.inference.serve_job", "--serve-dir", str(serve_dir),
            "--model", model, "--backend", backend, "--tp", str(tp), "--nodes", str(nodes),
            "--heartbeat-s", f"{heartbeat_s:g}"]
    if idle_exit_s:
        argv += ["--idle-exit-s", f"{idle_exit_s:g}"]
    if vllm_args:
        argv += ["--vllm-args", vllm_args]
    return argv


def build_sbatch_script(serve_dir: Path, model: str, profile: Any, *, tp: int = 1, nodes: int = 1,
                        backend: str = "auto", time_min: int | None = None,
                        heartbeat_s: float = 10.0, idle_exit_s: float | None = None,
                        python: str | None = None, vllm_args: str = "") -> str:
    """The batch script of a serve job, from the profile's ``gpu`` partition entry, written
    by the one sbatch writer (`executors.sbatch.serve_script`: every value checked there)."""
    from veribatch.launch.executors.sbatch import serve_script

    spec = profile.for_resource("gpu", "serve")
    serve_dir = Path(serve_dir).resolve()
    argv = serve_job_argv(serve_dir, model, backend=backend, tp=tp, nodes=nodes,
                          heartbeat_s=heartbeat_s, idle_exit_s=idle_exit_s, python=python,
                          vllm_args=vllm_args)
    return serve_script(profile, spec, job_name=f"veribatch-serve-{_slug(model)}",
                        output=f"{serve_dir}/serve-%j.log", nodes=nodes, tp=tp,
                        minutes=time_min or spec.time_min or 24 * 60,
                        body=[f"export VERIBATCH_SERVE_DIR={shlex.quote(str(serve_dir))}",
                              "exec " + shlex.join(argv)])


def _write_serve_file(serve_dir: Path, info: dict[str, Any]) -> None:
    (serve_dir / SERVE_FILE).write_text(json.dumps(info, indent=1))


def start_local(serve_dir: Path, model: str, *, backend: str, tp: int, heartbeat_s: float,
                idle_exit_s: float | None, vllm_args: str = "") -> subprocess.Popen:
    """Start the serve job as a detached process on this machine (survives this command)."""
    argv = serve_job_argv(serve_dir, model, backend=backend, tp=tp, nodes=1,
                          heartbeat_s=heartbeat_s, idle_exit_s=idle_exit_s, vllm_args=vllm_args)
    argv += ["--host", "127.0.0.1"]  # on this machine only (and token-protected)
    log = (serve_dir / "serve.log").open("ab")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    _write_serve_file(serve_dir, {"model": model, "executor": "local", "pid": proc.pid,
                                  "argv": argv, "backend": backend, "tp": tp, "nodes": 1,
                                  "submitted": time.time()})
    return proc


def submit_slurm(serve_dir: Path, model: str, profile_name: str | None, script: str,
                 **kw: Any) -> str:
    """Submit `script` (`build_sbatch_script`) from `serve_dir`; the job id."""
    path = serve_dir / SCRIPT
    path.write_text(script)
    if shutil.which("sbatch") is None:
        raise RuntimeError("sbatch not found: not on a SLURM login node (use --executor local)")
    out = subprocess.run(["sbatch", "--parsable", str(path)], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"sbatch refused {path}: {out.stderr.strip()}")
    job_id = out.stdout.strip().split(";")[0]
    _write_serve_file(serve_dir, {"model": model, "executor": "slurm", "job_id": job_id,
                                  "script": str(path), "profile": profile_name,
                                  "submitted": time.time(), **{k: v for k, v in kw.items()
                                                               if k in ("tp", "nodes", "backend")}})
    return job_id


def stop_serve(serve_dir: Path, timeout_s: float = 60.0) -> str:
    """Ask the server to stop (STOP file), scancel its job; wait for exit.json."""
    from veribatch.inference.serve_job import EXIT, STOP

    serve_dir = Path(serve_dir)
    if not (serve_dir / SERVE_FILE).exists():
        raise FileNotFoundError(f"{serve_dir}: not a serve directory (no {SERVE_FILE})")
    info = json.loads((serve_dir / SERVE_FILE).read_text())
    (serve_dir / STOP).write_text(str(time.time()))
    if info.get("job_id") and shutil.which("scancel"):
        subprocess.run(["scancel", "--signal=TERM", "--full", str(info["job_id"])],
                       capture_output=True, timeout=30)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (serve_dir / EXIT).exists():
            return json.loads((serve_dir / EXIT).read_text()).get("reason", "stopped")
        time.sleep(0.2)
    if info.get("job_id") and shutil.which("scancel"):
        subprocess.run(["scancel", str(info["job_id"])], capture_output=True, timeout=30)
    return "no exit.json yet (job cancelled)"


def register(app: typer.Typer, task_apps: dict[str, typer.Typer]) -> None:
    @app.command("serve")
    def serve_cmd(
        model: Annotated[str, typer.Argument(help="model: vllm:NAME, hf:PATH, or a bare name (vLLM if installed, else transformers)")],
        profile: Annotated[str | None, typer.Option(help="SLURM profile (slurm_profiles/*.yaml)")] = None,
        nodes: Annotated[int, typer.Option(min=1, help="nodes (pipeline stages across nodes)")] = 1,
        tp: Annotated[int, typer.Option(min=1, help="tensor-parallel size (GPUs per node)")] = 1,
        run_dir: Annotated[Path | None, typer.Option(help="serve directory (default runs/serve-MODEL-TIME)")] = None,
        executor: Annotated[str, typer.Option(help="auto (slurm when --profile is given), local or slurm")] = "auto",
        backend: Annotated[str, typer.Option(help="auto, vllm or http")] = "auto",
        time_limit: Annotated[int | None, typer.Option("--time", help="job time limit in minutes")] = None,
        idle_exit_s: Annotated[float | None, typer.Option(help="stop after this many seconds without requests")] = None,
        heartbeat_s: Annotated[float, typer.Option(help="heartbeat period")] = 10.0,
        wait: Annotated[bool, typer.Option(help="wait until the endpoint is healthy")] = True,
        timeout: Annotated[float, typer.Option(help="seconds to wait for the endpoint")] = 1800.0,
        dry_run: Annotated[bool, typer.Option(help="print the job script (or command) and stop")] = False,
        vllm_args: Annotated[str, typer.Option(help="extra `vllm serve` arguments, one quoted string")] = "",
    ) -> None:
        """Serve MODEL as an OpenAI-compatible endpoint; prints its URL when healthy."""
        from veribatch.inference.serve_job import wait_for_endpoint

        if executor not in ("auto", "local", "slurm"):
            raise typer.BadParameter("--executor must be auto, local or slurm")
        executor = executor if executor != "auto" else ("slurm" if profile else "local")
        if executor == "local" and nodes > 1:
            raise typer.BadParameter("--nodes > 1 needs --executor slurm")
        serve_dir = (run_dir or default_serve_dir(model)).resolve()
        script = ""
        if executor == "slurm":
            from veribatch.launch.console import guarded
            from veribatch.launch.profiles import load_profile

            # before anything is written: a bad profile or value is exit 2, one line
            script = guarded(lambda: build_sbatch_script(
                serve_dir, model, load_profile(profile), tp=tp, nodes=nodes, backend=backend,
                time_min=time_limit, heartbeat_s=heartbeat_s, idle_exit_s=idle_exit_s,
                vllm_args=vllm_args))
        if dry_run:
            if executor == "slurm":
                typer.echo(script, nl=False)
            else:
                typer.echo(shlex.join(serve_job_argv(serve_dir, model, backend=backend, tp=tp, nodes=1,
                                                     heartbeat_s=heartbeat_s, idle_exit_s=idle_exit_s,
                                                     vllm_args=vllm_args)))
            return
        serve_dir.mkdir(parents=True, exist_ok=True)
        proc = None
        try:
            if executor == "slurm":
                job = submit_slurm(serve_dir, model, profile, script, tp=tp, nodes=nodes,
                                   backend=backend)
                typer.echo(f"submitted serve job {job}; serve dir {serve_dir}")
            else:
                proc = start_local(serve_dir, model, backend=backend, tp=tp, heartbeat_s=heartbeat_s,
                                   idle_exit_s=idle_exit_s, vllm_args=vllm_args)
                typer.echo(f"started local server (pid {proc.pid}); serve dir {serve_dir}")
            if not wait:
                return
            ep = wait_for_endpoint(serve_dir, timeout, proc=proc)
        except (RuntimeError, TimeoutError, OSError, ValueError) as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(EXIT_CLUSTER if executor == "slurm" else EXIT_INCOMPLETE) from None
        typer.echo(f"endpoint: {ep['url']}  (model {ep['model']}, backend {ep['backend']})")
        typer.echo(f"use: VERIBATCH_SERVE_DIR={serve_dir} ... --model openai:{ep['model']} "
                   f"(URL and bearer token from {serve_dir}/endpoint.json, mode 0600); "
                   f"stop: launch serve-stop {serve_dir}")

    @app.command("serve-stop")
    def serve_stop_cmd(
        serve_dir: Annotated[Path, typer.Argument(help="serve directory printed by `launch serve`")],
        timeout: Annotated[float, typer.Option(help="seconds to wait for a clean exit")] = 60.0,
    ) -> None:
        """Stop a `launch serve` server (STOP file + scancel), waiting for its exit record."""
        try:
            reason = stop_serve(serve_dir, timeout)
        except FileNotFoundError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(EXIT_INPUT) from None
        typer.echo(f"stopped: {reason}")
