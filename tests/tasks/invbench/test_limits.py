"""What a query is allowed: wall-clock only (no CPU cap unless asked), memory per verifier,
and the decision timeout with its source; what a model may write (max_tokens)."""

from __future__ import annotations

import math

import pytest

from veribatch.launch.run_control import plan_run
from veribatch.tasks.base import RunConfig
from veribatch.tasks.invbench import InvBenchTask
from veribatch.tasks.invbench.stages import (
    MAX_TOKENS,
    _decision_timeout,
    _limits,
    build_stages,
)
from veribatch.tasks.verifier import query_memory_mb as memory_mb


def _config(**options: object) -> RunConfig:
    return RunConfig(task="invbench", dataset="sample", dataset_hash="x", verifier=str(options.pop("verifier", "z3")),
                     options={**InvBenchTask().default_options(), **options})


def test_no_cpu_cap_unless_asked() -> None:
    assert _limits(_config(), 7.5).cpu_s == math.inf and _limits(_config(), 7.5).wall_s == 7.5
    assert _limits(_config(cpu_limit_s=30), 7.5).cpu_s == 30.0


def test_memory_follows_the_verifier_unless_given() -> None:
    ua = _config(verifier="uautomizer")
    assert memory_mb(ua) == 16384 and _limits(ua, 1).memory_mb == 16384  # InvBench's harness: 16 GB
    assert memory_mb(_config()) == 4096 and memory_mb(_config(verifier="uautomizer", memory_mb=8000)) == 8000
    verify = next(s for s in build_stages(ua) if s.name == "verify")
    assert verify.mem_gb == 32  # d_a and d_b at 16 GB each
    assert verify.cpus_per_task == 4 and build_stages(ua)[0].cpus_per_task == 2  # ~1.6 cores per query
    assert build_stages(_config())[0].cpus_per_task == 1


def test_plan_records_the_resolved_limits() -> None:
    plan = plan_run("invbench", options=["cpu_limit_s=null"])
    assert plan.config.options["memory_mb"] == 4096 and plan.config.options["cpu_limit_s"] is None
    with pytest.raises(ValueError, match="positive"):
        plan_run("invbench", options=["memory_mb=0"])


def test_decision_timeout_and_its_source() -> None:
    solved = {"solved": True, "baseline_time_s": 1.25}
    unsolved = {"solved": False, "baseline_time_s": 600.0}
    from veribatch.tasks.base import Instance

    inst = Instance("invbench/easy/a.c", "invbench", "easy", {}, {"reference_time_s": 7.3})
    bare = Instance("invbench/easy/b.c", "invbench", "easy", {}, {})
    assert _decision_timeout(_config(budget_s=60), solved, inst) == (1.25, "baseline")
    assert _decision_timeout(_config(budget_s=60), unsolved, inst) == (60.0, "budget-fallback")
    # the paper's setting, one option away: upstream's recorded UAutomizer time
    assert _decision_timeout(_config(budget_s=60, timeout_source="reference"), solved, inst) == (7.3, "reference")
    assert _decision_timeout(_config(budget_s=60, timeout_source="reference"), solved, bare) == (60.0, "budget-fallback")
    assert _decision_timeout(_config(budget_s=60, timeout_source="budget"), solved, inst) == (60.0, "budget")


def test_max_tokens_default_leaves_room_for_reasoning() -> None:
    assert InvBenchTask().default_sampling("openai:o3")["max_tokens"] == MAX_TOKENS == 8192
    assert InvBenchTask().default_sampling(None) == {}
