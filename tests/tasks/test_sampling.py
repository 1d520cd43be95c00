"""`--n` and `-o n_samples` are one knob, and a model run records its temperature: the same
rule for every task (`tasks.sampling`), checked through planning as `launch <task>` does it."""

from __future__ import annotations

import pytest

from veribatch.launch.run_control import plan_run
from veribatch.tasks.sampling import sampling_for

MODEL = "hf:Org/model"  # a hub name: planning checks its form, nothing is downloaded


@pytest.mark.parametrize("task", ["invbench", "dafnycomp", "refute"])
def test_n_is_n_samples_and_the_temperature_is_recorded(task: str, request: pytest.FixtureRequest) -> None:
    if task == "refute":  # its default prompts are the authors' templates: served locally
        request.getfixturevalue("prompts_server")
    # REFUTE samples as its authors' harness did, at 0.2 for any number of samples
    # (tests/tasks/refute/test_harness_prompts.py); the others: greedy for one, 0.7 for several
    several, one = (0.2, 0.2) if task == "refute" else (0.7, 0.0)
    best_of = plan_run(task, model=MODEL, sampling={"n": 4}).config
    assert best_of.options["n_samples"] == 4 and "n" not in best_of.sampling
    assert best_of.sampling["temperature"] == several
    greedy = plan_run(task, model=MODEL).config
    assert greedy.options["n_samples"] == 1 and greedy.sampling["temperature"] == one
    assert greedy.identity() != best_of.identity()
    s = sampling_for(best_of, max_tokens=1)
    assert (s.n, s.temperature, s.max_tokens) == (4, several, best_of.sampling["max_tokens"])
    assert "temperature" not in plan_run(task).config.sampling  # the reference arms sample nothing
    with pytest.raises(ValueError, match="--n 4 contradicts -o n_samples=2"):
        plan_run(task, model=MODEL, sampling={"n": 4}, options=["n_samples=2"])
