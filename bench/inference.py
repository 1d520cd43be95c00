"""Throughput of each engine available here on the tiny Qwen2 model, and what scheduling costs.

    python bench/inference.py [--requests 64] [--repeat 3]

Prints requests/s and completion tokens/s for: `hf:` called directly, `hf:` through a Ray
actor pool (1 and 2 replicas), and `openai:` against the local OpenAI-compatible server
(`inference.serve_http`) serving the same model — each side by side with its ratio to the
direct call, plus the fixed cost of one single-request call (the actor pool's and the HTTP
round trip's overhead) and the start-up times.  The tiny model makes generation cheap, so
the overheads show; on a real model they are amortised over far longer generations.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from veribatch.inference import open_engine  # noqa: E402
from veribatch.inference.tiny_model import DEFAULT_PAIRS, cached_tiny_qwen2  # noqa: E402
from veribatch.inference.types import Completion, Engine, Message, Request, Sampling  # noqa: E402


def requests(n: int) -> list[Request]:
    return [Request(id=f"r{i}", messages=(Message("user", DEFAULT_PAIRS[i % len(DEFAULT_PAIRS)][0]),),
                    sampling=Sampling(max_tokens=48)) for i in range(n)]


def timed(fn: Callable[[], list[list[Completion]]], repeat: int) -> tuple[float, int]:
    """Median wall time over `repeat` runs (after one warm-up) and completion tokens per run."""
    fn()
    times, tokens = [], 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        tokens = sum(c.completion_tokens for cs in out for c in cs)
        errors = [c.error for cs in out for c in cs if c.error]
        if errors:
            raise SystemExit(f"bench: engine returned errors: {errors[:3]}")
    return statistics.median(times), tokens


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    model = cached_tiny_qwen2()
    reqs = requests(args.requests)
    one = requests(1)
    rows: list[tuple[str, float, int, float, float]] = []  # name, batch s, tokens, single s, start s

    def measure(name: str, engine: Engine, start_s: float) -> None:
        batch_s, tokens = timed(lambda: engine.generate(reqs), args.repeat)
        single_s, _ = timed(lambda: engine.generate(one), max(args.repeat, 5))
        rows.append((name, batch_s, tokens, single_s, start_s))

    t0 = time.perf_counter()
    # One torch thread per engine process: on a shared node, OpenMP threads that outnumber
    # free cores spin against each other and make the numbers meaningless.
    direct = open_engine(f"hf:{model}", batch_size=16, threads=1)
    measure("hf direct", direct, time.perf_counter() - t0)

    try:
        import ray
    except ImportError:
        print("ray not installed: skipping the actor pool (pip install 'veribatch[ray]')")
    else:
        t0 = time.perf_counter()
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
        ray_start = time.perf_counter() - t0
        for replicas in (1, 2):
            t0 = time.perf_counter()
            with open_engine(f"hf:{model}", replicas=replicas, threads=1, batch_size=16,
                             chunk_size=max(1, args.requests // (2 * replicas))) as pool:
                measure(f"hf ray pool x{replicas}", pool, ray_start + time.perf_counter() - t0)
        ray.shutdown()

    from veribatch.inference.serve_http import EngineServer

    t0 = time.perf_counter()
    server = EngineServer(direct, served_name="tiny", max_batch=16).start()
    client = open_engine("openai:tiny", base_url=server.url, concurrency=16)
    measure("openai -> local server", client, time.perf_counter() - t0)
    server.stop()
    direct.close()

    base_batch, base_tokens, base_single = rows[0][1], rows[0][2], rows[0][3]
    print(f"tiny Qwen2 model {model}; {args.requests} greedy requests (max 48 tokens), "
          f"median of {args.repeat}; {os.cpu_count()} CPUs")
    head = (f"{'engine':<24}{'req/s':>9}{'tok/s':>10}{'batch s':>9}{'x direct':>10}"
            f"{'1-req ms':>10}{'x direct':>10}{'start s':>9}")
    print(head)
    print("-" * len(head))
    for name, batch_s, tokens, single_s, start_s in rows:
        print(f"{name:<24}{args.requests / batch_s:>9.1f}{tokens / batch_s:>10.0f}{batch_s:>9.3f}"
              f"{batch_s / base_batch:>10.2f}{single_s * 1000:>10.1f}{single_s / base_single:>10.2f}"
              f"{start_s:>9.2f}")
    print("(overhead per call = 1-req time minus direct: "
          + ", ".join(f"{n}: {(s - base_single) * 1000:+.1f} ms" for n, _, _, s, _ in rows[1:]) + ")")
    assert all(r[2] == base_tokens for r in rows), "engines disagree on token counts"
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
