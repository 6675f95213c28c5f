"""Concurrent requests become one encoder and engine call: the requests waiting when the batcher is
free (up to ``max_batch``; with ``max_wait_ms`` > 0 it also waits that long after the first for more)
are searched together, grouped by their video filter. So a lone query is searched at once, and under
load the queries that arrive while one batch is searched form the next; each gets its own top ``k``
back. A request whose caller stopped waiting (its timeout, or the client went away) before its batch
is searched is left out of it."""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from momentsearch.serving.filters import VideoFilter
from momentsearch.serving.searcher import Hit, Searcher
from momentsearch.timing import PartClock


@dataclass
class _Request:
    text: str
    k: int
    where: VideoFilter | None
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    timing: dict[str, float] | None = None
    queued: float = 0.0


class QueryBatcher:
    def __init__(self, searcher: Searcher, max_batch: int = 32, max_wait_ms: float = 0.0,
                 on_batch: Callable[[int, float, PartClock], None] | None = None):
        if max_batch < 1 or max_wait_ms < 0:
            raise ValueError(f"max_batch must be >= 1 and max_wait_ms >= 0, got {max_batch} and {max_wait_ms}")
        self.searcher, self.max_batch, self.max_wait = searcher, max_batch, max_wait_ms / 1000
        self.stats = {"requests": 0, "batches": 0, "largest_batch": 0}
        self.on_batch = on_batch  # (queries searched together, seconds, its parts): the service's metrics
        self._queue: queue.Queue[_Request | None] = queue.Queue()
        self._thread = threading.Thread(target=self._run, name="momentsearch-batcher", daemon=True)
        self._thread.start()

    async def search(self, text: str, k: int, where: VideoFilter | None = None,
                     timing: dict[str, float] | None = None) -> list[Hit]:
        """``timing``: filled with seconds spent waiting for the batch (``batch_wait``), the batch's parts
        (:mod:`momentsearch.timing`, shared by the queries searched together) and ``batch`` (its size)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._queue.put(_Request(text, k, None if where is None or where.is_empty else where, fut, loop, timing,
                                 time.perf_counter()))
        return await fut

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=10)

    def _collect(self, first: _Request) -> list[_Request]:
        items = [first]
        deadline = time.monotonic() + self.max_wait
        while len(items) < self.max_batch:
            try:
                item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if item is None:
                self._queue.put(None)  # stop after this batch
                break
            items.append(item)
        return items

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            items = [r for r in self._collect(first) if not r.future.done()]  # done: nobody waits for it
            if not items:
                continue
            self.stats["batches"] += 1
            self.stats["requests"] += len(items)
            self.stats["largest_batch"] = max(self.stats["largest_batch"], len(items))
            groups: dict[Any, list[_Request]] = defaultdict(list)
            for r in items:
                groups[None if r.where is None else r.where.key].append(r)
            for group in groups.values():
                try:
                    t0, clock = time.perf_counter(), PartClock()
                    hits = self.searcher.search_many([r.text for r in group], max(r.k for r in group),
                                                     where=group[0].where, clock=clock)
                    if self.on_batch is not None:
                        self.on_batch(len(group), time.perf_counter() - t0, clock)
                    for r in group:
                        if r.timing is not None:
                            r.timing.update(clock.seconds, batch_wait=t0 - r.queued, batch=len(group))
                except Exception as e:  # noqa: BLE001 - handed to each waiting request
                    for r in group:
                        r.loop.call_soon_threadsafe(_settle, r.future, None, e)
                    continue
                for r, h in zip(group, hits, strict=True):
                    r.loop.call_soon_threadsafe(_settle, r.future, h[: r.k], None)


def _settle(fut: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if fut.done():  # the client went away
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)
