"""The start/end negative log-likelihood of XML (Eq. 16) and the span -> clip index mapping."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def span_to_clip_indices(start: float, end: float, clip_length: float, n_clips: int) -> tuple[int, int]:
    """Clips are [k*dt, (k+1)*dt): the start clip holds ``start``, the end clip holds ``end``."""
    st = min(max(int(math.floor(start / clip_length)), 0), n_clips - 1)
    ed = min(max(int(math.ceil(end / clip_length)) - 1, st), n_clips - 1)
    return st, ed


def start_end_nll(o_st: torch.Tensor, o_ed: torch.Tensor, st: torch.Tensor, ed: torch.Tensor) -> torch.Tensor:
    """-1/N sum_i [log P_st(t_st^i) + log P_ed(t_ed^i)] with P = softmax over each row's clips.

    o_st, o_ed (N, T) logits (padding already at -1e10); st, ed (N,) target clip indices."""
    return F.cross_entropy(o_st, st) + F.cross_entropy(o_ed, ed)
