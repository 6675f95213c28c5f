"""NDCG@K,IoU: graded moment ranking as TVR-Ranking (Ranking-VMR, SIGIR-AP 2024) computes it.

By default (``rule="reference"``) this is the reference code's ``calculate_ndcg_iou``
(``modules/ndcg_iou.py``), rule for rule. For one query with ground-truth moments g (video, start,
end, grade 0-4, spans as the file has them, not clamped) and ranked predictions p_1, p_2, ...:

1. Sort the ground truth by grade, highest first (stable: ties keep file order). Moments of grade 0
   stay in: they take part in matching.
2. Walk the predictions in rank order. p_j looks at the ground-truth moments of its own video not
   matched yet and takes the one with the highest tIoU (the first of equal ones). If that tIoU is
   **greater than** the threshold, p_j earns that moment's grade (0 for a grade-0 moment) and the
   moment is matched (never again); otherwise p_j earns 0.
3. DCG@K = sum_{j <= K} (2^grade_j - 1) / log2(j + 1); the ideal DCG is that of the ground truth's
   grades (sorted) cut at K; NDCG = DCG / IDCG, and 0 when IDCG is 0.
4. The mean runs over every query of the ground truth: one whose moments are all of grade 0 (or
   that has none) counts as 0.

``rule="paper"`` is the paper's reading of the metric: a match needs tIoU >= the threshold, moments
of grade 0 are not relevant and take no part, and queries without a relevant moment are left out of
the mean. It scores the same ranking higher wherever a prediction lies exactly at the threshold
(common on a clip grid: tIoU 0.5 between 1.5 s-grid spans), where a grade-0 moment would have taken
a prediction, or where queries have only grade-0 moments. The reference rule is the default, so that
numbers compare with published TVR-Ranking results.

Relevance tables (:class:`MomentRelevance`, values in (0, 1]) are read as grade = 4 x value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from momentsearch.data.relevance import MomentRelevance

MAX_GRADE = 4.0
DEFAULT_NDCG_KS = (10, 20, 40)
DEFAULT_NDCG_IOUS = (0.3, 0.5, 0.7)
RULES = ("reference", "paper")
GroundTruth = Mapping[str, Sequence[tuple[str, float, float, float]]]  # query -> (video, start, end, grade 0-4)


def ndcg_iou_key(k: int, iou: float) -> str:
    """The metric's name in rows and tables, e.g. ``"NDCG@10 IoU0.5"``."""
    return f"NDCG@{k} IoU{iou:g}"


NDCG_IOU_COLUMNS = [ndcg_iou_key(k, t) for k in DEFAULT_NDCG_KS for t in DEFAULT_NDCG_IOUS]


def _iou(st: float, ed: float, gst: float, ged: float) -> float:
    # float64 operations in the reference's order, so that a tIoU at the threshold compares the same
    inter = max(0.0, min(ed, ged) - max(st, gst))
    union = (ed - st) + (ged - gst) - inter
    return inter / union if union > 0 else 0.0


def _dcg(grades: Sequence[float]) -> float:
    return float(sum((2.0 ** g - 1.0) / np.log2(i + 2) for i, g in enumerate(grades)))


def earned_grades(
    pred: Sequence[tuple[object, float, float]], gt: Sequence[tuple[object, float, float, float]], iou_threshold: float,
    strict: bool = True,
) -> np.ndarray:
    """The grade each prediction earns (step 2 above); ``gt`` already sorted by grade, highest first.
    ``strict``: a match needs tIoU > the threshold (the reference), else >=."""
    free = list(gt)
    out = np.zeros(len(pred))
    for j, (video, st, ed) in enumerate(pred):
        cand = [i for i, g in enumerate(free) if g[0] == video]
        if not cand:
            continue
        ious = [_iou(float(st), float(ed), float(free[i][1]), float(free[i][2])) for i in cand]
        best = int(np.argmax(ious))
        if ious[best] > iou_threshold or (not strict and ious[best] >= iou_threshold):
            out[j] = free.pop(cand[best])[3]
    return out


def ndcg_iou_query(
    pred: Sequence[tuple[object, float, float]], gt: Sequence[tuple[object, float, float, float]],
    ks: Sequence[int] = DEFAULT_NDCG_KS, iou_threshold: float = 0.5, rule: str = "reference",
) -> dict[int, float] | None:
    """{K: NDCG@K at ``iou_threshold``} for one query under ``rule``; None under the paper's rule when
    no ground truth has grade > 0 (the query is left out).

    pred: ranked (video, start, end); gt: (video, start, end, grade 0-4), any order.
    """
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    if any(k < 1 for k in ks):
        raise ValueError(f"K must be >= 1, got {list(ks)}")
    if not 0 <= iou_threshold <= 1:
        raise ValueError(f"the IoU threshold must lie in [0, 1], got {iou_threshold}")
    ref = rule == "reference"
    pos = sorted((g for g in gt if ref or g[3] > 0), key=lambda g: -g[3])  # stable: equal grades keep their order
    if not ref and not pos:
        return None
    ideal = [float(g[3]) for g in pos]
    earned = earned_grades(list(pred)[: max(ks)], pos, iou_threshold, strict=ref).tolist()
    out = {}
    for k in ks:
        idcg = _dcg(ideal[:k])
        out[k] = _dcg(earned[:k]) / idcg if idcg > 0 else 0.0
    return out


def graded_moments(rel: MomentRelevance) -> dict[str, list[tuple[str, float, float, float]]]:
    """A relevance table as ground truth: grade = 4 x value, videos by id."""
    out = {}
    for i, qid in enumerate(rel.query_ids):
        v, s, e, val = rel.row(i)
        out[qid] = [(rel.video_ids[a], float(b), float(c), float(d) * MAX_GRADE)
                    for a, b, c, d in zip(v.tolist(), s.tolist(), e.tolist(), val.tolist(), strict=True)]
    return out


def ndcg_iou(
    vcmr, truth: MomentRelevance | GroundTruth, ks: Sequence[int] = DEFAULT_NDCG_KS,  # type: ignore[no-untyped-def]
    ious: Sequence[float] = DEFAULT_NDCG_IOUS, rule: str = "reference",
) -> dict[str, float | None]:
    """NDCG@K,IoU (%) of a VCMR ranking (``RankedMoments``) against graded moments, averaged over the
    queries of ``truth`` (under ``rule="paper"``, those with a relevant moment); keys
    ``"NDCG@10 IoU0.5"`` and ``"n_queries"``.

    ``truth``: a relevance table, or {query: [(video, start, end, grade 0-4), ...]} such as
    :attr:`TVRRanking.moments <momentsearch.data.loaders.tvr_ranking.TVRRanking.moments>`. Every query of
    ``truth`` must be ranked: a missing one is an error, not a zero (queries ranked but not in ``truth``
    are not scored). With no query to average the values are None (JSON null), not NaN.
    """
    gt_all = graded_moments(truth) if isinstance(truth, MomentRelevance) else truth
    rows = vcmr.row_of()
    missing = [q for q in gt_all if q not in rows]
    if missing:
        raise KeyError(f"{len(missing)} graded queries have no ranked moments, e.g. {missing[:3]}")
    names = list(vcmr.video_ids)
    kmax = max(ks)
    scores: dict[tuple[int, float], list[float]] = {(k, t): [] for k in ks for t in ious}
    for qid, gt in gt_all.items():
        r = rows[qid]
        idx = vcmr.video_idx[r, :kmax]
        keep = idx != -1  # padding; an unknown video (-2) keeps its rank and earns 0
        pred = [(names[a] if a >= 0 else None, b, c) for a, b, c in zip(
            idx[keep].tolist(), vcmr.start[r, :kmax][keep].tolist(), vcmr.end[r, :kmax][keep].tolist(), strict=True)]
        for t in ious:
            res = ndcg_iou_query(pred, gt, ks, t, rule)
            if res is None:
                break
            for k in ks:
                scores[(k, t)].append(res[k])
    out: dict[str, float | None] = {ndcg_iou_key(k, t): round(float(np.mean(v)) * 100, 2) if v else None
                                    for (k, t), v in scores.items()}
    out["n_queries"] = len(scores[(ks[0], ious[0])])
    return out
