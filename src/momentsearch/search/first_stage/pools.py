"""What every first stage shares: candidate pools (a query restricted to some videos), the exact top
``k`` of a set of videos, and the padded (B, k) result."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from momentsearch.errors import QueryError
from momentsearch.search.stages import VectorSource


def restrict_to_pools(scores: torch.Tensor, pools: Sequence[Sequence[int]]) -> torch.Tensor:
    """(B, V) scores with -inf outside each query's pool of video indices."""
    check_pools(pools, scores.shape[0], scores.shape[1])
    out = torch.full_like(scores, float("-inf"))
    for i, pool in enumerate(pools):
        idx = torch.as_tensor(np.asarray(pool, np.int64))
        out[i, idx] = scores[i, idx]
    return out


def check_pools(pools: Sequence[Sequence[int]], n_queries: int, n_videos: int) -> None:
    if len(pools) != n_queries:
        raise QueryError(f"{len(pools)} candidate pools for {n_queries} queries")
    for i, pool in enumerate(pools):
        idx = np.asarray(pool, np.int64)
        if len(idx) == 0:
            raise QueryError(f"query {i}: its candidate pool is empty")
        if int(idx.min()) < 0 or int(idx.max()) >= n_videos:
            raise QueryError(f"query {i}: candidate pool holds a video index outside 0..{n_videos - 1}")


def exact_top(source: VectorSource, q: np.ndarray, videos: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """One query's (S, d) vectors -> the top ``k`` of ``videos`` by the source's exact scores, and those scores."""
    return best_k(videos, source.exact_scores(q, videos), k)


def best_k(videos: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` videos of highest score, best first (ties in the given order), and their scores."""
    order = np.argsort(-scores, kind="stable")[:k]
    return videos[order], scores[order]


def score_pools(source: VectorSource, q: np.ndarray, pools: Sequence[Sequence[int]], n_videos: int, k: int
                ) -> tuple[torch.Tensor, np.ndarray]:
    """Each query's pool scored exactly (a small set of videos needs no index)."""
    check_pools(pools, len(q), n_videos)
    k = min(k, max(len(p) for p in pools))
    return pad([exact_top(source, q[i], np.unique(np.asarray(p, np.int64)), k) for i, p in enumerate(pools)], k)


def pad(rows: list[tuple[np.ndarray, np.ndarray]], k: int) -> tuple[torch.Tensor, np.ndarray]:
    scores = np.full((len(rows), k), -np.inf, np.float32)
    videos = np.zeros((len(rows), k), np.int64)
    for i, (v, s) in enumerate(rows):
        scores[i, : len(s)], videos[i, : len(v)] = s, v
    return torch.from_numpy(scores), videos
