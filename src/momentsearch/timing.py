"""Where a search's time goes: a :class:`PartClock` the engine and the searcher time their parts with.

    clock = PartClock()
    hits = searcher.search_many(["a person opens the fridge"], k=10, clock=clock)
    clock.seconds  # {"encode": ..., "first_stage": ..., "localize": ..., "nms": ..., "rank": ...}

Parts are timed with ``time.perf_counter`` around blocks that end in host (CPU) values, so on a GPU a
part includes the wait for its kernels. A part entered twice adds up. Passing no clock costs nothing.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

# the parts of one search, in the order a query meets them (the service adds "http" and "batch_wait"); "encode" is
# the text encoder and the model's query network (the engine's ``stages.queries``)
PARTS = ("encode", "first_stage", "rerank", "localize", "nms", "rank")


class PartClock:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    @property
    def total(self) -> float:
        return sum(self.seconds.values())


def part(clock: PartClock | None, name: str) -> contextlib.AbstractContextManager[None]:
    """``clock.part(name)``, or nothing when there is no clock."""
    return contextlib.nullcontext() if clock is None else clock.part(name)
