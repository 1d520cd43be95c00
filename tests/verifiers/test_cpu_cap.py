"""A CPU-time cap only when asked for (`verifiers.result.Limits`): a multi-threaded tool given a
wall limit is not stopped when its CPU seconds pass that limit (UAutomizer's JVM was stopped
at 65-75 % of its wall budget when the CPU cap defaulted to the wall limit), and a cap that is
asked for still binds."""

from __future__ import annotations

import math
import shutil
import subprocess
from pathlib import Path

import pytest

from veribatch.verifiers.result import Limits
from veribatch.verifiers.runner import execute

# THREADS threads spin until the process has used TARGET_CPU CPU seconds (then "reached"), or
# until STOP_WALL wall seconds passed (then "short": the machine gave it too little
# parallelism to tell a cap at the wall limit from none).
BURNER = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static volatile int stop;
static double now(clockid_t c) { struct timespec t; clock_gettime(c, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static void *spin(void *arg) { volatile unsigned long x = 0; while (!stop) x++; return arg; }
int main(int argc, char **argv) {
    double target = atof(argv[1]), stop_wall = atof(argv[2]), t0 = now(CLOCK_MONOTONIC);
    int n = atoi(argv[3]); pthread_t th[64];
    for (int i = 0; i < n; i++) pthread_create(&th[i], 0, spin, 0);
    for (;;) {
        double cpu = now(CLOCK_PROCESS_CPUTIME_ID), wall = now(CLOCK_MONOTONIC) - t0;
        if (cpu >= target || wall >= stop_wall) {
            stop = 1;
            for (int i = 0; i < n; i++) pthread_join(th[i], 0);
            printf("%s cpu=%.2f wall=%.2f\n", cpu >= target ? "reached" : "short", cpu, wall);
            return 0;
        }
        struct timespec d = {0, 20000000}; nanosleep(&d, 0);
    }
}
"""
WALL_S = 6.0
TARGET_CPU_S = 7.0   # above the wall limit: a CPU cap equal to it stops the tool first
STOP_WALL_S = 4.8    # ends well inside the wall limit either way
THREADS = 4          # more than the 2 cores: a larger share of a loaded machine


@pytest.fixture(scope="module")
def burner(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc not installed")
    d = tmp_path_factory.mktemp("burner")
    (d / "burn.c").write_text(BURNER)
    subprocess.run([gcc, "-O1", "-pthread", "-o", str(d / "burn"), str(d / "burn.c")], check=True)
    return d / "burn"


def test_default_limits_have_no_cpu_cap() -> None:
    assert Limits(wall_s=10).cpu_cap == math.inf and Limits(wall_s=10, cpu_s=math.inf).cpu_cap == math.inf
    assert Limits(wall_s=10, cpu_s=3).cpu_cap == 3.0
    assert Limits(wall_s=10).key() == Limits(wall_s=10, cpu_s=math.inf).key()  # one limit, one cache key


def test_benchmark_callers_ask_for_no_cpu_cap() -> None:
    """CE-Bench's labelling and InvBench's queries build Limits from a wall budget only."""
    from veribatch.tasks.base import RunConfig
    from veribatch.tasks.cebench.stages import _limits as cebench_limits
    from veribatch.tasks.invbench import InvBenchTask
    from veribatch.tasks.invbench.stages import _limits as invbench_limits

    ce = RunConfig(task="cebench", dataset="sample", dataset_hash="x", options={"budget_s": 30})
    inv = RunConfig(task="invbench", dataset="sample", dataset_hash="x", options=InvBenchTask().default_options())
    assert cebench_limits(ce).cpu_cap == math.inf and cebench_limits(ce).wall_s == 30
    assert invbench_limits(inv, 7.5).cpu_cap == math.inf


def test_two_threads_past_the_wall_limit_in_cpu_are_not_stopped(burner: Path, tmp_path: Path) -> None:
    ex = execute([str(burner), str(TARGET_CPU_S), str(STOP_WALL_S), str(THREADS)], Limits(wall_s=WALL_S),
                 tmp_path / "o.log")
    out = ex.read_output().strip()
    assert ex.termination_reason == "exit", (ex.termination_reason, ex.cpu_s, ex.wall_s, out)
    if out.startswith("short"):
        pytest.skip(f"machine too loaded for {THREADS} threads to pass {WALL_S}s CPU in {STOP_WALL_S}s: {out}")
    assert out.startswith("reached") and ex.cpu_s >= WALL_S > ex.wall_s, (out, ex.cpu_s, ex.wall_s)


def test_a_cpu_cap_asked_for_still_binds_all_threads(burner: Path, tmp_path: Path) -> None:
    ex = execute([str(burner), "100", "30", "2"], Limits(wall_s=30, cpu_s=1.0), tmp_path / "o.log")
    assert ex.termination_reason == "cputime" and ex.wall_s < 10
    assert ex.cpu_s >= 1.0
