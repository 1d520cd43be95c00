"""The generate stage every task shares: requests per instance, one record per answer.

A task writes no loop.  It subclasses `Generate` and says what it alone knows, the way a
datatrove filter says only which documents to keep:

- `request` — the engine request for an instance, or several (a non-empty list: InvBench's
  ``-o prompt=wonda`` asks once per loop marker), or instead a record saying why the
  instance has none (a program the front end rejects, an upstream record missing);
- `request_columns` — with several requests, what tells their answers apart (the
  marker); the stage's `record_key` is then those columns and ``sample_index``;
- `columns` — what each answer's record carries beyond the common columns;
- `default_max_tokens` (or `max_tokens` per config) — the answer budget when the user
  gives no ``--max-tokens``;
- `reads` — the upstream stage whose records `request` gets, if any;
- `arm`, `seconds_per_instance` — where the defaults do not fit.

and puts ``Generate.stage(config)`` among its stages when the config has a model.  The
loop, written once here: the run's sampling (`tasks.sampling.sampling_for`), every
instance's request (the no-request records are yielded first, before any model is
loaded), the run's engine behind the run's completion cache (`open_run_engine`: a resumed
shard does not ask again), batches of ``-o generate_batch`` requests (default 16; the
requests of one instance may span batches, and its records are yielded together once its
last request is answered), and per answer one record::

    inference.completion_to_record(...)   request_key, sample_index, completion_text, ...
                                          (so `replay:RUN` can re-read the run later)
    arm                                   "model" (`arm`)
    status                                "ok", or "error" when the engine failed it
    model_spec                            the run's --model
    generation_time_s                     the request's own Completion.latency_s
    ...                                   the task's `columns`

The engine's load (`Engine.load_s`: 0 when an element's earlier shard loaded it) is
noted in the shard's stats.json (``notes.engine_load_s``, `open_run_engine`), which
sizing reads back.

The stage declares ``verdict_column="status"``, ``time_column="generation_time_s"`` and
``record_key=("sample_index",)`` (``(*request_key, "sample_index")`` with several requests),
so `launch regress` compares generate stages of every task alike.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from veribatch.tasks.base import Instance, InstanceResult, Record, RunConfig, Stage, StageContext
from veribatch.tasks.sampling import sampling_for

if TYPE_CHECKING:  # inference is imported only when a stage generates
    from veribatch.inference.types import Completion, Engine, Request, Sampling

STAGE = "generate"
ARM_MODEL = "model"
DEFAULT_BATCH = 16
_T = TypeVar("_T")


def batches(items: Sequence[_T], size: int) -> Iterator[Sequence[_T]]:
    """`items` in consecutive slices of at most `size` (at least 1)."""
    size = max(1, size)
    for start in range(0, len(items), size):
        yield items[start:start + size]


@contextlib.contextmanager
def open_run_engine(ctx: StageContext) -> Iterator[Engine]:
    """The run's model (``--model``) behind the run's completion cache
    (``RUN/cache/completions``): every stage that asks a model (generate, REFUTE's agent)
    shares one cache, so a resumed shard gets its answers back instead of asking again.
    What opening it took (`Engine.load_s`) is noted in the shard's stats.json
    (``notes.engine_load_s``), which sizing reads back (`launch.measured`)."""
    from veribatch.inference import open_engine
    from veribatch.inference.providers import engine_options

    assert ctx.config.model is not None, f"stage {ctx.stage!r} needs --model"
    options = engine_options(ctx.config.model, dict(ctx.config.options))  # -o reasoning_effort=...
    with open_engine(ctx.config.model, cache_dir=ctx.run_dir / "cache" / "completions",
                     **options) as engine:
        if engine.load_s is not None:
            ctx.note("engine_load_s", engine.load_s)
        yield engine


class Generate(ABC):
    """What a task tells the shared generate stage (see the module docstring).

    Subclasses override `request` and, as needed, `columns`, `default_max_tokens` or
    `max_tokens`, `reads`, `arm`, `seconds_per_instance`; `run` and `stage` are the
    machinery and are not overridden."""

    default_max_tokens: ClassVar[int] = 4096
    # The upstream stage whose records of an instance `request` receives (DafnyComp:
    # "strip"); it becomes the stage's `needs`.
    reads: ClassVar[str | None] = None
    # The order of the columns after the completion's, when it is not common-then-task: the
    # column order is part of a task's record format (its ledgers and parquet files), so a
    # task whose format fixes another order names it here.  A new task leaves it empty.
    layout: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def request(self, inst: Instance, config: RunConfig, sampling: Sampling,
                upstream: list[Record]) -> Request | list[Request] | Record:
        """The request for `inst` (its id is the record's ``request_id``), several (a
        non-empty list, ids distinct, told apart by `request_columns`), or the one record
        `inst` gets instead when it cannot be asked (it must say why in ``status``).
        `upstream`: the `reads` stage's records of `inst` ([] when none or no `reads`)."""

    def columns(self, inst: Instance, config: RunConfig, completion: Completion) -> Record:
        """Columns of one answer's record beyond the common ones (prompt version...)."""
        return {}

    def request_key(self, config: RunConfig) -> tuple[str, ...]:
        """The columns (from `request_columns`) that tell an instance's requests apart; ()
        when the config asks one request per instance."""
        return ()

    def request_columns(self, inst: Instance, config: RunConfig, request: Request) -> Record:
        """Columns of every answer to `request` (its `request_key` columns among them)."""
        return {}

    def max_tokens(self, config: RunConfig) -> int:
        """The answer budget when the run's sampling sets none."""
        return self.default_max_tokens

    def arm(self, config: RunConfig) -> str:
        """The ``arm`` column of every answer."""
        return ARM_MODEL

    def seconds_per_instance(self, config: RunConfig) -> float:
        """Wall-time estimate per instance (sizes SLURM time limits)."""
        return 30.0

    def stage(self, config: RunConfig) -> Stage:
        """The stage, on the GPU partition (one GPU; a profile whose gpu partition sets
        ``gpus_per_task: 0`` — CPU-only test clusters — overrides it)."""
        return Stage(STAGE, "gpu", self.run, needs=(self.reads,) if self.reads else (),
                     gpus_per_task=1, cpus_per_task=1, mem_gb=2,
                     seconds_per_instance=self.seconds_per_instance(config),
                     verdict_column="status", time_column="generation_time_s",
                     record_key=(*self.request_key(config), "sample_index"))

    def run(self, instances: list[Instance], ctx: StageContext) -> Iterator[InstanceResult]:
        from veribatch.inference.types import Request

        config = ctx.config
        sampling = sampling_for(config, self.max_tokens(config))
        upstream = ctx.upstream(self.reads) if self.reads else {}
        ready: list[tuple[Instance, Request]] = []
        pending: dict[str, int] = {}  # instance id → its requests not yet answered
        for inst in instances:
            got = self.request(inst, config, sampling, upstream.get(inst.id, []))
            if isinstance(got, Request):
                got = [got]
            if isinstance(got, list):
                if not got or len({r.id for r in got}) != len(got):
                    raise ValueError(f"{type(self).__name__}.request({inst.id}): requests must be "
                                     "a non-empty list with distinct ids")
                ready.extend((inst, req) for req in got)
                pending[inst.id] = len(got)
            else:
                ctx.progress()
                yield InstanceResult(inst.id, [got])
        if not ready:
            return
        done: dict[str, list[Record]] = {}
        with open_run_engine(ctx) as engine:
            for chunk in batches(ready, int(config.options.get("generate_batch", DEFAULT_BATCH))):
                answers = engine.generate([req for _, req in chunk])
                for (inst, req), completions in zip(chunk, answers, strict=True):
                    done.setdefault(inst.id, []).extend(
                        self._record(engine, inst, req, c, config) for c in completions)
                    pending[inst.id] -= 1
                    if pending[inst.id] == 0:  # the instance's last request: all its records
                        ctx.progress()
                        yield InstanceResult(inst.id, done.pop(inst.id))

    def _record(self, engine: Engine, inst: Instance, req: Request, c: Completion,
                config: RunConfig) -> Record:
        from veribatch.inference import completion_to_record

        head = completion_to_record(engine, req, c)
        tail: dict[str, Any] = {"arm": self.arm(config), "status": "error" if c.error else "ok",
                                "model_spec": config.model, "generation_time_s": c.latency_s,
                                **self.request_columns(inst, config, req), **self.columns(inst, config, c)}
        if self.layout:
            if set(self.layout) != set(tail):
                raise ValueError(f"{type(self).__name__}.layout {self.layout} does not name the "
                                 f"record's columns {tuple(tail)}")
            tail = {k: tail[k] for k in self.layout}
        return {**head, **tail}
