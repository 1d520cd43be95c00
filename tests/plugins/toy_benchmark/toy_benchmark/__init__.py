"""A benchmark in a package of its own: each instance is an arithmetic expression and the
answer its dataset claims; the one stage evaluates the expression and says whether the
claim holds.  Installed as an entry point (pyproject.toml), it is `launch toyarith` with
every option, executor and run command, with no edit in veribatch."""

from __future__ import annotations

import ast
import hashlib
import json
import operator
import time
from collections.abc import Iterator
from importlib import resources

from veribatch.tasks.base import (
    DatasetError,
    Instance,
    InstanceResult,
    RunConfig,
    Stage,
    StageContext,
    Task,
    UnknownNameError,
)

DATASETS = {"sample": "5 expressions shipped in this package (one claim wrong, one undefined)"}
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
        ast.FloorDiv: operator.floordiv, ast.Div: operator.truediv, ast.Pow: operator.pow}


def _data(dataset: str) -> bytes:
    if dataset not in DATASETS:
        raise UnknownNameError(f"unknown dataset {dataset!r} for toyarith; known: {', '.join(DATASETS)}")
    return resources.files(__package__).joinpath(f"{dataset}.jsonl").read_bytes()


def evaluate(node: ast.expr) -> int | float:
    """The value of an expression of numbers and + - * / // ** (no names, no calls)."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](evaluate(node.left), evaluate(node.right))
    raise ValueError(f"not allowed: {ast.dump(node)}")


class ToyArith(Task):
    name = "toyarith"
    default_dataset = "sample"
    tables_module = "toy_benchmark.tables"
    cli_module = "toy_benchmark.cli"
    verifiers = ("none",)  # the check is an evaluation; no verifier runs

    def datasets(self) -> dict[str, str]:
        return dict(DATASETS)

    def load(self, dataset: str, *, limit: int | None = None) -> list[Instance]:
        instances = []
        for line_no, line in enumerate(_data(dataset).decode().splitlines(), 1):
            try:
                row = json.loads(line)
                payload = {"expression": str(row["expression"]), "answer": int(row["answer"])}
                instances.append(Instance(f"toyarith/{dataset}/{row['id']}", self.name, dataset, payload))
            except (ValueError, KeyError) as e:
                raise DatasetError(f"toy_benchmark/{dataset}.jsonl line {line_no}: {e}") from None
        return instances[:limit]

    def dataset_hash(self, dataset: str) -> str:
        return hashlib.sha256(_data(dataset)).hexdigest()

    def stages(self, config: RunConfig) -> list[Stage]:
        return [Stage("check", "cpu", check, mem_gb=1, seconds_per_instance=1.0,
                      verdict_column="outcome", time_column="check_s")]


def check(instances: list[Instance], ctx: StageContext) -> Iterator[InstanceResult]:
    """One record per instance: `outcome` is correct, wrong, or error (the expression has
    no value: a division by zero, a syntax error) — a recorded status, never an exception."""
    for inst in instances:
        start = time.perf_counter()
        expression, claimed = inst.payload["expression"], inst.payload["answer"]
        try:
            value = evaluate(ast.parse(expression, mode="eval").body)
            outcome, error = ("correct" if value == claimed else "wrong"), None
        except (SyntaxError, ValueError, ArithmeticError) as e:
            value, outcome, error = None, "error", f"{type(e).__name__}: {e}"
        ctx.progress()
        yield InstanceResult(inst.id, [{
            "expression": expression, "claimed": claimed,
            "value": None if value is None else str(value), "outcome": outcome, "error": error,
            "check_s": round(time.perf_counter() - start, 6)}])
