"""Data-parallel engine replicas as Ray actors (`open_engine(spec, replicas=N)`).

Each replica is one actor holding one engine (``hf:`` or ``vllm:``).  A replica gets
its own placement group of `tp` × `pp` bundles: with ``STRICT_PACK`` (pp = 1) all of a
replica's tensor-parallel workers land on one node, so TP all-reduces never cross the
network; a pipeline-parallel replica (a 480B-class model) uses ``PACK`` and may span
nodes.  The actor is scheduled in bundle 0 and captures child tasks, so vLLM's own Ray
workers (``distributed_executor_backend="ray"``) are placed in the same group.

Requests are cut into chunks and handed to whichever replica is free (at most two
chunks in flight per replica), so a slow replica does not hold the batch back.  A
replica that dies has its chunk re-queued on the others; only when none is left does
`generate` raise (an infrastructure failure: the shard is retried, not recorded).

A lost head node takes the cluster's GCS with it (and the replicas on that node); the
replicas on other nodes keep answering for a while, then Ray's own client, 60 s on,
terminates the whole process with a log line.  `generate` instead checks when it is
called, every `GCS_CHECK_S`, and whenever a replica dies, that the GCS still accepts
connections, and raises an `EngineError` naming the head when it does not (and at once
on every later call) — the shard fails with that message (error.json), so do the other
shards of its SLURM element, and `launch resume` retries them in a new allocation.
"""

from __future__ import annotations

import contextlib
import math
import os
import socket
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from veribatch.inference.errors import EngineError, require_extra
from veribatch.inference.types import Completion, Engine, Request

GCS_CHECK_S = 5.0  # this often (and when a replica dies): is the head's GCS still there?


def gcs_reachable(address: str, timeout_s: float = 2.0) -> bool:
    """Whether the GCS at ``host:port`` accepts a TCP connection (the head node is alive)."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout_s):
            return True
    except (OSError, ValueError):
        return False


class _EngineActor:
    """Body of the Ray actor: opens the engine inside the actor's process."""

    def __init__(self, factory: Callable[..., Engine], name: str, options: dict[str, Any]) -> None:
        self.engine = factory(name, **options)

    def info(self) -> dict[str, str]:
        import socket

        return {"engine": self.engine.engine, "model": self.engine.model,
                "revision": self.engine.revision, "pid": str(os.getpid()),
                "host": socket.gethostname()}

    def generate(self, requests: list[Request]) -> list[list[Completion]]:
        return self.engine.generate(requests)

    def close(self) -> None:
        self.engine.close()


def replica_bundles(tp: int, pp: int, cpus: float, gpus: float) -> tuple[list[dict[str, float]], str]:
    """Placement-group bundles and strategy for one replica of `tp` × `pp` workers."""
    bundle: dict[str, float] = {"CPU": cpus}
    if gpus:
        bundle["GPU"] = gpus
    return [dict(bundle) for _ in range(max(1, tp) * max(1, pp))], ("STRICT_PACK" if pp <= 1 else "PACK")


class RayEnginePool(Engine):
    """`replicas` copies of the engine `factory(name, **engine_options)` opens, where `spec`
    is ``KIND:NAME`` (the registry has checked it and hands in KIND's factory: the pool
    replicates whatever it is given and knows no engine by name beyond vLLM's parallel
    options)."""

    def __init__(
        self,
        spec: str,
        *,
        factory: Callable[..., Engine],
        replicas: int = 1,
        tp: int = 1,
        pp: int = 1,
        cpus_per_worker: float = 1,
        gpus_per_worker: float | None = None,
        chunk_size: int | None = None,
        address: str | None = None,
        ready_timeout_s: float = 300.0,
        **engine_options: Any,
    ) -> None:
        ray = require_extra("ray", "ray")
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        kind, _, name = spec.partition(":")
        self._ray = ray
        self._remove_pg = remove_placement_group
        self.engine, self.model, self.spec = kind, name, spec
        self.replicas, self.tp, self.pp = int(replicas), int(tp), int(pp)
        self.chunk_size = chunk_size
        self._owns_ray = False
        if not ray.is_initialized():
            address = address or os.environ.get("RAY_ADDRESS")
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
            self._owns_ray = True
        if gpus_per_worker is None:
            gpus_per_worker = 1.0 if ray.cluster_resources().get("GPU", 0) > 0 else 0.0
        if kind == "vllm" and (self.tp > 1 or self.pp > 1):
            engine_options.setdefault("tp", self.tp)
            engine_options.setdefault("pp", self.pp)
            engine_options.setdefault("distributed_executor_backend", "ray")

        bundles, strategy = replica_bundles(self.tp, self.pp, cpus_per_worker, gpus_per_worker)
        self.placement_groups = [placement_group(bundles, strategy=strategy) for _ in range(self.replicas)]
        ready = [pg.ready() for pg in self.placement_groups]
        done, _ = ray.wait(ready, num_returns=len(ready), timeout=ready_timeout_s)
        if len(done) < len(ready):
            have = ray.cluster_resources()
            self.close()
            raise EngineError(
                f"ray pool: {len(done)} of {self.replicas} replicas could be placed within "
                f"{ready_timeout_s:g} s; each needs {bundles} ({strategy}), the cluster has "
                f"CPU={have.get('CPU', 0):g} GPU={have.get('GPU', 0):g}"
            )
        single_worker = self.tp * self.pp == 1
        actor_cls = ray.remote(_EngineActor)
        self.actors = [
            actor_cls.options(
                num_cpus=cpus_per_worker if single_worker else 0,
                num_gpus=gpus_per_worker if single_worker else 0,
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    placement_group=pg,
                    placement_group_bundle_index=0,
                    placement_group_capture_child_tasks=True,
                ),
            ).remote(factory, name, engine_options)
            for pg in self.placement_groups
        ]
        try:
            infos = ray.get([a.info.remote() for a in self.actors], timeout=ready_timeout_s)
        except Exception as exc:
            self.close()
            raise EngineError(f"ray pool: a replica of {spec} failed to start: {exc}") from exc
        self.revision = infos[0]["revision"]
        self.actor_pids = [int(i["pid"]) for i in infos]
        self.actor_hosts = [i["host"] for i in infos]  # where each replica landed (node names)
        # In the SLURM element's log: where the replicas landed (a pool meant to span nodes
        # that packed onto one is visible there, not only in its throughput).
        print(f"ray pool: {self.replicas} replica(s) of {spec} on "
              f"{', '.join(self.actor_hosts)}", file=sys.stderr, flush=True)

    def _chunks(self, n: int) -> list[range]:
        size = self.chunk_size or max(1, math.ceil(n / (len(self.actors) * 4)))
        return [range(i, min(n, i + size)) for i in range(0, n, size)]

    def generate(self, requests: Sequence[Request]) -> list[list[Completion]]:
        ray = self._ray
        # A pool whose head is gone answers no more: its surviving replicas would, until Ray
        # ends the process 60 s on — mid-shard, with nothing recorded.
        self._check_head(len(requests))
        results: list[list[Completion] | None] = [None] * len(requests)
        todo = deque(self._chunks(len(requests)))
        live = list(self.actors)
        inflight: dict[Any, tuple[Any, range]] = {}
        checked = time.monotonic()
        while todo or inflight:
            if time.monotonic() - checked >= GCS_CHECK_S:
                self._check_head(len(requests) - sum(r is not None for r in results))
                checked = time.monotonic()
            for actor in list(live):
                while todo and sum(1 for a, _ in inflight.values() if a is actor) < 2:
                    chunk = todo.popleft()
                    ref = actor.generate.remote([requests[i] for i in chunk])
                    inflight[ref] = (actor, chunk)
            if not inflight:
                raise EngineError(f"ray pool: every replica of {self.spec} has died")
            done, _ = ray.wait(list(inflight), num_returns=1, timeout=GCS_CHECK_S)
            for ref in done:
                actor, chunk = inflight.pop(ref)
                try:
                    out = ray.get(ref)
                except (ray.exceptions.RayActorError, ray.exceptions.ActorDiedError):
                    self._check_head(len(requests) - sum(r is not None for r in results))
                    if actor in live:
                        live.remove(actor)
                    todo.appendleft(chunk)
                    continue
                for i, comps in zip(chunk, out, strict=True):
                    results[i] = comps
        return [r for r in results if r is not None]

    def _check_head(self, unanswered: int) -> None:
        """Raise a clear EngineError when the cluster's GCS (on the head node) is gone —
        at once when it was already found gone (`close` must not wait on it either)."""
        if getattr(self, "_head_lost", False):
            raise EngineError(f"ray pool: the Ray head of {self.spec}'s pool was lost earlier; "
                              f"{unanswered} request(s) unanswered")
        try:
            address = self._ray.get_runtime_context().gcs_address
        except Exception:  # noqa: BLE001  (no address known: nothing to check)
            return
        if address and not gcs_reachable(address) and not gcs_reachable(address):
            self._head_lost = True  # close() must not wait on a GCS that is gone
            raise EngineError(
                f"ray pool: the Ray head at {address} is unreachable (head node lost?); "
                f"{unanswered} request(s) of {self.spec} unanswered")

    def close(self) -> None:
        ray = self._ray
        if getattr(self, "_head_lost", False):
            # Killing actors and removing placement groups are GCS calls that would block
            # until Ray terminates the process; the cluster is gone with its head anyway.
            self.actors, self.placement_groups = [], []
            return
        for a in getattr(self, "actors", []):
            with contextlib.suppress(Exception):  # already gone
                ray.kill(a)
        self.actors = []
        for pg in getattr(self, "placement_groups", []):
            with contextlib.suppress(Exception):
                self._remove_pg(pg)
        self.placement_groups = []
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
            self._owns_ray = False
