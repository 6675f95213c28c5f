"""Temporal non-maximum suppression over ranked moments of many videos.

Greedy NMS keeps the best moment, drops every moment of the same video that overlaps it with
tIoU > threshold, and repeats. Suppression never crosses videos, so the greedy pass over all moments
in score order equals one greedy pass per video in that order, merged by score. The vectorised form
runs those per-video passes together: the moments are grouped by video into a (G, P) table (P: the
most moments of one video), the (G, P, P) tIoU matrix is computed at once, and the P greedy steps
each update every video in one array operation. torchvision's ``batched_nms`` does the same for boxes
(2D IoU) and would need torchvision; this is NumPy on spans, with the tIoU of ``search.tiou`` so
that every comparison is the same float32 number as in the loop (:func:`temporal_nms_loop`).
"""

from __future__ import annotations

import numpy as np

from momentsearch.search.tiou import temporal_iou

MAX_CELLS = 1 << 24  # G x P x P above this (one video with thousands of moments): the loop, in O(n x kept) memory


def temporal_nms(
    video: np.ndarray, start: np.ndarray, end: np.ndarray, score: np.ndarray, threshold: float, keep_max: int
) -> np.ndarray:
    """Indices of the moments kept, best first: a moment is dropped when a better one on the same
    video overlaps it with tIoU > ``threshold``. ``threshold >= 1`` keeps everything. Ties in score
    keep input order. Same output as :func:`temporal_nms_loop`."""
    video, score = np.asarray(video), np.asarray(score)
    order = np.argsort(-score, kind="stable")
    if threshold >= 1.0 or len(order) < 2:
        return order[:keep_max]
    g = np.argsort(video[order], kind="stable")  # grouped by video, score order kept inside each group
    vg = video[order][g]
    first = np.flatnonzero(np.r_[True, vg[1:] != vg[:-1]])
    counts = np.diff(np.r_[first, len(g)])
    n_groups, p = len(first), int(counts.max())
    if n_groups * p * p > MAX_CELLS:
        return temporal_nms_loop(video, start, end, score, threshold, keep_max)
    row = np.repeat(np.arange(n_groups), counts)
    slot = np.arange(len(g)) - np.repeat(first, counts)
    s = np.zeros((n_groups, p), np.float32)
    e = np.zeros((n_groups, p), np.float32)
    alive = np.zeros((n_groups, p), bool)
    s[row, slot] = np.asarray(start, np.float32)[order][g]
    e[row, slot] = np.asarray(end, np.float32)[order][g]
    alive[row, slot] = True
    _suppress(s, e, alive, threshold)
    return order[np.sort(g[alive[row, slot]])[:keep_max]]


def temporal_nms_grid(start: np.ndarray, end: np.ndarray, score: np.ndarray, ok: np.ndarray, threshold: float,
                      keep_max: int) -> tuple[np.ndarray, np.ndarray]:
    """NMS of B queries' candidates laid out as the search engine makes them: (B, K, c) spans and scores of
    c candidates on each of K videos, ``ok`` the ones that take part. Returns (B, keep_max) flat indices into
    K x c, best first, and their (B, keep_max) validity. Each query's result is :func:`temporal_nms` of its
    ``ok`` candidates in flat order. The width is ``min(keep_max, K x c)``."""
    b, k, c = score.shape
    within = np.argsort(-score, axis=-1, kind="stable")  # score order inside each (query, video) group
    flat = np.arange(k * c).reshape(1, k, c).repeat(b, 0)
    flat = np.take_along_axis(flat, within, -1)
    alive = np.take_along_axis(ok, within, -1).reshape(b * k, c).copy()
    if threshold < 1.0 and c > 1:
        _suppress(np.take_along_axis(start, within, -1).astype(np.float32).reshape(b * k, c),
                  np.take_along_axis(end, within, -1).astype(np.float32).reshape(b * k, c), alive, threshold)
    alive = alive.reshape(b, k * c)
    flat = flat.reshape(b, k * c)
    sc = np.take_along_axis(score, within, -1).reshape(b, k * c)
    # best first over the survivors, ties in flat (input) order as temporal_nms keeps them
    key = np.where(alive, -sc.astype(np.float64), np.inf)
    rank = np.lexsort((flat, key), axis=-1)[:, :keep_max]
    return np.take_along_axis(flat, rank, -1), np.take_along_axis(alive, rank, -1)


def _suppress(s: np.ndarray, e: np.ndarray, alive: np.ndarray, threshold: float) -> None:
    """Greedy NMS of G groups at once, in place: (G, P) spans in score order, ``alive`` the moments present.
    Step i drops, in every group where moment i is alive, the later moments j whose tIoU with it is above
    the threshold, computed as :func:`temporal_iou` does it with j's span first (the same float32
    operations, so the same decisions as the loop; NaN never clashes)."""
    thr = np.float32(threshold)
    with np.errstate(invalid="ignore", divide="ignore"):
        for i in range(s.shape[1] - 1):
            live = np.flatnonzero(alive[:, i])
            if not len(live):
                continue
            sj, ej = s[live, i + 1:], e[live, i + 1:]
            si, ei = s[live, i, None], e[live, i, None]
            inter = np.maximum(np.float32(0), np.minimum(ej, ei) - np.maximum(sj, si))
            hull = np.maximum(ej, ei) - np.minimum(sj, si)
            clash = np.divide(inter, hull, out=np.zeros_like(inter), where=hull != 0) > thr
            alive[live, i + 1:] &= ~clash


def temporal_nms_loop(
    video: np.ndarray, start: np.ndarray, end: np.ndarray, score: np.ndarray, threshold: float, keep_max: int
) -> np.ndarray:
    """The greedy loop, one kept moment at a time: the reference :func:`temporal_nms` is tested against."""
    order = np.argsort(-np.asarray(score), kind="stable")
    if threshold >= 1.0:
        return order[:keep_max]
    alive = np.ones(len(order), bool)
    kept: list[int] = []
    v, s, e = np.asarray(video)[order], np.asarray(start)[order], np.asarray(end)[order]
    for i in range(len(order)):
        if not alive[i]:
            continue
        kept.append(int(order[i]))
        if len(kept) == keep_max:
            break
        rest = slice(i + 1, None)
        clash = (v[rest] == v[i]) & (temporal_iou(s[rest], e[rest], s[i], e[i]) > threshold)
        alive[rest] &= ~clash
    return np.array(kept, np.int64)


def temporal_nms_grid_loop(start: np.ndarray, end: np.ndarray, score: np.ndarray, ok: np.ndarray, threshold: float,
                           keep_max: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`temporal_nms_grid` by the loop, one query at a time: its reference in tests and benchmarks."""
    b, k, c = score.shape
    width = min(keep_max, k * c)
    keep = np.zeros((b, width), np.int64)
    kept = np.zeros((b, width), bool)
    video = np.repeat(np.arange(k), c)
    for i in range(b):
        m = ok[i].ravel()
        j = np.flatnonzero(m)[temporal_nms_loop(video[m], start[i].ravel()[m], end[i].ravel()[m],
                                                score[i].ravel()[m], threshold, keep_max)]
        keep[i, : len(j)], kept[i, : len(j)] = j, True
    return keep, kept
