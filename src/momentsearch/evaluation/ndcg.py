"""nDCG with graded relevance (Wray et al., ``semantic-similarity-video-retrieval.txt`` Sec. 4.2).

For a query q with relevance S(q, z) in [0, 1] to every item z, and the items ranked by the
model's score, position j = 1, 2, ...:

    Eq. 2 as written: DCG(q) = sum_{j <= |R_q|} (2^{S(q, z_j)} - 1) / log(j + 1),  R_q = {z : S(q, z) > 0}
    the default here: Eq. 2's gain and discount over the whole ranking, without its cut-off at |R_q|
                      (``cutoff="none"``: a relevant item ranked past position |R_q| still counts; the
                      project's nDCG columns have always been this, and keep it; ``EQ2`` is Eq. 2 as written)
    authors' code:    DCG(q) = sum_{j <= |R_q|} S(q, z_j) / log2(j + 1)

    nDCG(q) = DCG(q) / IDCG(q), IDCG = the DCG of the items ordered by relevance.
    Eq. 3:   nDCG(X, Y) = 1/2 mean_x nDCG(x) + 1/2 mean_y nDCG(y)   (both directions)

The log's base cancels in the ratio. Items with equal scores are tied: each gets the mean
discount of the positions the tie spans (the expected DCG over random tie-breaking), so nDCG does
not depend on the order ties happen to come in. A query without any relevant item is left out of
the mean (its nDCG is undefined).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

Gain = Literal["exp2", "linear"]
Cutoff = Literal["none", "n_relevant"]
PAPER: tuple[Gain, Cutoff] = ("exp2", "none")  # Eq. 2's gain and discount, no cut-off: the nDCG columns
EQ2: tuple[Gain, Cutoff] = ("exp2", "n_relevant")  # Eq. 2 as written, with the cut-off at |R_q| (issue 42)
AUTHORS_CODE: tuple[Gain, Cutoff] = ("linear", "n_relevant")


def _gain(rel: np.ndarray, gain: Gain) -> np.ndarray:
    if gain == "exp2":
        return np.exp2(rel) - 1.0
    if gain == "linear":
        return rel.astype(np.float64)
    raise ValueError(f"gain must be 'exp2' or 'linear', got {gain!r}")


def _position_weights(n: int, n_relevant: np.ndarray, cutoff: Cutoff) -> np.ndarray:
    """(Q, n): 1/log2(j+1) at 1-based position j, zero past the cut-off."""
    w = 1.0 / np.log2(np.arange(n) + 2.0)
    w = np.broadcast_to(w, (len(n_relevant), n)).copy()
    if cutoff == "n_relevant":
        w[np.arange(n)[None, :] >= n_relevant[:, None]] = 0.0
    elif cutoff != "none":
        raise ValueError(f"cutoff must be 'none' or 'n_relevant', got {cutoff!r}")
    return w


def ndcg_per_query(
    scores: np.ndarray, relevance: np.ndarray, gain: Gain = "exp2", cutoff: Cutoff = "none"
) -> np.ndarray:
    """scores (Q, N) model scores, relevance (Q, N) in [0, 1] -> (Q,) nDCG (NaN: no relevant item)."""
    scores = np.asarray(scores, np.float64)
    rel = np.asarray(relevance, np.float64)
    if scores.shape != rel.shape or scores.ndim != 2:
        raise ValueError(f"scores {scores.shape} and relevance {rel.shape} must be the same (Q, N) shape")
    if np.isnan(scores).any() or np.isnan(rel).any():
        raise ValueError("scores and relevance must not contain NaN")
    if rel.size and (rel.min() < 0 or rel.max() > 1):
        raise ValueError("relevance must lie in [0, 1]")
    q, n = rel.shape
    n_rel = (rel > 0).sum(axis=1)
    w = _position_weights(n, n_rel, cutoff)
    g = _gain(rel, gain)
    # DCG, tie-aware: sort by score, average the position weights over each run of equal scores
    order = np.argsort(-scores, axis=1, kind="stable")
    s_sorted = np.take_along_axis(scores, order, axis=1)
    g_sorted = np.take_along_axis(g, order, axis=1)
    new_run = np.ones((q, n), bool)
    new_run[:, 1:] = s_sorted[:, 1:] != s_sorted[:, :-1]
    run_id = np.cumsum(new_run, axis=1) - 1  # per row, 0-based run index
    flat_run = (run_id + (np.arange(q) * n)[:, None]).ravel()
    run_sum = np.bincount(flat_run, weights=w.ravel(), minlength=q * n)
    run_len = np.bincount(flat_run, minlength=q * n)
    w_tied = (run_sum / np.maximum(run_len, 1))[flat_run].reshape(q, n)
    dcg = (g_sorted * w_tied).sum(axis=1)
    idcg = (np.sort(g, axis=1)[:, ::-1] * w).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n_rel > 0, dcg / idcg, np.nan)


def ndcg(
    scores: np.ndarray, relevance: np.ndarray, gain: Gain = "exp2", cutoff: Cutoff = "none",
    both_directions: bool = True,
) -> float:
    """Eq. 3: the mean nDCG of the rows (queries -> items), averaged with that of the columns
    (items -> queries) when ``both_directions``; in [0, 1]."""
    rows = np.nanmean(ndcg_per_query(scores, relevance, gain, cutoff))
    if not both_directions:
        return float(rows)
    cols = np.nanmean(ndcg_per_query(np.asarray(scores).T, np.asarray(relevance).T, gain, cutoff))
    return float(0.5 * rows + 0.5 * cols)


def moment_ndcg(
    pred_video: np.ndarray, pred_start: np.ndarray, pred_end: np.ndarray,
    rel_video: list[np.ndarray], rel_start: list[np.ndarray], rel_end: list[np.ndarray], rel_value: list[np.ndarray],
    iou_threshold: float = 0.5, gain: Gain = "exp2", cutoff: Cutoff = "none", depth: int = 100,
) -> np.ndarray:
    """nDCG of ranked moment lists against graded relevant moments, per query.

    A predicted moment earns the relevance of the best not-yet-credited relevant moment on its
    video that it overlaps with tIoU >= ``iou_threshold`` (each relevant moment is credited once,
    in rank order); the ideal ranks the relevant moments by relevance. Both are cut at ``depth``
    (nDCG@100), whatever the length of the lists, so a ranker returning fewer moments is not
    favoured. pred_* are (Q, K) with video
    -1 as padding; rel_*[i] are query i's relevant moments.
    """
    from momentsearch.search.tiou import temporal_iou

    q = pred_video.shape[0]
    k = min(pred_video.shape[1], depth)
    out = np.full(q, np.nan)
    for i in range(q):
        rv, rs, re_, val = rel_video[i], rel_start[i], rel_end[i], np.asarray(rel_value[i], np.float64)
        if not len(val) or val.max() <= 0:
            continue
        earned = np.zeros(k)
        used = np.zeros(len(val), bool)
        for j in range(k):
            if pred_video[i, j] < 0:
                continue
            cand = (rv == pred_video[i, j]) & ~used
            if not cand.any():
                continue
            iou = temporal_iou(pred_start[i, j], pred_end[i, j], rs, re_)
            ok = cand & (iou >= np.float32(iou_threshold))
            if ok.any():
                best = int(np.argmax(np.where(ok, val, -1.0)))
                used[best] = True
                earned[j] = val[best]
        n_rel = int((val > 0).sum())
        w = _position_weights(depth, np.array([n_rel]), cutoff)[0]
        dcg = float((_gain(earned, gain) * w[:k]).sum())
        ideal = np.sort(_gain(val, gain))[::-1][:depth]
        idcg = float((ideal * w[: len(ideal)]).sum())
        out[i] = dcg / idcg
    return out


def _video_matrices(vr, rel, by_rank: bool) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[no-untyped-def]
    """(Q, V) scores of a VR ranking and (Q, V) video-level relevance, rows in ``rel``'s query order.
    Scores are the ranking's own (``by_rank``: K - position, which orders a row the same way); videos
    a list leaves out score below every listed one."""
    vindex = {v: i for i, v in enumerate(vr.video_ids)}
    rows = vr.row_of()
    order = np.array([rows[q] for q in rel.query_ids], np.int64)
    listed = vr.video_idx[order]
    rr, cc = np.nonzero(listed >= 0)
    vals = (vr.k - cc).astype(np.float64) if by_rank else vr.score[order][rr, cc].astype(np.float64)
    floor = (vals.min() - 1.0) if len(vals) else -1.0
    scores = np.full((len(order), len(vr.video_ids)), floor)
    scores[rr, listed[rr, cc]] = vals
    dense = np.zeros_like(scores)
    qi, vi, val = rel.video_relevance()
    vmap = np.array([vindex.get(v, -1) for v in rel.video_ids], np.int64)
    keep = vmap[vi] >= 0
    dense[qi[keep], vmap[vi[keep]]] = val[keep]
    return scores, dense


def two_way_video_ndcg(vr, rel, gain: Gain = "exp2", cutoff: Cutoff = "none") -> float:  # type: ignore[no-untyped-def]
    """Eq. 3 on text <-> video: nDCG of each query's videos and of each video's queries, averaged, as a
    percentage. The video -> text direction ranks a video's queries by the VR ranking's scores, so it
    reads them as comparable across queries (true of XML's and MINUTE's cosine-style scores); videos
    a query's list leaves out score below every listed one. Rows or columns without a relevant item
    are left out of their mean."""
    scores, dense = _video_matrices(vr, rel, by_rank=False)
    return round(ndcg(scores, dense, gain, cutoff, both_directions=True) * 100, 2)


def ranked_ndcg(vr, vcmr, rel, iou_threshold: float = 0.5, gain: Gain = "exp2", cutoff: Cutoff = "none") -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Text-to-video nDCG of a VR ranking and moment nDCG of a VCMR ranking (both ``RankedMoments``)
    against a graded :class:`MomentRelevance`, as percentages, over the queries with a relevant item.

    Videos a ranked list leaves out are tied below every listed one (the tie-aware discount makes
    that exact). Rankings are per query: :func:`two_way_video_ndcg` adds the video -> text direction.
    """
    scores, dense = _video_matrices(vr, rel, by_rank=True)
    video = float(np.nanmean(ndcg_per_query(scores, dense, gain, cutoff)))
    mrows = vcmr.row_of()
    morder = np.array([mrows[q] for q in rel.query_ids], np.int64)
    mvmap = {v: i for i, v in enumerate(vcmr.video_ids)}
    rel_vid_in_pred = np.array([mvmap.get(v, -1) for v in rel.video_ids], np.int64)
    parts = [rel.row(i) for i in range(len(rel))]
    moment = moment_ndcg(
        vcmr.video_idx[morder], vcmr.start[morder], vcmr.end[morder],
        [rel_vid_in_pred[p[0]] for p in parts], [p[1] for p in parts], [p[2] for p in parts], [p[3] for p in parts],
        iou_threshold, gain, cutoff,
    )
    return {"nDCG VR": round(video * 100, 2), f"nDCG VCMR {iou_threshold}": round(float(np.nanmean(moment)) * 100, 2)}
