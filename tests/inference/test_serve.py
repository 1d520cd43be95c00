"""`launch serve`: the job script it builds, and the real serve path (local and on SLURM)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest

from veribatch.inference import MissingExtraError, open_engine
from veribatch.inference.endpoint import registered_client
from veribatch.inference.ray_cluster import ephemeral_range
from veribatch.inference.serve_http import EngineServer
from veribatch.inference.serve_job import (
    ENDPOINT,
    EXIT,
    ServeJob,
    job_port,
    node_address,
    resolve_backend,
    vllm_serve_command,
    wait_for_endpoint,
)
from veribatch.launch.commands.serve import build_sbatch_script
from veribatch.launch.executors.sbatch import gres_for
from veribatch.launch.profiles import load_profile

HAS_VLLM = __import__("importlib").util.find_spec("vllm") is not None


def launch(*args: str, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "veribatch", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "COLUMNS": "200", **(env or {})})


PROFILE = """
account: proj-verif-123
qos: normal
setup:
  - module load apptainer/1.3
  - source /shared/envs/veribatch/bin/activate
partitions:
  cpu: {partition: cpu-long}
  gpu:
    partition: a100
    time: "1-00:00:00"
    mem_gb: 128
    cpus_per_task: 16
    gres: "gpu:4"
    qos: gpu-normal
    constraint: a100_80gb
    sbatch: {exclusive: user}
"""


@pytest.fixture
def cluster_profile(tmp_path: Path) -> Path:
    path = tmp_path / "my-cluster.yaml"
    path.write_text(PROFILE)
    return path


def test_sbatch_script_from_a_multi_partition_profile(tmp_path: Path, cluster_profile: Path) -> None:
    script = build_sbatch_script(tmp_path, "vllm:Qwen/Qwen2.5-72B-Instruct", load_profile(str(cluster_profile)),
                                 tp=4, nodes=2, idle_exit_s=600, python="/venv/bin/python")
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash"
    for want in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1", "#SBATCH --partition=a100",
                 "#SBATCH --account=proj-verif-123", "#SBATCH --qos=gpu-normal",
                 "#SBATCH --constraint=a100_80gb", "#SBATCH --gres=gpu:4", "#SBATCH --cpus-per-task=16",
                 "#SBATCH --mem=131072M", "#SBATCH --time=1440", "#SBATCH --exclusive=user",
                 "#SBATCH --signal=B:TERM@120", f"#SBATCH --output={tmp_path.resolve()}/serve-%j.log",
                 "module load apptainer/1.3", "source /shared/envs/veribatch/bin/activate"):
        assert want in lines, want
    assert lines[-1] == (
        f"exec /venv/bin/python -m veribatch.inference.serve_job --serve-dir {tmp_path.resolve()} "
        "--model vllm:Qwen/Qwen2.5-72B-Instruct --backend auto --tp 4 --nodes 2 --heartbeat-s 10 "
        "--idle-exit-s 600")
    # setup lines run before the server starts
    assert lines.index("module load apptainer/1.3") < len(lines) - 1


def test_sbatch_script_for_the_test_cluster_has_no_gres(tmp_path: Path) -> None:
    script = build_sbatch_script(tmp_path, "hf:/m", load_profile("local-test"), time_min=15)
    assert "#SBATCH --partition=gpu" in script and "--gres" not in script
    assert "#SBATCH --time=15" in script
    assert gres_for("gpu:a100:1", 4) == "gpu:a100:4" and gres_for("gpu", 2) == "gpu:2"
    assert gres_for(None, 4) is None


def test_dry_run_prints_without_submitting(tmp_path: Path, cluster_profile: Path) -> None:
    r = launch("serve", "hf:/m", "--profile", str(cluster_profile), "--tp", "4",
               "--run-dir", str(tmp_path / "s"), "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "#SBATCH --gres=gpu:4" in r.stdout and not (tmp_path / "s").exists()
    bad = launch("serve", "hf:/m", "--profile", "no-such-profile", "--dry-run")
    assert bad.returncode != 0 and "no-such-profile" in (bad.stderr + bad.stdout)


def test_backend_choice_and_vllm_command() -> None:
    if not HAS_VLLM:
        assert resolve_backend("vllm:Qwen/Q") == ("http", "hf:Qwen/Q")
        assert resolve_backend("Qwen/Q") == ("http", "hf:Qwen/Q")
        with pytest.raises(MissingExtraError, match=r"veribatch\[gpu\]"):
            resolve_backend("vllm:Qwen/Q", "vllm")
    assert resolve_backend("hf:/m") == ("http", "hf:/m")
    assert vllm_serve_command("Qwen/Q", host="0.0.0.0", port=8000, tp=4, nodes=2, served_name="q",
                              python="/venv/bin/python") == [
        "/venv/bin/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Q",
        "--host", "0.0.0.0", "--port", "8000", "--tensor-parallel-size", "4",
        "--pipeline-parallel-size", "2", "--distributed-executor-backend", "ray",
        "--served-model-name", "q"]
    lo, hi = ephemeral_range()
    port = job_port("127.0.0.1")
    assert 10000 <= port < lo or port > hi


def test_serve_binds_the_node_address_never_all_interfaces(tmp_path: Path) -> None:
    assert node_address({"VERIBATCH_SERVE_HOST": "10.1.2.3"}) == "10.1.2.3"
    addr = node_address({})
    assert addr not in ("0.0.0.0", "") and "." in addr
    with pytest.raises(ValueError, match="every interface"):
        ServeJob(tmp_path, "hf:/m", host="0.0.0.0")
    job = ServeJob(tmp_path, "hf:/m", host="127.0.0.1")
    assert job.host == "127.0.0.1" and len(job.token) >= 32


def _unauthorized(url: str, token: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.post(f"{url}/chat/completions", headers=headers, timeout=30, json={
        "model": "m", "messages": [{"role": "user", "content": "Say hello."}]}).status_code


def test_engine_server_requires_the_token(hf_engine, chat_request) -> None:
    server = EngineServer(hf_engine, served_name="tiny", token="s3cret-token").start()
    try:
        assert _unauthorized(server.url) == 401
        assert _unauthorized(server.url, "wrong") == 401
        assert httpx.get(f"{server.url}/models", timeout=30).status_code == 401
        assert httpx.get(server.url.replace("/v1", "/health"), timeout=30).status_code == 200
        assert _unauthorized(server.url, "s3cret-token") == 200
    finally:
        server.stop()


def _pid_gone(pid: int, timeout: float = 20) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.2)
    return False


@pytest.mark.slow
def test_local_serve_stops_when_its_clients_finish(tmp_path: Path, tiny_model: Path, chat_request) -> None:
    d = tmp_path / "serve"
    r = launch("serve", f"hf:{tiny_model}", "--run-dir", str(d), "--heartbeat-s", "0.3", "--timeout", "90")
    assert r.returncode == 0, r.stdout + r.stderr
    ep = json.loads((d / ENDPOINT).read_text())
    assert re.search(r"endpoint: http://127\.0\.0\.1:\d+/v1", r.stdout)
    assert httpx.get(ep["health_url"]).status_code == 200
    # the token that guards it is in a file only its owner can read, and nowhere on stdout
    assert (d / ENDPOINT).stat().st_mode & 0o777 == 0o600
    assert ep["token"] and ep["token"] not in r.stdout + r.stderr
    assert _unauthorized(ep["url"]) == 401
    hb1 = json.loads((d / "heartbeat.json").read_text())["time"]
    with registered_client(d, "run-a") as url:
        assert url == ep["url"]
        engine = open_engine(f"openai:{tiny_model}", serve_dir=str(d))
        assert engine.generate([chat_request("Say hello.")])[0][0].text == "hello"
    # the last client left: the server stops by itself and withdraws its endpoint
    end = time.monotonic() + 30
    while not (d / EXIT).exists() and time.monotonic() < end:
        time.sleep(0.2)
    assert json.loads((d / EXIT).read_text())["reason"] == "all clients finished"
    assert not (d / ENDPOINT).exists()
    assert json.loads((d / "heartbeat.json").read_text())["time"] > hb1  # it was beating
    assert _pid_gone(ep["pid"])


@pytest.mark.slow
def test_local_serve_stop_command(tmp_path: Path, tiny_model: Path) -> None:
    d = tmp_path / "serve"
    assert launch("serve", f"hf:{tiny_model}", "--run-dir", str(d), "--no-wait").returncode == 0
    ep = wait_for_endpoint(d, 90)
    r = launch("cancel", str(d))  # `launch cancel` stops a serve directory too
    assert r.returncode == 0 and "STOP file" in r.stdout, r.stdout + r.stderr
    assert _pid_gone(ep["pid"]) and not (d / ENDPOINT).exists()
    assert launch("serve-stop", str(tmp_path)).returncode == 2  # not a serve directory


@pytest.mark.slurm
@pytest.mark.slow
def test_serve_job_on_the_real_slurm_cluster(slurm_cluster: dict[str, str], tmp_path: Path, tiny_model: Path,
                                             chat_request) -> None:
    env = slurm_cluster
    d = tmp_path / "serve"
    r = launch("serve", f"hf:{tiny_model}", "--profile", "local-test", "--run-dir", str(d),
               "--heartbeat-s", "0.5", "--timeout", "150", env=env, timeout=200)
    assert r.returncode == 0, r.stdout + r.stderr
    info = json.loads((d / "serve.json").read_text())
    job = info["job_id"]
    ep = json.loads((d / ENDPOINT).read_text())
    lo, hi = ephemeral_range()
    assert ep["job_id"] == job and (ep["port"] < lo or ep["port"] > hi)
    assert ep["host"] == "127.0.0.1"  # loopback unless asked (--host node / VERIBATCH_SERVE_HOST)
    assert (d / ENDPOINT).stat().st_mode & 0o777 == 0o600 and _unauthorized(ep["url"]) == 401
    engine = open_engine(f"openai:{tiny_model}", serve_dir=str(d))
    assert engine.generate([chat_request("Say hello.")])[0][0].text == "hello"
    stop = launch("serve-stop", str(d), env=env)
    assert stop.returncode == 0, stop.stderr
    assert not (d / ENDPOINT).exists() and (d / EXIT).exists()
    end = time.monotonic() + 30
    while time.monotonic() < end:
        q = subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True,
                           env={**os.environ, **env})
        if job not in q.stdout:
            break
        time.sleep(0.5)
    else:
        pytest.fail(f"serve job {job} still in squeue after serve-stop")


def test_a_line_break_in_a_value_never_becomes_a_shell_line(tmp_path: Path, cluster_profile: Path) -> None:
    """Every ``#SBATCH`` value passes the one writer's check (`executors.sbatch.sbatch_value`):
    a line break would end the directive and run the rest as a shell line in the job."""
    from veribatch.launch.executors.sbatch import SbatchValueError, sbatch_parameters

    injected = tmp_path / "evil.yaml"
    injected.write_text(PROFILE.replace("account: proj-verif-123", 'account: "x\\ntouch /tmp/pwned"'))
    with pytest.raises(SbatchValueError, match="control character"):
        build_sbatch_script(tmp_path, "hf:/m", load_profile(str(injected)))
    r = launch("serve", "hf:/m", "--profile", str(cluster_profile), "--run-dir", str(tmp_path / "a\nb"),
               "--dry-run")
    assert r.returncode == 2 and "control character" in r.stderr and "#SBATCH" not in r.stdout, r
    assert not (tmp_path / "a\nb").exists()
    # a blank in a path is one quoted argument (sbatch reads "..." as one), not a cut
    spaced = build_sbatch_script(tmp_path / "a b", "hf:/m", load_profile(str(cluster_profile)))
    assert f'#SBATCH --output="{(tmp_path / "a b").resolve()}/serve-%j.log"' in spaced.splitlines()
    # the arrays' parameters (a run name in the job name) pass the same check
    profile = load_profile(str(cluster_profile))
    stage = {"cpus_per_task": 1, "mem_gb": 1, "gpus_per_task": 0, "resource": "cpu"}
    ok = sbatch_parameters(profile, profile.for_resource("cpu", "s"), stage, 10, job_name="vb-run-s")
    assert ok["job_name"] == "vb-run-s"
    with pytest.raises(SbatchValueError):
        sbatch_parameters(profile, profile.for_resource("cpu", "s"), stage, 10,
                          job_name="vb-x\n#SBATCH --account=other-s")
