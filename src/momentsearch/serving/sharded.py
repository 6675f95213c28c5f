"""Searching a sharded index (:mod:`~momentsearch.serving.shards`) with the answers of one process over it.

A query is answered in two rounds over every shard:

1. **candidates**: each shard's first stage gives its top ``k_videos`` videos with their retrieval scores; the head
   keeps the best ``k_videos`` of the union, which are the whole index's top ``k_videos`` (a video's score is its
   own clips' best; each shard's part of the global top is inside its own top);
2. **moments**: each shard localizes its part of that global top with those scores (``SearchEngine.rank``: the
   reranker, the localizer, per-video NMS, the ranking), and the head merges the moments by score, ties in the
   global order of their videos, as one process ranks them.

With the ``exact`` first stage the answers are the one process's (tested on 100 queries); with ``scan`` each shard
re-scores its own top R exactly, so the union holds at least the one process's candidates.

The head holds the model's query side only (the query encoder, ``max_tokens``): a shard gets token features and
runs the model's query network itself. Shards are reached through a :class:`ShardClient`: :class:`LocalShard`
(in this process, a thread each) or a Ray actor with replicas (:mod:`~momentsearch.serving.ray_shards`). What they
exchange is typed (:class:`ShardCandidates`, :class:`ShardMoments`, :class:`ShardScope`, :class:`ShardDescription`),
checked where it is made and where it is read. A shard no replica answers is a
:class:`~momentsearch.errors.ShardUnavailableError` (the service's 503), never a partial answer.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from momentsearch.errors import ShardError
from momentsearch.search.ranked import Hit
from momentsearch.serving.filters import VideoFilter


def _checked(ok: bool, what: str) -> None:
    if not ok:
        raise ShardError(f"a shard's answer is malformed: {what}")


@dataclass(frozen=True)
class ShardDescription:
    family: str
    model_fingerprint: str
    n_videos: int
    n_clips: int
    first_stage: str  # the shard's first stage spec
    k_videos: int
    nms_threshold: float


@dataclass(frozen=True)
class ShardScope:
    """A filter resolved on one shard: the rows it may answer from (None: every video) and the asked-for video
    ids this shard does not hold."""

    rows: tuple[int, ...] | None
    missing: tuple[str, ...]


@dataclass(frozen=True)
class ShardCandidates:
    """Round 1: each query's top videos of one shard, best first: ``scores`` (B, K) float32 (-inf pads) and
    ``rows`` (B, K) int64, the shard's own video rows."""

    scores: np.ndarray
    rows: np.ndarray

    def __post_init__(self) -> None:
        _checked(self.scores.ndim == 2 and self.scores.shape == self.rows.shape and self.scores.dtype == np.float32
                 and self.rows.dtype == np.int64, f"candidates of shapes {self.scores.shape} {self.scores.dtype} and "
                 f"{self.rows.shape} {self.rows.dtype}")


@dataclass(frozen=True)
class ShardMoments:
    """Round 2: each query's moments on one shard, best first, (B, n) each: ``pos`` the moment's video as its
    column in the request's rows (-1 pads), ``start``/``end`` seconds and ``score``; ``names`` (B, K) the video
    ids of the request's rows."""

    pos: np.ndarray
    start: np.ndarray
    end: np.ndarray
    score: np.ndarray
    names: tuple[tuple[str, ...], ...]

    def __post_init__(self) -> None:
        s = self.pos.shape
        _checked(self.pos.ndim == 2 and self.pos.dtype == np.int64 and self.start.shape == self.end.shape ==
                 self.score.shape == s and len(self.names) == s[0], f"moments of shapes {s}, {self.start.shape}, "
                 f"{self.end.shape}, {self.score.shape} for {len(self.names)} queries")
        _checked(all(int(p.max(initial=-1)) < len(n) for p, n in zip(self.pos, self.names, strict=True)),
                 "a moment's video is not one of the rows asked for")


class ShardWorker:
    """One shard's index folder, loaded, answering the head's calls (in this process, or as a Ray actor)."""

    def __init__(self, folder: str | Path, device: str = "cpu", first_stage: str | None = None,
                 first_stage_params: dict[str, str] | None = None):
        from momentsearch.serving.searcher import load_index

        self.folder = str(folder)
        self.searcher = load_index(folder, device, first_stage=first_stage, first_stage_params=first_stage_params)
        self._lock = threading.Lock()

    def describe(self) -> ShardDescription:
        s, info = self.searcher, self.searcher.checkpoint
        return ShardDescription(s.family.name, info.fingerprint, len(s.index), s.n_clips,
                                s.first_stage.spec, s.engine.k_videos, float(s.engine.nms_threshold))

    def video_ids(self) -> list[str]:
        return list(self.searcher.video_ids)

    def scope(self, videos: tuple[str, ...] | None, where: VideoFilter | None) -> ShardScope:
        held = None if videos is None else tuple(v for v in videos if v in self.searcher.row_of)
        missing = () if videos is None else tuple(v for v in videos if v not in self.searcher.row_of)
        if where is not None and where.videos is not None:
            missing += tuple(v for v in where.videos if v not in self.searcher.row_of)
            where = replace(where, videos=tuple(v for v in where.videos if v in self.searcher.row_of))
        if held == () or (where is not None and where.videos == ()):
            return ShardScope((), missing)
        rows = self.searcher.rows_of(held, where)
        return ShardScope(None if rows is None else tuple(int(r) for r in rows), missing)

    def moment_vectors(self, ref: Any) -> Any:
        """A found moment's part of a query (None: not this shard's video)."""
        if ref.video_id not in self.searcher.row_of:
            return None
        return self.searcher.moment_vectors_of(ref)

    def _queries(self, tokens: torch.Tensor, mask: torch.Tensor) -> Any:
        return self.searcher.engine.stages.queries(tokens.to(self.searcher.device), mask.to(self.searcher.device))

    def candidates(self, tokens: torch.Tensor, mask: torch.Tensor, pool: tuple[int, ...] | None, k: int
                   ) -> ShardCandidates:
        with self._lock, torch.no_grad():
            q = self._queries(tokens, mask)
            top, rows = self.searcher.engine.first_stage.retrieve(q, k, None if pool is None else [list(pool)] * len(q))
        return ShardCandidates(top.float().cpu().numpy().astype(np.float32), np.asarray(rows, np.int64))

    def moments(self, tokens: torch.Tensor, mask: torch.Tensor, rows: np.ndarray, scores: np.ndarray, n: int
                ) -> ShardMoments:
        rows, scores = np.asarray(rows, np.int64), np.asarray(scores, np.float32)
        if rows.shape != scores.shape or rows.ndim != 2 or len(rows) != len(tokens) or (
                len(rows) and (rows.min() < 0 or rows.max() >= len(self.searcher.index))):
            raise ShardError(f"shard {self.folder}: a moments request of rows {rows.shape} for {len(tokens)} queries "
                             f"outside its {len(self.searcher.index)} videos")
        with self._lock, torch.no_grad():
            q = self._queries(tokens, mask)
            res = self.searcher.engine.rank([f"q{i}" for i in range(len(rows))], q, torch.from_numpy(scores), rows,
                                            n, moments_only=True).vcmr
        width = res.k
        pos = np.full((len(rows), width), -1, np.int64)
        for i in range(len(rows)):
            col = {int(r): j for j, r in enumerate(rows[i]) if np.isfinite(scores[i, j])}
            got = res.video_idx[i][res.video_idx[i] >= 0]
            pos[i, : len(got)] = [col[int(v)] for v in got]
        ids = self.searcher.video_ids
        return ShardMoments(pos, res.start, res.end, np.nan_to_num(res.score, nan=-np.inf),
                            tuple(tuple(ids[int(r)] for r in row) for row in rows))


class ShardClient(Protocol):
    """A shard as the head reaches it: ``ask`` returns what has ``result()`` (a future)."""

    name: str

    def ask(self, method: str, *args: Any) -> Future[Any]: ...
    def close(self) -> None: ...


class LocalShard:
    """A shard in this process: its calls run on a thread of its own."""

    def __init__(self, name: str, worker: ShardWorker):
        self.name, self.worker = name, worker
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=f"momentsearch-{name}")

    def ask(self, method: str, *args: Any) -> Future[Any]:
        return self._pool.submit(getattr(self.worker, method), *args)

    def close(self) -> None:
        self._pool.shutdown(wait=False)


def merge_candidates(parts: Sequence[ShardCandidates | None], k: int) -> list[list[tuple[int, int, float]]]:
    """Each query's best ``k`` (shard, row, score) over the shards' candidates, best first (ties: shard order)."""
    b = next((len(p.scores) for p in parts if p is not None), 0)
    out = []
    for i in range(b):
        scores = np.concatenate([p.scores[i] for p in parts if p is not None])
        shard = np.concatenate([np.full(p.scores.shape[1], s) for s, p in enumerate(parts) if p is not None])
        rows = np.concatenate([p.rows[i] for p in parts if p is not None])
        order = np.lexsort((np.arange(len(scores)), -scores.astype(np.float64)))[:k]
        out.append([(int(shard[j]), int(rows[j]), float(scores[j])) for j in order if np.isfinite(scores[j])])
    return out


def requests_of(top: list[list[tuple[int, int, float]]], n_shards: int
                ) -> list[tuple[np.ndarray, np.ndarray, list[list[int]]] | None]:
    """Per shard, its part of each query's global top as (rows (B, K_s), scores (B, K_s), each column's global
    position), padded with row 0 at -inf; None for a shard holding none of them."""
    out: list[tuple[np.ndarray, np.ndarray, list[list[int]]] | None] = []
    for s in range(n_shards):
        mine = [[(r, sc, g) for g, (sh, r, sc) in enumerate(q) if sh == s] for q in top]
        width = max(len(m) for m in mine)
        if width == 0:
            out.append(None)
            continue
        rows, scores = np.zeros((len(top), width), np.int64), np.full((len(top), width), -np.inf, np.float32)
        for i, m in enumerate(mine):
            rows[i, : len(m)] = [x[0] for x in m]
            scores[i, : len(m)] = [x[1] for x in m]
        out.append((rows, scores, [[x[2] for x in m] for m in mine]))
    return out


def merge_moments(answers: Sequence[tuple[ShardMoments, list[list[int]]] | None], n: int, b: int) -> list[list[Hit]]:
    """Each of ``b`` queries' best ``n`` moments over the shards: by score, ties by their video's global position,
    then by their order on the shard (as one process's NMS ranks them)."""
    out = []
    for i in range(b):
        cand = []
        for a in answers:
            if a is None:
                continue
            m, glob = a
            for j in np.flatnonzero(m.pos[i] >= 0):
                p = int(m.pos[i, j])
                cand.append((-float(m.score[i, j]), glob[i][p], int(j), m.names[i][p], float(m.start[i, j]),
                             float(m.end[i, j])))
        cand.sort(key=lambda c: c[:3])
        out.append([Hit(c[3], c[4], c[5], -c[0]) for c in cand[:n]])
    return out
