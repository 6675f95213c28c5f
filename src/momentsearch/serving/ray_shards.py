"""A sharded index served by Ray actors: each shard a :class:`~momentsearch.serving.sharded.ShardWorker` in
``replicas`` actors, spread over the cluster's nodes: replica r of shard s on node (s + r) mod nodes, pinned
there (a soft affinity was seen to leave a node empty when the cluster was busy), so a shard's replicas are on
different nodes while there are as many nodes as replicas; an actor whose process dies is restarted on its node,
and one whose node is lost stays down while its shard's other replicas answer.

Ray Core actors, not Ray Serve: the head (``load(...)`` or ``momentsearch serve``) is already the HTTP front and
the batcher, and every query goes to every shard, so what is wanted of Ray is placement, restarts and a call that
says which shard failed; Serve would add a second HTTP layer, a controller and proxies per node, for routing this
does not need (docs/sharding.md).

**Faults.** Each actor is restarted by Ray when its process dies (``max_restarts=-1``). A call whose actor dies
(or is restarting) is sent to the shard's next replica, each replica once; when none answers it is a
:class:`~momentsearch.errors.ShardUnavailableError` naming the shard (the service's 503), never a partial answer.
An error of the project's raised in a shard (a bad filter) comes back as itself.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from momentsearch.errors import MomentSearchError, ShardError, ShardUnavailableError
from momentsearch.serving.sharded import ShardWorker


class Pending:
    """A call on one of a shard's replicas; :meth:`result` waits, moving to the next replica when an actor dies."""

    def __init__(self, shard: RayShard, method: str, args: tuple[Any, ...], first: int):
        self.shard, self.method, self.args, self.first = shard, method, args, first
        self.ref = shard.submit(first, method, args)

    def result(self, timeout: float | None = None) -> Any:
        from ray.exceptions import (
            ActorDiedError,
            ActorUnavailableError,
            ActorUnschedulableError,
            GetTimeoutError,
            RayActorError,
            RayTaskError,
        )

        ray = self.shard.ray
        n = len(self.shard.actors)
        errors = []
        for attempt in range(n):
            try:
                return ray.get(self.ref, timeout=timeout)
            except RayTaskError as e:  # raised by the shard's own code
                cause = getattr(e, "cause", None)
                if isinstance(cause, MomentSearchError):
                    raise cause from None
                raise ShardError(f"shard {self.shard.name}: {type(cause).__name__ if cause else 'error'}: "
                                 f"{str(cause or e)[:500]}") from None
            except (ActorDiedError, ActorUnavailableError, ActorUnschedulableError, RayActorError) as e:
                # (unschedulable: an actor pinned to a node that is gone)
                if getattr(e, "actor_init_failed", False):  # the shard's folder did not load: every replica's fails
                    raise ShardError(f"shard {self.shard.name} ({self.shard.folder}) did not load: "
                                     f"{_last_error_line(str(e))}") from None
                errors.append(f"replica {(self.first + attempt) % n}: {type(e).__name__}")
                self.shard.failovers += 1
                if attempt + 1 < n:
                    self.ref = self.shard.submit(self.first + attempt + 1, self.method, self.args)
            except GetTimeoutError:
                errors.append(f"replica {(self.first + attempt) % n}: no answer in {timeout} s")
                break
        raise ShardUnavailableError(f"shard {self.shard.name} did not answer ({'; '.join(errors)}); its replicas are "
                                    "restarting or gone: retry shortly")


def _last_error_line(text: str) -> str:
    """The error's own line at the end of a Ray traceback ("momentsearch.errors.SearchIndexError: what")."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return (lines[-1] if lines else text)[:500]


class RayShard:
    """One shard's replicas; calls go round the replicas."""

    def __init__(self, ray: Any, name: str, folder: Path, actors: list[Any]):
        self.ray, self.name, self.folder, self.actors = ray, name, folder, actors
        self.failovers = 0
        self._next = 0
        self._lock = threading.Lock()

    def submit(self, replica: int, method: str, args: tuple[Any, ...]) -> Any:
        return getattr(self.actors[replica % len(self.actors)], method).remote(*args)

    def ask(self, method: str, *args: Any) -> Pending:
        with self._lock:
            first, self._next = self._next, self._next + 1
        return Pending(self, method, args, first)

    def close(self) -> None:
        for a in self.actors:
            self.ray.kill(a, no_restart=True)


def ray_shards(folders: list[tuple[str, Path]], address: str, replicas: int = 1, device: str = "cpu",
               first_stage: str | None = None, first_stage_params: dict[str, str] | None = None,
               threads: int = 1) -> list[RayShard]:
    """The shards ``(name, folder)`` started as actors on the Ray cluster at ``address`` (``local``: a node
    started here), ``replicas`` each, each actor using ``threads`` torch threads."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from momentsearch.video.ray_ingest import ray_connect

    if replicas < 1:
        raise ShardError(f"replicas must be >= 1, got {replicas}")
    ray, _ = ray_connect(address)
    nodes = sorted(n["NodeID"] for n in ray.nodes() if n.get("Alive"))
    actor_cls = ray.remote(_ShardActor)
    out = []
    for s, (name, folder) in enumerate(folders):
        actors = [actor_cls.options(num_cpus=0, max_restarts=-1, max_task_retries=0, scheduling_strategy=
                                    NodeAffinitySchedulingStrategy(nodes[(s + r) % len(nodes)], soft=False))
                  .remote(str(folder), device, first_stage, first_stage_params, threads) for r in range(replicas)]
        out.append(RayShard(ray, name, folder, actors))
    return out


class _ShardActor(ShardWorker):
    """A :class:`ShardWorker` in an actor process: its torch threads set first, and its node said."""

    def __init__(self, folder: str, device: str, first_stage: str | None, first_stage_params: dict[str, str] | None,
                 threads: int):
        import torch

        torch.set_num_threads(threads)
        super().__init__(folder, device, first_stage, first_stage_params)

    def node(self) -> str:
        import ray

        return str(ray.get_runtime_context().get_node_id())
