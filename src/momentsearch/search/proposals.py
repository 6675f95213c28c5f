"""Ranked proposals instead of a dense start x end grid, for long videos.

A localizer may fill ``propose(tokens, token_mask, videos (B, K), video_scores (B, K) | None, n) ->
(st_clip, ed_clip, score)``, each (B, K, n): its best ``n`` spans per candidate video (score <= 0 marks
a missing one). The engine asks for proposals when a candidate video is longer than its dense limit
(or the localizer has no dense grid at all), so memory grows with T x max length, not T^2.
"""

from __future__ import annotations

import torch


def banded_top(p_st: torch.Tensor, p_ed: torch.Tensor, n_min: int, n_max: int, n: int
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``n`` best spans of one video by p_st[st] * p_ed[ed] with n_min <= ed - st + 1 <= n_max.

    p_st, p_ed (T,) -> (st (n,), ed (n,), score (n,)) best first; missing spans score 0. This is
    the dense ``moment_scores`` grid's top-n without building the (T, T) grid: (T, n_max) only."""
    t = p_st.shape[0]
    lengths = torch.arange(n_min - 1, n_max, device=p_st.device)  # ed - st
    ed = torch.arange(t, device=p_st.device)[:, None] + lengths[None, :]  # (T, L)
    ok = ed < t
    s = p_st[:, None] * p_ed[ed.clamp(max=t - 1)] * ok
    k = min(n, s.numel())
    score, flat = s.reshape(-1).topk(k)
    st = flat // len(lengths)
    out_ed = st + lengths[flat % len(lengths)]
    if k < n:
        pad = n - k
        st, out_ed = torch.cat([st, st.new_zeros(pad)]), torch.cat([out_ed, out_ed.new_zeros(pad)])
        score = torch.cat([score, score.new_zeros(pad)])
    return st, out_ed, score
