"""NDCG@K,IoU: graded moment ranking as TVR-Ranking (Ranking-VMR, SIGIR-AP 2024) defines it.

For one query with ground-truth moments g (video, start, end, relevance 0-4; only relevance > 0
counts) and a ranked list of predicted moments p_1, p_2, ...:

1. Sort the ground truth by relevance, highest first (stable: ties keep file order).
2. Walk the predictions in rank order. p_j looks at the ground-truth moments of its own video not
   matched yet and takes the one with the highest tIoU (the first of equal ones, i.e. the most
   relevant). If that tIoU >= the threshold, p_j earns its relevance and the moment is matched
   (it cannot be matched again); otherwise p_j earns 0. A duplicate prediction therefore earns
   nothing once its moment is taken, unless another moment of the video is close enough.
3. DCG@K = sum_{j <= K} (2^rel_j - 1) / log2(j + 1); the ideal DCG is that of the ground truth's
   relevances (sorted) cut at K. NDCG@K,IoU = DCG / IDCG.

A query with no moment of relevance > 0 is left out of the mean. Relevance here is on TVR-Ranking's
0-4 scale: a :class:`MomentRelevance` (values in (0, 1]) is read as grade = 4 x value.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from momentsearch.data.relevance import MomentRelevance

MAX_GRADE = 4.0
DEFAULT_NDCG_KS = (10, 20, 40)
DEFAULT_NDCG_IOUS = (0.3, 0.5, 0.7)


def ndcg_iou_key(k: int, iou: float) -> str:
    """The metric's name in rows and tables, e.g. ``"NDCG@10 IoU0.5"``."""
    return f"NDCG@{k} IoU{iou:g}"


NDCG_IOU_COLUMNS = [ndcg_iou_key(k, t) for k in DEFAULT_NDCG_KS for t in DEFAULT_NDCG_IOUS]


def _iou(st: float, ed: float, gst: np.ndarray, ged: np.ndarray) -> np.ndarray:
    # float64, as TVR-Ranking's reference computes it (evaluation.tiou follows TVR's float32 instead)
    inter = np.maximum(0.0, np.minimum(ed, ged) - np.maximum(st, gst))
    union = (ed - st) + (ged - gst) - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / np.where(union > 0, union, 1.0), 0.0)


def _dcg(grades: np.ndarray) -> float:
    return float(((np.exp2(grades) - 1.0) / np.log2(np.arange(len(grades)) + 2.0)).sum())


def earned_grades(
    pred: Sequence[tuple[object, float, float]], gt: Sequence[tuple[object, float, float, float]], iou_threshold: float
) -> np.ndarray:
    """The grade each prediction earns (step 2 above); ``gt`` already sorted by grade, highest first."""
    gt_video = [g[0] for g in gt]
    gst = np.array([g[1] for g in gt], np.float64)
    ged = np.array([g[2] for g in gt], np.float64)
    grade = np.array([g[3] for g in gt], np.float64)
    free = np.ones(len(gt), bool)
    out = np.zeros(len(pred))
    for j, (video, st, ed) in enumerate(pred):
        cand = np.flatnonzero(free & np.array([v == video for v in gt_video], bool)) if len(gt) else []
        if not len(cand):
            continue
        ious = _iou(float(st), float(ed), gst[cand], ged[cand])
        best = int(np.argmax(ious))
        if ious[best] >= iou_threshold:
            out[j] = grade[cand[best]]
            free[cand[best]] = False
    return out


def ndcg_iou_query(
    pred: Sequence[tuple[object, float, float]], gt: Sequence[tuple[object, float, float, float]],
    ks: Sequence[int] = DEFAULT_NDCG_KS, iou_threshold: float = 0.5,
) -> dict[int, float] | None:
    """{K: NDCG@K at ``iou_threshold``} for one query; None when no ground truth has grade > 0.

    pred: ranked (video, start, end); gt: (video, start, end, grade 0-4), any order.
    """
    if any(k < 1 for k in ks):
        raise ValueError(f"K must be >= 1, got {list(ks)}")
    if not 0 <= iou_threshold <= 1:
        raise ValueError(f"the IoU threshold must lie in [0, 1], got {iou_threshold}")
    pos = [g for g in gt if g[3] > 0]
    if not pos:
        return None
    pos = sorted(pos, key=lambda g: -g[3])  # stable: equal grades keep their order
    ideal = np.array([g[3] for g in pos], np.float64)
    earned = earned_grades(list(pred)[: max(ks)], pos, iou_threshold)
    return {k: _dcg(earned[:k]) / _dcg(ideal[:k]) for k in ks}


def ndcg_iou(
    vcmr, rel: MomentRelevance, ks: Sequence[int] = DEFAULT_NDCG_KS,  # type: ignore[no-untyped-def]
    ious: Sequence[float] = DEFAULT_NDCG_IOUS,
) -> dict[str, float | None]:
    """NDCG@K,IoU (%) of a VCMR ranking (``RankedMoments``) against graded moments, averaged over the
    queries of ``rel`` with a relevant moment; keys ``"NDCG@10 IoU0.5"`` and ``"n_queries"``.

    Every query of ``rel`` must be ranked: a missing one is an error, not a zero. With no query that has
    a relevant moment the values are None (JSON null), not NaN.
    """
    rows = vcmr.row_of()
    missing = [q for q in rel.query_ids if q not in rows]
    if missing:
        raise KeyError(f"{len(missing)} graded queries have no ranked moments, e.g. {missing[:3]}")
    vmap = {v: i for i, v in enumerate(vcmr.video_ids)}
    rel_vid = np.array([vmap.get(v, -1) for v in rel.video_ids], np.int64)
    kmax = max(ks)
    scores: dict[tuple[int, float], list[float]] = {(k, t): [] for k in ks for t in ious}
    for i, qid in enumerate(rel.query_ids):
        v, s, e, val = rel.row(i)
        gt = [(int(rel_vid[a]), float(b), float(c), float(d) * MAX_GRADE) for a, b, c, d in zip(v, s, e, val, strict=True)]
        r = rows[qid]
        keep = vcmr.video_idx[r, :kmax] != -1  # padding; an unknown video (-2) keeps its rank and earns 0
        pred = list(zip(vcmr.video_idx[r, :kmax][keep].tolist(), vcmr.start[r, :kmax][keep].tolist(),
                        vcmr.end[r, :kmax][keep].tolist(), strict=True))
        for t in ious:
            res = ndcg_iou_query(pred, gt, ks, t)
            if res is None:
                break
            for k in ks:
                scores[(k, t)].append(res[k])
    out: dict[str, float | None] = {ndcg_iou_key(k, t): round(float(np.mean(v)) * 100, 2) if v else None
           for (k, t), v in scores.items()}
    out["n_queries"] = len(scores[(ks[0], ious[0])])
    return out
