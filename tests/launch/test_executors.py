"""The executor table: every name it lists is an `Executor` of that name, built the same way."""

from __future__ import annotations

import pytest

from veribatch.launch.executors import executor_class, executor_names
from veribatch.launch.executors.base import Executor
from veribatch.launch.run_control import ExecChoice


@pytest.mark.parametrize("name", executor_names())
def test_every_registered_executor_is_built_from_a_choice(name):
    cls = executor_class(name)
    assert issubclass(cls, Executor) and cls.name == name
    assert isinstance(cls.foreground, bool) and cls.lock_phase
    choice = ExecChoice(name, "local-test", workers=1)
    stages = [("work", "cpu"), ("check", "cpu")]
    choice.validate(stages)
    assert isinstance(cls.from_choice(choice, [r for _, r in stages], progress=False), cls)


def test_an_unknown_executor_names_the_known_ones():
    with pytest.raises(ValueError, match="known executors: local, slurm"):
        ExecChoice("pbs").validate([("work", "cpu")])
    with pytest.raises(ValueError, match="known executors: local, slurm"):
        executor_class("pbs")
