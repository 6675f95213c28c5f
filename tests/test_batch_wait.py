"""The batcher's wait (issue 70): ``adaptive`` waits only while a batch holds fewer queries than the clients seen in the
last cycle (the batch last searched and the requests queued when it was answered), so a lone client is answered at
once and, under load, the clients whose answers just went out are waited for and searched as one batch; ``fixed``
always waits ``max_wait_ms``. Driven with a searcher that records its batches."""

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
    """Answers each text with itself, taking ``seconds`` a batch, and records the size of every batch it is given."""

    def __init__(self, seconds: float = 0.0) -> None:
        self.batches: list[int] = []
        self.seconds = seconds

    def run(self, texts, plans, clock=None):  # type: ignore[no-untyped-def]
        self.batches.append(len(texts))
        time.sleep(self.seconds)
        return [([], None) for _ in texts]


async def _one(batcher: QueryBatcher, text: str) -> float:
    timing: dict[str, float] = {}
    await batcher.search(text, SearchPlan.of(k=1), timing)
    return timing["batch_wait"]


async def _clients(batcher: QueryBatcher, n: int, rounds: int, think_s: float, spread_s: float = 0.001,
                   staggered: bool = False) -> None:
    """``n`` closed-loop clients: each sends its next query ``think_s`` after its answer, client i ``i * spread_s``
    later still (``staggered``: it starts that late too), so that the queries of one round come back one by one."""

    async def client(i: int) -> None:
        await asyncio.sleep(i * spread_s if staggered else 0.0)
        for r in range(rounds):
            await batcher.search(f"c{i} r{r}", SearchPlan.of(k=1))
            await asyncio.sleep(think_s + i * spread_s)

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


@pytest.mark.parametrize("max_wait_ms", [WAIT_MS, 0.0])
def test_two_groups_of_clients_are_merged_into_one_batch(max_wait_ms: float) -> None:
    """A batch takes 60 ms: the first query is searched alone while the other 7 queue, and from then on the clients
    form two groups, one searched while the other's answers go out. Without a wait they stay split (1 and 7, in
    turn); the adaptive wait counts the clients of the last cycle (the batch and the requests queued behind it),
    waits for the returning group and searches all 8 together."""
    rec = Recorder(seconds=0.06)
    batcher = QueryBatcher(rec, max_batch=16, max_wait_ms=max_wait_ms)
    try:
        asyncio.run(_clients(batcher, 8, rounds=6, think_s=0.0))
    finally:
        batcher.close()
    assert sum(rec.batches) == 48
    if max_wait_ms:
        assert rec.batches[2:] == [8] * (len(rec.batches) - 2), rec.batches
    else:
        assert len(rec.batches) >= 10 and min(rec.batches) < 4, rec.batches


def test_the_wait_counts_the_clients_of_the_last_cycle_not_the_last_batch() -> None:
    """Clients that come back 5 ms apart, a 12 ms wait, 60 ms a batch: a wait gathers only part of the returning
    group, so waiting for as many as the last batch held shrinks with each partial batch (measured: 1, 7, then 3 and
    5 in turn, never all 8). Counting the last cycle's clients (the batch and the requests queued behind it) keeps
    asking for all 8: every other batch holds all of them (1, 8, then 3 and 8 in turn)."""
    rec = Recorder(seconds=0.06)
    batcher = QueryBatcher(rec, max_batch=16, max_wait_ms=12)
    try:
        asyncio.run(_clients(batcher, 8, rounds=8, think_s=0.0, spread_s=0.005, staggered=True))
    finally:
        batcher.close()
    assert sum(rec.batches) == 64 and rec.batches.count(8) >= 3, rec.batches


def test_bad_waits_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match="wait one of"):
        QueryBatcher(Recorder(), wait="sometimes")
    with pytest.raises(ConfigError, match="batch_wait"):
        ServiceSettings(batch_wait="sometimes")
    assert (ServiceSettings().max_wait_ms, ServiceSettings().batch_wait) == (0.0, "adaptive")
