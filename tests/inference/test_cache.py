"""The completion cache: a killed generate shard resumes without re-asking."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from veribatch.inference import open_engine
from veribatch.inference.cache import CACHE_FILE, CachingEngine, CompletionCache
from veribatch.inference.records import request_key


def test_second_engine_answers_from_cache(tmp_path: Path, hf_engine, tiny_pairs, chat_request) -> None:
    reqs = [chat_request(p, f"r{i}") for i, (p, _) in enumerate(tiny_pairs)]
    first = CachingEngine(hf_engine, tmp_path)
    a = first.generate(reqs)
    assert (first.hits, first.misses) == (0, len(reqs))
    second = CachingEngine(hf_engine, tmp_path)  # as a resumed shard would open it
    b = second.generate(reqs + [chat_request(tiny_pairs[0][0], "fresh", max_tokens=5)])
    assert (second.hits, second.misses) == (len(reqs), 1)
    # cached completions are the recorded ones (same latency), not regenerated
    assert [c[0].to_json() for c in b[: len(reqs)]] == [c[0].to_json() for c in a]
    # same prompt under another request id: a hit, re-labelled with the new id
    again = second.generate([chat_request(tiny_pairs[1][0], "other-id")])[0][0]
    assert again.request_id == "other-id" and again.text == a[1][0].text
    assert request_key(second, reqs[0]) == reqs[0].key(second.cache_identity)


def test_torn_line_is_skipped_and_errors_are_not_cached(tmp_path: Path, chat_request) -> None:
    (tmp_path / CACHE_FILE).write_text('{"key": "k1", "completions": []}\n{"key": "k2", "compl')
    cache = CompletionCache(tmp_path)
    assert cache.torn_lines == 1 and len(cache) == 1
    # An overloaded server (503 through the retries) yields error completions: recorded, never
    # cached.  (A refused connection is no record at all: the shard fails, EndpointLostError.)
    from tests.inference.test_openai import Scripted

    server = Scripted([], default=(503, {"error": "overloaded"}, {}, 0.0))
    try:
        engine = CachingEngine(open_engine("openai:m", base_url=server.url, max_retries=0), tmp_path)
        out = engine.generate([chat_request("hi")])[0]
    finally:
        server.close()
    assert out[0].finish_reason == "error" and out[0].error
    assert len(CompletionCache(tmp_path)) == 1
    # a later append starts on a fresh line despite the torn one
    CompletionCache(tmp_path).put_many([("k3", out)])
    reloaded = CompletionCache(tmp_path)
    assert "k3" in reloaded._entries and reloaded.torn_lines == 1


SHARD = textwrap.dedent("""
    import sys, time
    from veribatch.inference import open_engine
    from veribatch.inference.types import Message, Request, Sampling
    engine = open_engine("hf:" + sys.argv[1], cache_dir=sys.argv[2])
    for i in range(int(sys.argv[3])):
        req = Request(id=f"q{i}", messages=(Message("user", "Say hello."),),
                      sampling=Sampling(max_tokens=4 + i % 3, seed=i))
        engine.generate([req])
        print("done", i, flush=True)
        time.sleep(0.3)
""")


@pytest.mark.slow
def test_killed_shard_resumes_without_reasking(tmp_path: Path, tiny_model: Path, hf_engine) -> None:
    from veribatch.inference.types import Message, Request, Sampling

    n = 30
    proc = subprocess.Popen([sys.executable, "-c", SHARD, str(tiny_model), str(tmp_path), str(n)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    done = 0
    for line in proc.stdout:
        done += line.startswith("done")
        if done == 3:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    lines = (tmp_path / CACHE_FILE).read_text().splitlines()
    kept = len([json.loads(x) for x in lines])
    assert 3 <= kept < n
    resumed = CachingEngine(hf_engine, tmp_path)
    reqs = [Request(id=f"q{i}", messages=(Message("user", "Say hello."),),
                    sampling=Sampling(max_tokens=4 + i % 3, seed=i)) for i in range(n)]
    out = resumed.generate(reqs)
    assert (resumed.hits, resumed.misses) == (kept, n - kept)
    assert all(c[0].text == "hello" for c in out)
