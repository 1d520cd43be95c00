"""Provider rules against a local server that refuses what the providers document refusing
(`tests.support.provider_server`): the bodies sent per model family, a 400 that stops the
run with the provider's message, a 429 whose Retry-After is honoured."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import launch
from tests.support.provider_server import ProviderServer
from veribatch.inference import open_engine
from veribatch.inference.errors import EngineError, ProviderRefusedError
from veribatch.inference.types import Message, Request, Sampling

# A REFUTE-like reasoning-model request: greedy as recorded by the run, a large budget.
SAMPLING = Sampling(temperature=0.0, top_p=1.0, max_tokens=50000, seed=0)


def _req(rid: str = "r0") -> Request:
    return Request(id=rid, messages=(Message("user", "Find an input."),), sampling=SAMPLING)


@pytest.fixture
def provider() -> Iterator[ProviderServer]:
    server = ProviderServer()
    yield server
    server.close()


BODIES = {
    # the paper's "o3-mini (high)": no temperature/top_p, max_completion_tokens, the effort
    ("o3-mini", "high"): {"n": 1, "max_completion_tokens": 50000, "seed": 0,
                          "reasoning_effort": "high"},
    ("o4-mini", None): {"n": 1, "max_completion_tokens": 50000, "seed": 0},
    ("gpt-4o", None): {"n": 1, "temperature": 0.0, "top_p": 1.0, "max_completion_tokens": 50000,
                       "seed": 0},
    # a vLLM server (`vllm serve`, `launch serve`): what vLLM's OpenAI server takes
    ("Qwen/Qwen2.5-7B-Instruct", None): {"n": 1, "temperature": 0.0, "top_p": 1.0,
                                         "max_tokens": 50000, "seed": 0},
}


@pytest.mark.parametrize("model, effort", list(BODIES))
def test_the_body_sent_per_model_family(provider: ProviderServer, model: str,
                                        effort: str | None) -> None:
    options = {"reasoning_effort": effort} if effort else {}
    engine = open_engine(f"openai:{model}", base_url=provider.url, timeout_s=90, **options)
    out = engine.generate([_req()])[0][0]
    assert out.error is None and out.text == "x >= 0", out.error
    (body,) = provider.bodies
    assert body.pop("messages") == [{"role": "user", "content": "Find an input."}]
    assert body == {"model": model, **BODIES[(model, effort)]}
    # the record says what was sent and the per-request time limit
    assert out.sampling["sent"] == BODIES[(model, effort)] and out.sampling["time_limit_s"] == 90
    assert out.sampling["temperature"] == 0.0  # the run's own sampling is kept beside it


def test_an_effort_the_family_does_not_take_is_refused_before_any_request(provider) -> None:
    with pytest.raises(EngineError, match="takes no reasoning_effort"):
        open_engine("openai:gpt-4o", base_url=provider.url, reasoning_effort="high")
    with pytest.raises(EngineError, match="low, medium, high"):
        open_engine("openai:o3-mini", base_url=provider.url, reasoning_effort="max")
    assert provider.bodies == []


def test_a_refused_parameter_stops_the_batch_with_the_providers_message(provider) -> None:
    """o1-mini refuses reasoning_effort (400): raised at once, not one error per request."""
    engine = open_engine("openai:o1-mini", base_url=provider.url, reasoning_effort="high",
                         concurrency=1, backoff_s=0.01)
    with pytest.raises(ProviderRefusedError) as exc:
        engine.generate([_req(f"r{i}") for i in range(4)])
    msg = str(exc.value)
    assert "HTTP 400" in msg and "'reasoning_effort' is not supported with this model." in msg
    assert "code=unsupported_parameter" in msg and '"reasoning_effort": "high"' in msg
    assert len(provider.bodies) == 1 and engine.retries == 0


def test_a_prompt_too_long_stays_that_requests_error(scripted_context_400) -> None:
    engine = open_engine("openai:gpt-4o", base_url=scripted_context_400.url, backoff_s=0.01)
    out = engine.generate([_req()])[0][0]
    assert out.finish_reason == "error" and "maximum context length" in (out.error or "")


@pytest.fixture
def scripted_context_400() -> Iterator[ProviderServer]:
    from tests.inference.test_openai import Scripted

    body = {"error": {"message": "This model's maximum context length is 128000 tokens.",
                      "type": "invalid_request_error", "param": "messages",
                      "code": "context_length_exceeded"}}
    server = Scripted([(400, body, {}, 0.0)])
    yield server
    server.close()


def test_429_waits_as_long_as_retry_after_says() -> None:
    server = ProviderServer(rate_limited=2, retry_after="1")
    try:
        engine = open_engine("openai:o4-mini", base_url=server.url, backoff_s=0.01)
        out = engine.generate([_req()])[0][0]
    finally:
        server.close()
    assert out.error is None and engine.retries == 2 and len(server.bodies) == 3
    gaps = [b - a for a, b in zip(server.arrivals, server.arrivals[1:], strict=False)]
    assert all(g >= 0.95 for g in gaps), gaps  # not the 0.01 s back-off: the header's 1 s
    assert out.latency_s >= 1.9  # the record's time includes the waits


def _refute_export(tmp_path: Path) -> str:
    from veribatch.tasks.refute import data

    rows = [json.loads(line) for line in (data.SAMPLE_DIR / "train.jsonl").read_text().splitlines()]
    path = tmp_path / "export" / "train.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows if r["problem_id"] == "S12"))
    return str(path.parent)


FAST = ("-o", "search_s=3", "-o", "filter_s=2", "-o", "run_s=3", "-o", "generator_s=5",
        "-o", "prompts=veribatch")


def test_launch_with_reasoning_effort_and_a_refusal_that_stops_the_run(
        provider: ProviderServer, tmp_path: Path) -> None:
    """The card's command against the provider: -o reasoning_effort=high reaches the body and
    the run id; a 400 fails the run with the provider's words, not a table of zeros."""
    dataset = _refute_export(tmp_path)
    env = {"OPENAI_BASE_URL": provider.url}
    common = ("refute", "--dataset", dataset, *FAST, "--runs-dir", str(tmp_path / "runs"), "-q")
    ok = launch(*common, "--model", "openai:o3-mini", "-o", "reasoning_effort=high", env=env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert {b["model"] for b in provider.bodies} == {"o3-mini"}
    assert all(b["reasoning_effort"] == "high" and "max_tokens" not in b
               and "temperature" not in b for b in provider.bodies)
    low = launch(*common, "--model", "openai:o3-mini", "-o", "reasoning_effort=low", "--dry-run", env=env)
    assert low.returncode == 0 and _run_id(low.stdout) != _run_id(ok.stdout + ok.stderr)

    provider.bodies.clear()
    refused = launch(*common, "--model", "openai:o1-mini", "-o", "reasoning_effort=high", env=env)
    assert refused.returncode not in (0, 2), refused.stdout + refused.stderr
    said = refused.stdout + refused.stderr
    assert "'reasoning_effort' is not supported with this model." in said, said
    assert "| zero-shot" not in said  # no table of zeros
    assert len(provider.bodies) == 1


def _run_id(text: str) -> str:
    import re

    m = re.search(r"(?:run|plan) (\S+-[0-9a-f]{12})", text)
    assert m, text
    return m.group(1)


@pytest.mark.parametrize("model, message", [
    ("openai:gpt-4o", "takes no reasoning_effort"),
    ("hf:Qwen/Qwen2.5-0.5B", "an openai: engine option"),
])
def test_an_engine_option_the_model_cannot_take_exits_2(model: str, message: str,
                                                        tmp_path: Path) -> None:
    r = launch("refute", "--model", model, "-o", "reasoning_effort=high", "--dry-run",
               "--runs-dir", str(tmp_path))
    assert r.returncode == 2 and message in r.stderr, r.stderr
