"""The MVMR protocol (Yang et al., Sec. 6.5): per query, every proposal of every video of its pool
is ranked, after temporal NMS per video at the authors' threshold (0.4 for TACoS, 0.5 elsewhere, for
every model family alike), and a hit is ANY positive moment of the pool (the gold one or an extra
positive) at tIoU >= m within the top n: R@n at IoU m for n in {1, 5, 10, 20, 50} (TACoS's pools of
5 videos stop at 20) and m in {0.3, 0.5, 0.7}. Only full pools count (Table 3: 3,716 Charades-STA and
2,055 TACoS queries). The NLVL numbers beside them rank the gold video alone against its gold moment
(R@{1, 5}).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from momentsearch.data.mvmr import MVMRPools, dataset_of
from momentsearch.data.relevance import MomentRelevance
from momentsearch.errors import PredictionError
from momentsearch.evaluation.multipositive import multi_positive_hits, multi_positive_recall
from momentsearch.evaluation.recall import first_hit_rank
from momentsearch.search.ranked import RankedMoments

MVMR_KS = (1, 5, 10, 20, 50)
MVMR_IOUS = (0.3, 0.5, 0.7)
NLVL_KS = (1, 5)
AUTHORS_NMS = {"tacos": 0.4}  # the MVMR authors' configs per dataset; 0.5 for the others
DEFAULT_NMS = 0.5


def protocol_nms(pools: MVMRPools) -> float:
    """The NMS threshold the MVMR authors use on these pools' dataset (from the file name, e.g.
    ``tacos_test_mvmr``): 0.4 for TACoS, else 0.5."""
    return AUTHORS_NMS.get(dataset_of(Path(pools.name)) or "", DEFAULT_NMS)


def ks_for(pool_size: int) -> tuple[int, ...]:
    """R@50 is left out for pools of at most 5 videos (MVMR-TACoS), as in the authors' tables."""
    return tuple(k for k in MVMR_KS if pool_size > 5 or k <= 20)


def restrict_ranking(pred: RankedMoments, pools: MVMRPools) -> RankedMoments:
    """A ranking over the whole corpus cut to each query's pool (for prediction files made without pools)."""
    row = {q: i for i, q in enumerate(pred.query_ids)}
    missing = [q for q in pools.pools if q not in row]
    if missing:
        raise PredictionError(f"{len(missing)} pooled queries have no predictions, e.g. {missing[:3]}")
    vindex = {v: i for i, v in enumerate(pred.video_ids)}
    k = pred.k
    out = [np.full((len(pools.pools), k), fill, dtype) for fill, dtype in
           ((-1, np.int64), (0.0, np.float64), (0.0, np.float64), (np.nan, np.float64))]
    for n, (q, pool) in enumerate(pools.pools.items()):
        i = row[q]
        allowed = np.array([vindex.get(v, -2) for v in pool])
        keep = np.flatnonzero(np.isin(pred.video_idx[i], allowed) & (pred.video_idx[i] >= 0))
        for a, src in zip(out, (pred.video_idx, pred.start, pred.end, pred.score), strict=True):
            a[n, : len(keep)] = src[i, keep]
    return RankedMoments(list(pools.pools), pred.video_ids, *out)


def mvmr_metrics(ranked: dict[str, RankedMoments], pools: MVMRPools, video_ids: Sequence[str],
                 ks: Sequence[int] | None = None) -> dict[str, Any]:
    """{"MVMR": {"0.5-r1": ...}, "MVMR-VR": {"r1": ...}, "NLVL": {...}} from a pooled "VCMR" ranking
    (and "VR", "SVMR" on the gold video, when given)."""
    ks = tuple(ks or ks_for(pools.pool_size))
    rel = pools.relevance(video_ids)
    mv = multi_positive_recall(ranked["VCMR"], rel, MVMR_IOUS, ks, max_predictions=max(ks))
    out: dict[str, Any] = {"MVMR": mv["VCMR"], "n_queries": mv["n_queries"], "pool_size": pools.pool_size,
                           "positives_per_query": float(np.mean([len(p) for p in pools.positives.values()]))}
    if "VR" in ranked:
        out["MVMR-VR"] = multi_positive_recall(ranked["VR"], rel, MVMR_IOUS, ks)["VR"]
    if "SVMR" in ranked:
        vindex = {v: i for i, v in enumerate(rel.video_ids)}
        gold = MomentRelevance.from_rows(
            rel.query_ids, rel.video_ids,
            [[(vindex[ps[0].video_id], *ps[0].span, 1.0)] for ps in pools.positives.values()])
        out["NLVL"] = multi_positive_recall(ranked["SVMR"], gold, MVMR_IOUS, NLVL_KS)["VCMR"]
    return out


PER_QUERY_MVMR = ((0.5, 0.7), (1, 5, 10))  # the tIoUs and ks mvmr_per_query records


def mvmr_per_query(ranked: dict[str, RankedMoments], pools: MVMRPools, video_ids: Sequence[str]
                   ) -> dict[str, dict[str, float]]:
    """Query id -> {"MVMR 0.5-r1": 100 x hit, ...}: each pooled query's own result, whose mean over the queries is
    :func:`mvmr_metrics`' recall (what a two-level bootstrap over test queries resamples; issue 75 part 4)."""
    ious, ks = PER_QUERY_MVMR
    rel = pools.relevance(video_ids)
    _, mh, has = multi_positive_hits(ranked["VCMR"], rel, ious, max_predictions=max(ks))
    out: dict[str, dict[str, float]] = {}
    for t, thr in enumerate(ious):
        first = first_hit_rank(mh[t])
        for q, rank, counted in zip(rel.query_ids, first, has, strict=True):
            if counted:
                out.setdefault(q, {}).update({f"MVMR {thr}-r{k}": 100.0 * float(rank < k) for k in ks})
    return out
