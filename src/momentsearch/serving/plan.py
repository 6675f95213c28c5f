"""One search request, checked once: :class:`SearchPlan`.

A plan says which index rows a query may be answered from (``pool``; None: every video), how many moments the
engine ranks for it (:attr:`SearchPlan.fetch`) and how they are cut into the answer (:meth:`SearchPlan.page`:
the score threshold, the time range, the grouping by video, then the page). ``Searcher.plan`` makes one (every
error a user can act on is raised there, once); ``Searcher.run`` searches a batch of queries, each with its own
plan, in one engine call per pool and pages each query's moments by its plan. The library's
``search``/``search_many``, the CLI and the service's routes all go through it, so ``k`` has one meaning (the
page size) and moments are arranged in one place.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from momentsearch.errors import QueryError
from momentsearch.search.ranked import Hit
from momentsearch.serving.filters import FETCH_ARRANGED, arrange, check_arrange

MAX_RANKED = FETCH_ARRANGED  # moments one search ranks at the most: offset + k never passes it


@dataclass(frozen=True)
class SearchPlan:
    k: int  # moments on the page
    offset: int = 0  # moments skipped (the previous page's next offset)
    min_score: float | None = None  # moments scoring below this are dropped
    time_from: float | None = None  # moments ending after this second of their video
    time_to: float | None = None  # moments starting before this second of their video
    per_video: int | None = None  # grouped by video: each video's best per_video moments together
    pool: tuple[int, ...] | None = None  # the index rows it may be answered from (None: every video)
    paged: bool = False  # the answer says whether there is a next page (/v1): one more moment is ranked
    # a sharded index's pool: per shard, its rows (None: every video of it); None: not sharded or not filtered
    shard_pools: tuple[tuple[int, ...] | None, ...] | None = None

    @classmethod
    def of(cls, k: int, offset: int = 0, min_score: float | None = None, time_from: float | None = None,
           time_to: float | None = None, per_video: int | None = None, pool: Sequence[int] | None = None,
           paged: bool = False) -> SearchPlan:
        """Checked: a :class:`QueryError` a user can act on for each bad value."""
        if not (isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= MAX_RANKED):
            raise QueryError(f"k must be between 1 and {MAX_RANKED}, got {k!r}")
        if not (isinstance(offset, int) and not isinstance(offset, bool) and 0 <= offset <= MAX_RANKED - k):
            raise QueryError(f"offset must be an integer from 0 to {MAX_RANKED} - k = {MAX_RANKED - k}, "
                             f"got {offset!r}: one search ranks at most {MAX_RANKED} moments")
        if min_score is not None and (isinstance(min_score, bool) or not isinstance(min_score, (int, float))
                                      or (isinstance(min_score, float) and math.isnan(min_score))):
            raise QueryError(f"min_score must be a number, got {str(min_score)[:40]!r}")
        check_arrange(time_from, time_to, per_video)
        return cls(k, offset, min_score, time_from, time_to, per_video,  # (an int of any size compares with floats)
                   None if pool is None else tuple(int(r) for r in pool), paged)

    @property
    def arranged(self) -> bool:
        """A time range or a grouping picks from the ranked moments, so more are ranked than the page holds."""
        return self.time_from is not None or self.time_to is not None or self.per_video is not None

    @property
    def fetch(self) -> int:
        """Moments the engine ranks for this query: the page (and one more when ``paged``: is there a next page),
        or :data:`MAX_RANKED` when arranged."""
        return MAX_RANKED if self.arranged else min(self.offset + self.k + int(self.paged), MAX_RANKED)

    @property
    def answers_nothing(self) -> bool:
        """A filter that no video passes: no moments (not an error)."""
        if self.shard_pools is not None:
            return all(p is not None and not p for p in self.shard_pools)
        return self.pool is not None and not self.pool

    def page(self, hits: Sequence[Hit]) -> tuple[list[Hit], int | None]:
        """The page ``[offset, offset + k)`` of ``hits`` (best first) after the threshold, the time range and the
        grouping (:func:`~momentsearch.serving.filters.arrange`), and the next page's offset (None: no more)."""
        kept = [h for h in hits if self.min_score is None or h.score >= self.min_score]
        kept = arrange(kept, self.time_from, self.time_to, self.per_video)
        end = self.offset + self.k
        return kept[self.offset:end], (end if len(kept) > end else None)

