"""bench/overhead.py keeps working (tiny sizes; the real figures come from running it)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "overhead.py"


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_overhead", BENCH)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_overhead_bench_on_tiny_sizes():
    bench = load_bench()
    r = bench.local_overhead(12, shards=2, workers=2, sleep_s=0.0, iterations=10)
    assert r["instances"] == 12 and r["wall_s"] > 0 and r["work_s"] > 0
    p = bench.planning(40)
    assert p["counts"]["work"] == {"done": 24, "failed": 8, "pending": 8}
    assert p["resume_would_run"] == {"work": 16, "check": 16}
