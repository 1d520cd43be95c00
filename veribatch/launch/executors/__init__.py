"""Executors: how (stage, shard) pairs get run.  Both call `launch.shard_loop.run_shard`."""

from .base import Executor, SubmitResult, make_executor

__all__ = ["Executor", "SubmitResult", "make_executor"]
