"""Recall against graded, many-to-many relevance.

A moment prediction is a hit when some moment whose relevance to the query is >= ``min_relevance``
lies on the same video with tIoU >= the threshold; a video prediction is a hit when the video's
relevance (the max over its moments) is >= ``min_relevance``. Recall@k is the percentage of
queries with a hit in the top k, over the queries that have at least one relevant moment.
With :meth:`MomentRelevance.annotated` this reduces to the standard single-positive numbers.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from momentsearch.data.relevance import MomentRelevance
from momentsearch.errors import PredictionError
from momentsearch.evaluation.recall import DEFAULT_IOU_THRESHOLDS, DEFAULT_KS, NO_HIT, first_hit_rank, recall_from_ranks
from momentsearch.search.ranked import DEFAULT_MAX_PREDICTIONS, RankedMoments
from momentsearch.search.tiou import temporal_iou


def _aligned_rows(pred: RankedMoments, rel: MomentRelevance) -> np.ndarray:
    rows = pred.row_of()
    missing = [q for q in rel.query_ids if q not in rows]
    if missing:
        raise PredictionError(f"{len(missing)} queries of the relevance table have no predictions, e.g. {missing[:5]}")
    return np.array([rows[q] for q in rel.query_ids], np.int64)


def multi_positive_hits(
    pred: RankedMoments,
    rel: MomentRelevance,
    iou_thresholds: Sequence[float] = DEFAULT_IOU_THRESHOLDS,
    min_relevance: float = 1.0,
    max_predictions: int = DEFAULT_MAX_PREDICTIONS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(video hits (Q, K), moment hits (T, Q, K), has_relevant (Q,)) in ``rel``'s query order."""
    vh, mh, has, _, _ = match_relevant(pred, rel.threshold(min_relevance), iou_thresholds, max_predictions)
    return vh, mh, has


def match_relevant(
    pred: RankedMoments,
    rel: MomentRelevance,
    iou_thresholds: Sequence[float] = DEFAULT_IOU_THRESHOLDS,
    max_predictions: int = DEFAULT_MAX_PREDICTIONS,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Match predictions against every entry of ``rel`` (no threshold applied here).

    Returns video hits (Q, K), moment hits (T, Q, K), has_relevant (Q,), and for every entry of
    ``rel`` (in its order) the 0-based rank of the first prediction that hits it, (T, nnz), and of
    the first prediction on its video, (nnz,); NO_HIT where none does (including entries on videos
    the predictions never name).
    """
    order = _aligned_rows(pred, rel)
    vid_map = {v: i for i, v in enumerate(pred.video_ids)}
    rel_vid = np.array([vid_map.get(v, -1) for v in rel.video_ids], np.int64)[rel.video_idx] if rel.nnz else np.zeros(0, np.int64)
    pv = pred.video_idx[order, :max_predictions]
    ps = pred.start[order, :max_predictions]
    pe = pred.end[order, :max_predictions]
    q, k = pv.shape
    n_vid = len(pred.video_ids) + 1
    # keys of relevant moments (query, video in the prediction's index space), sorted
    rows = rel.row_ids()
    keep = rel_vid >= 0
    key_m = rows[keep] * n_vid + rel_vid[keep]
    ms, me = rel.start[keep], rel.end[keep]
    position = np.broadcast_to(np.arange(k), (q, k))
    srt = np.argsort(key_m, kind="stable")
    key_m, ms, me = key_m[srt], ms[srt], me[srt]
    entry_of_sorted = np.flatnonzero(keep)[srt]
    key_p = np.where(pv >= 0, np.arange(q)[:, None] * n_vid + pv, -1)
    lo = np.searchsorted(key_m, key_p, side="left")
    hi = np.searchsorted(key_m, key_p, side="right")
    hi = np.where(key_p >= 0, hi, lo)
    video_hit = hi > lo
    group_first = np.full(len(key_m), NO_HIT, np.int64)  # at each group's first sorted entry
    np.minimum.at(group_first, lo[video_hit], position[video_hit])
    entry_video_first = np.full(rel.nnz, NO_HIT, np.int64)
    if len(key_m):
        group_start = np.searchsorted(key_m, key_m, side="left")
        entry_video_first[entry_of_sorted] = group_first[group_start]
    moment_hit = np.zeros((len(iou_thresholds), q, k), bool)
    entry_first = np.full((len(iou_thresholds), rel.nnz), NO_HIT, np.int64)
    width = int((hi - lo).max()) if hi.size else 0
    with np.errstate(invalid="ignore"):
        for j in range(width):  # the most relevant moments any (query, video) pair has
            idx = lo + j
            valid = idx < hi
            idx = np.where(valid, idx, 0)
            iou = temporal_iou(ps, pe, ms[idx], me[idx]) if len(ms) else np.zeros_like(ps, np.float32)
            for t, thr in enumerate(iou_thresholds):
                hit = valid & (iou >= np.float32(thr))
                moment_hit[t] |= hit
                np.minimum.at(entry_first[t], entry_of_sorted[idx[hit]], position[hit])
    has_rel = np.diff(rel.indptr) > 0
    return video_hit, moment_hit, has_rel, entry_first, entry_video_first


def multi_positive_recall(
    pred: RankedMoments,
    rel: MomentRelevance,
    iou_thresholds: Sequence[float] = DEFAULT_IOU_THRESHOLDS,
    ks: Sequence[int] = DEFAULT_KS,
    min_relevance: float = 1.0,
    max_predictions: int = DEFAULT_MAX_PREDICTIONS,
) -> dict[str, object]:
    """{"VCMR": {"0.5-r1": ...}, "VR": {"r1": ...}, "n_queries": ..., "min_relevance": ...}."""
    vh, mh, has = multi_positive_hits(pred, rel, iou_thresholds, min_relevance, max_predictions)
    vcmr = {}
    for t, thr in enumerate(iou_thresholds):
        for kk, v in recall_from_ranks(first_hit_rank(mh[t]), ks, has).items():
            vcmr[f"{thr}-r{kk}"] = v
    vr = {f"r{kk}": v for kk, v in recall_from_ranks(first_hit_rank(vh), ks, has).items()}
    return {"VCMR": vcmr, "VR": vr, "n_queries": int(has.sum()), "min_relevance": min_relevance}
