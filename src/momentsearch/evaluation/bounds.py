"""Upper and lower bounds of an instance-based metric when near-identical items are equivalent.

Wray et al. (``semantic-similarity-video-retrieval.txt`` Sec. 5.2, Fig. 5): the instance-based
metric credits only the annotated item, yet captions with semantic similarity above a tight
threshold (they use S'_SYN > 0.8) describe the same thing. Treating all of them as equally valid
ground truth, the metric's *upper* bound takes, per query, the highest-ranked equivalent item as
the ground truth, and its *lower* bound the lowest-ranked one (an equivalent item that is not
retrieved at all counts as a miss). The standard number always lies between the two when the
annotated item is in the equivalent set.

Here the items are videos (VR) and moments (VCMR at a tIoU threshold); the equivalent set of a
query is every entry of a :class:`MomentRelevance` with value >= ``min_relevance`` (a query x
moment table from :mod:`momentsearch.relevance.matrix` holds the annotated moment itself with
relevance 1, so it is always in the set). Besides recall@k the summary carries the geometric mean
of recall over ``ks`` (the pentathlon's prime metric that Fig. 5 plots).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from momentsearch.data.relevance import MomentRelevance
from momentsearch.evaluation.multipositive import match_relevant
from momentsearch.evaluation.recall import NO_HIT, recall_from_ranks
from momentsearch.search.ranked import DEFAULT_MAX_PREDICTIONS, RankedMoments

GEOMETRIC_MEAN_KS = (1, 5, 10)


def _reduce_rows(values: np.ndarray, indptr: np.ndarray, how: str) -> np.ndarray:
    """Per-row min or max of ``values`` over a CSR layout; NO_HIT for empty rows."""
    out = np.full(len(indptr) - 1, NO_HIT, np.int64)
    has = np.diff(indptr) > 0
    if values.size:
        red = np.minimum if how == "min" else np.maximum
        out[has] = red.reduceat(values, indptr[:-1][has])
    return out


def geometric_mean(recalls: Sequence[float]) -> float:
    """Geometric mean of percentages (0 if any is 0)."""
    r = np.asarray(recalls, np.float64)
    if (r <= 0).any():
        return 0.0
    return round(float(np.exp(np.log(r).mean())), 2)


def _summary(upper: np.ndarray, lower: np.ndarray, ks: Sequence[int], mask: np.ndarray) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, first in (("upper", upper), ("lower", lower)):
        rec = recall_from_ranks(first, ks, mask)
        out.update({f"{name}-r{k}": v for k, v in rec.items()})
        if all(k in rec for k in GEOMETRIC_MEAN_KS):
            out[f"{name}-gmean"] = geometric_mean([rec[k] for k in GEOMETRIC_MEAN_KS])
    return out


def instance_bounds(
    pred: RankedMoments,
    rel: MomentRelevance,
    min_relevance: float = 0.8,
    iou_threshold: float = 0.5,
    ks: Sequence[int] = (1, 5, 10, 100),
    max_predictions: int = DEFAULT_MAX_PREDICTIONS,
    video_pred: RankedMoments | None = None,
) -> dict[str, object]:
    """{"VR": {"upper-r1": ..., "lower-r1": ..., "upper-gmean": ...}, "VCMR": {...}, "n_queries", "n_equivalent"}.

    ``n_equivalent`` is the mean number of equivalent moments per query (>= 1 when the annotated
    moment is among them); with exactly one per query, upper == lower == the standard metric.
    """
    eq = rel.threshold(min_relevance)
    _, _, has, entry_first, entry_video_first = match_relevant(pred, eq, (iou_threshold,), max_predictions)
    if video_pred is not None:
        entry_video_first = match_relevant(video_pred, eq, (iou_threshold,), max_predictions)[4]
    indptr = eq.indptr
    # videos: each entry's video rank; min = best equivalent, max = worst equivalent
    vr = _summary(_reduce_rows(entry_video_first, indptr, "min"), _reduce_rows(entry_video_first, indptr, "max"), ks, has)
    first = entry_first[0]
    vcmr = _summary(_reduce_rows(first, indptr, "min"), _reduce_rows(first, indptr, "max"), ks, has)
    return {
        "VR": vr,
        f"VCMR@{iou_threshold}": vcmr,
        "n_queries": int(has.sum()),
        "n_equivalent": round(float(np.diff(indptr)[has].mean()), 3) if has.any() else 0.0,
        "min_relevance": min_relevance,
    }
