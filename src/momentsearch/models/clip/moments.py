"""The training-free moment rule: spans of high query-clip similarity.

For one query and one video with per-clip cosines c_1..c_T (query text embedding against each clip's
image embedding):

1. smooth: s_t is the mean of c over the ``smooth`` clips centred on t (1 = no smoothing; at the
   video's ends the window holds the clips there are);
2. threshold per video: theta = mean(s) + kappa * std(s) over the video's clips;
3. moments are the maximal runs of consecutive clips with s_t >= theta; a run longer than
   ``max_clips`` is cut into consecutive pieces of ``max_clips`` (the last one shorter); a video with
   no run above theta (possible when kappa > 0) gives its best clip alone;
4. a moment's score is (1 + mean of c over its clips) / 2, in [0, 1]. Cosines of one text tower
   against one image tower are comparable across videos, so this score ranks moments across the
   corpus (VCMR) as it ranks them inside one video.

A video's retrieval score is its best clip's cosine (max over clips).
"""

from __future__ import annotations

import numpy as np


def smoothed(c: np.ndarray, smooth: int) -> np.ndarray:
    if smooth <= 1 or len(c) == 1:
        return c
    half = smooth // 2
    cs = np.concatenate([[0.0], np.cumsum(c, dtype=np.float64)])
    idx = np.arange(len(c))
    lo, hi = np.maximum(idx - half, 0), np.minimum(idx + (smooth - 1 - half), len(c) - 1) + 1
    return ((cs[hi] - cs[lo]) / (hi - lo)).astype(c.dtype)


def similarity_moments(c: np.ndarray, kappa: float, max_clips: int, smooth: int = 1
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-clip cosines (T,) -> (start clip, end clip inclusive, score), best first."""
    c = np.asarray(c, np.float64)
    if c.ndim != 1 or len(c) == 0:
        raise ValueError(f"expected a non-empty vector of clip similarities, got shape {c.shape}")
    s = smoothed(c, smooth)
    above = s >= s.mean() + kappa * s.std()
    edges = np.flatnonzero(np.diff(np.concatenate([[0], above.astype(np.int8), [0]])))
    st_list, ed_list = [], []
    for a, b in zip(edges[0::2], edges[1::2], strict=True):  # run [a, b)
        for p in range(a, b, max_clips):
            st_list.append(p)
            ed_list.append(min(p + max_clips, b) - 1)
    if not st_list:
        best = int(np.argmax(s))
        st_list, ed_list = [best], [best]
    st, ed = np.asarray(st_list, np.int64), np.asarray(ed_list, np.int64)
    cs = np.concatenate([[0.0], np.cumsum(c)])
    score = (1.0 + (cs[ed + 1] - cs[st]) / (ed - st + 1)) / 2.0
    order = np.argsort(-score, kind="stable")
    return st[order], ed[order], score[order].astype(np.float32)
