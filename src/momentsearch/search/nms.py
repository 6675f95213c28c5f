"""Temporal non-maximum suppression over ranked moments of many videos."""

from __future__ import annotations

import numpy as np

from momentsearch.evaluation.tiou import temporal_iou


def temporal_nms(
    video: np.ndarray, start: np.ndarray, end: np.ndarray, score: np.ndarray, threshold: float, keep_max: int
) -> np.ndarray:
    """Indices of the moments kept, best first: a moment is dropped when a better one on the same
    video overlaps it with tIoU > ``threshold``. ``threshold >= 1`` keeps everything."""
    order = np.argsort(-score, kind="stable")
    if threshold >= 1.0:
        return order[:keep_max]
    alive = np.ones(len(order), bool)
    kept: list[int] = []
    v, s, e = video[order], start[order], end[order]
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
