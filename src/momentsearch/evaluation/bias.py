"""The moment-prediction-bias analysis of MINUTE (Hou et al., Figs. 1 and 5), for any ranker.

Given one run's VCMR ranking over the top ``K_max`` retrieved videos and its VR ranking:

* :func:`recall_by_k_videos`: VCMR R@n when only the moments of the top-K retrieved videos are
  kept (K = 1 .. K_max), next to VR R@K. For scores that do not depend on K (XML's Eq. 3, MINUTE's
  Eq. 13, the two-stage Eq. 5), this equals running the localizer on the top K videos;
* :func:`top1_video_ranks`: the distribution of the retrieval rank of the video each query's top-1
  moment comes from, next to the retrieval rank of the correct video.

If VCMR recall stops rising with K while VR recall still rises, the top moments come from the top
few videos whatever the localizer says (the bias).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from momentsearch.evaluation.recall import (
    NO_HIT,
    GroundTruth,
    align,
    first_hit_rank,
    first_hit_rank_within,
    hit_matrix,
)
from momentsearch.search.ranked import RankedMoments

RANK_BINS = ((1, 1), (2, 2), (3, 3), (4, 5), (6, 10), (11, 20), (21, 50), (51, 100))


def retrieval_ranks(vcmr: RankedMoments, vr: RankedMoments) -> np.ndarray:
    """(Q, M): the 0-based retrieval rank of the video of each VCMR moment (NO_HIT if not retrieved).
    Both rankings must be aligned to the same query order."""
    if vcmr.query_ids != vr.query_ids:
        raise ValueError("VCMR and VR rankings must list the same queries in the same order")
    n_videos = len(vr.video_ids)
    rank = np.full((len(vr.query_ids), n_videos + 1), NO_HIT, np.int64)  # column n_videos: padding (-1)
    rows = np.arange(len(vr.query_ids))[:, None]
    k = vr.video_idx.shape[1]
    order = np.broadcast_to(np.arange(k), vr.video_idx.shape)
    valid = vr.video_idx >= 0
    rank[np.broadcast_to(rows, valid.shape)[valid], vr.video_idx[valid]] = order[valid]
    return rank[rows, np.where(vcmr.video_idx >= 0, vcmr.video_idx, n_videos)]


def recall_by_k_videos(vcmr: RankedMoments, vr: RankedMoments, gt: GroundTruth, ks: Sequence[int],
                       iou_thresholds: Sequence[float] = (0.5, 0.7), top: Sequence[int] = (1, 10)
                       ) -> dict[str, list[float]]:
    """{"VR r@K": [...], "VCMR 0.5-r1": [...], ...}: one value (%) per K in ``ks``."""
    vcmr, vr = align(vcmr, gt, "VCMR"), align(vr, gt, "VR")
    ranks = retrieval_ranks(vcmr, vr)
    _, correct = hit_matrix(vcmr, gt, iou_thresholds)
    vr_first = first_hit_rank(hit_matrix(vr, gt, ())[0])
    out: dict[str, list[float]] = {"VR r@K": [float(np.mean(vr_first < k)) * 100 for k in ks]}
    for t, thr in enumerate(iou_thresholds):
        firsts = [first_hit_rank_within(correct[t], ranks < k) for k in ks]
        for n in top:
            out[f"VCMR {thr}-r{n}"] = [float(np.mean(f < n)) * 100 for f in firsts]
    return out


def top1_video_ranks(vcmr: RankedMoments, vr: RankedMoments, gt: GroundTruth,
                     bins: Sequence[tuple[int, int]] = RANK_BINS) -> dict[str, list[float]]:
    """% of queries whose top-1 moment comes from the video retrieved at rank r (1-based, binned),
    and the same for the correct video's retrieval rank."""
    vcmr, vr = align(vcmr, gt, "VCMR"), align(vr, gt, "VR")
    top1 = retrieval_ranks(vcmr, vr)[:, 0]
    correct = first_hit_rank(hit_matrix(vr, gt, ())[0])

    def hist(r: np.ndarray) -> list[float]:
        return [float(np.mean((r >= lo - 1) & (r <= hi - 1))) * 100 for lo, hi in bins]  # r is 0-based

    return {"top-1 moment's video": hist(top1), "correct video": hist(correct)}


def bin_labels(bins: Sequence[tuple[int, int]] = RANK_BINS) -> list[str]:
    return [str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in bins]
