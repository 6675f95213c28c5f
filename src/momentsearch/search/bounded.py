"""Localize only the candidate videos that can reach a query's top moments (exact, by a score bound).

A localizer may state ``score_bound(video_scores (B, K)) -> (B, K)``: no moment of a candidate video scores
above it (XML: s_vcmr = s_tl exp(alpha s_vr) with s_tl = P_st P_ed <= 1, so exp(alpha s_vr)). The engine then
localizes each query's candidates in blocks, best bound first (32 videos, then 64, 128, ...; after the first,
a remainder smaller than the first block joins the block before it: 100 candidates are 32 + 68), and stops a
query as soon as its ``n``-th moment after NMS scores above the bound of its next video: that video and
every later one can only add moments scoring below the ``n``-th, which NMS in score order never lets
displace a kept moment. The top ``n`` moments are those of localizing every candidate; the video ranking
(VR by each video's best moment) is not, so the engine uses this only when asked for moments alone.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from momentsearch.search.nms import temporal_nms_grid
from momentsearch.search.stages import Proposals

FIRST_BLOCK = 32


def bounded_moments(localize: Callable[[np.ndarray, np.ndarray], Proposals], bound: np.ndarray, valid: np.ndarray,
                    videos: np.ndarray, n: int, nms_threshold: float,
                    stats: dict[str, int] | None = None) -> Proposals:
    """``localize(query rows, column range) -> proposals`` of those queries' candidates in those columns;
    ``bound`` (B, K) non-increasing along each row (the first stage's order); ``valid`` (B, K) False for
    padding. Returns (B, K, c) proposals like localizing everything, not valid for the skipped videos."""
    b, k = videos.shape
    bound = np.where(valid, bound, -np.inf)
    blocks: list[tuple[np.ndarray, int, int, Proposals]] = []
    open_ = np.arange(b)
    done_cols = np.zeros(b, np.int64)  # columns localized so far, per query
    a, width = 0, FIRST_BLOCK
    while len(open_) and a < k:
        z = min(k, a + width)
        if a and k - z < FIRST_BLOCK:  # a remainder smaller than the first block joins a later block
            z = k
        got = localize(open_, np.arange(a, z))
        blocks.append((open_, a, z, got))
        done_cols[open_] = z
        if stats is not None:
            stats["localized"] = stats.get("localized", 0) + len(open_) * (z - a)
        if z >= k:
            break
        reached = _n_above(blocks, open_, z, videos, valid, n, nms_threshold, bound[open_, z])
        open_ = open_[~reached]  # n moments already score above the next video's bound: closed
        a, width = z, 2 * width
    if stats is not None:
        stats["candidates"] = stats.get("candidates", 0) + int(valid.sum())
    return _assemble(blocks, b, k)


def _assemble(blocks: list[tuple[np.ndarray, int, int, Proposals]], b: int, k: int) -> Proposals:
    c = max(p.score.shape[-1] for *_, p in blocks)
    out = Proposals.empty(b, k, c, np.result_type(*(p.score.dtype for *_, p in blocks)))
    for rows, a, z, p in blocks:
        w = p.score.shape[-1]
        at = (rows[:, None], np.arange(a, z)[None, :], slice(0, w))
        out.start[at], out.end[at], out.score[at], out.valid[at] = p.start, p.end, p.score, p.valid
    return out


def _n_above(blocks: list[tuple[np.ndarray, int, int, Proposals]], rows: np.ndarray, z: int, videos: np.ndarray,
             valid: np.ndarray, n: int, nms_threshold: float, above: np.ndarray) -> np.ndarray:
    """Whether each of ``rows`` keeps at least ``n`` moments scoring above ``above`` after NMS over its first
    ``z`` columns. Only candidates above the line take part (a kept moment is suppressed only by a better one
    of its video), and only the columns holding one: the check costs what is near the top, not every video."""
    p = _assemble(blocks, len(videos), z)
    st, ed, sc = p.start[rows], p.end[rows], p.score[rows]
    ok = p.valid[rows] & (sc > above[:, None, None]) & valid[rows, :z, None]
    cols = np.flatnonzero(ok.any(axis=(0, 2)))
    if len(cols) == 0:
        return np.zeros(len(rows), bool)
    st, ed, sc, ok = st[:, cols], ed[:, cols], sc[:, cols], ok[:, cols]
    keep, kept = temporal_nms_grid(st, ed, sc, ok, nms_threshold, n)
    return kept[:, n - 1] if keep.shape[1] >= n else np.zeros(len(rows), bool)


def as_bound(t: torch.Tensor) -> np.ndarray:
    return t.detach().float().cpu().numpy()
