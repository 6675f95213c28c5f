"""The batcher's wait (issue 70): ``adaptive`` waits only while a batch is smaller than the last one searched, so a
lone client is answered at once and, under load, the clients whose answers just went out are waited for and
searched as one batch; ``fixed`` always waits ``max_wait_ms``. Driven with a searcher that records its batches."""

from __future__ import annotations

import asyncio
import time

import pytest

from momentsearch.errors import ConfigError
from momentsearch.service.batcher import QueryBatcher
from momentsearch.service.settings import ServiceSettings
from momentsearch.serving.plan import SearchPlan

WAIT_MS = 400.0


class Recorder:
    """Answers each text with itself and records the size of every batch it is given."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    def run(self, texts, plans, clock=None):  # type: ignore[no-untyped-def]
        self.batches.append(len(texts))
        return [([], None) for _ in texts]


async def _one(batcher: QueryBatcher, text: str) -> float:
    timing: dict[str, float] = {}
    await batcher.search(text, SearchPlan.of(k=1), timing)
    return timing["batch_wait"]


async def _clients(batcher: QueryBatcher, n: int, rounds: int, think_s: float) -> None:
    """``n`` closed-loop clients: each sends its next query ``think_s`` after its answer (client i adds i ms, so
    that the queries of one round come back one by one, not at once)."""

    async def client(i: int) -> None:
        for r in range(rounds):
            await batcher.search(f"c{i} r{r}", SearchPlan.of(k=1))
            await asyncio.sleep(think_s + i / 1000)

    await asyncio.gather(*(client(i) for i in range(n)))


def test_a_lone_query_waits_only_when_the_wait_is_fixed() -> None:
    adaptive = QueryBatcher(Recorder(), max_batch=8, max_wait_ms=WAIT_MS)
    fixed = QueryBatcher(Recorder(), max_batch=8, max_wait_ms=WAIT_MS, wait="fixed")
    try:
        waited = {name: asyncio.run(_one(b, "a person opens the door")) for name, b in
                  (("adaptive", adaptive), ("fixed", fixed))}
    finally:
        adaptive.close()
        fixed.close()
    assert waited["fixed"] >= WAIT_MS / 1000 * 0.95  # the whole wait, for nobody
    assert waited["adaptive"] < 0.1  # at once: the last batch had one query, and so has this one


@pytest.mark.parametrize("wait, max_wait_ms", [("adaptive", WAIT_MS), ("adaptive", 0.0)])
def test_under_load_the_adaptive_wait_keeps_a_batch_whole(wait: str, max_wait_ms: float) -> None:
    """8 clients whose next queries come back 0-7 ms apart: with the adaptive wait every batch after the first
    holds all 8 (the wait ends as soon as the eighth arrives, far before 400 ms); with no wait they split."""
    rec = Recorder()
    batcher = QueryBatcher(rec, max_batch=16, max_wait_ms=max_wait_ms, wait=wait)
    t0 = time.perf_counter()
    try:
        asyncio.run(_clients(batcher, 8, rounds=5, think_s=0.005))
    finally:
        batcher.close()
    seconds = time.perf_counter() - t0
    assert sum(rec.batches) == 40
    if max_wait_ms:
        assert rec.batches[1:] == [8] * (len(rec.batches) - 1), rec.batches
        assert seconds < 5 * WAIT_MS / 1000  # no batch waited the whole 400 ms: each ended when the eighth came
    else:
        assert len(rec.batches) > 5 + 4, rec.batches  # rounds split into several batches


def test_bad_waits_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="wait one of"):
        QueryBatcher(Recorder(), wait="sometimes")
    with pytest.raises(ConfigError, match="batch_wait"):
        ServiceSettings(batch_wait="sometimes")
    assert (ServiceSettings().max_wait_ms, ServiceSettings().batch_wait) == (15.0, "adaptive")
