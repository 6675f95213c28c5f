"""Losses with potentially relevant pairs (``potentially-relevant-pairs-vcmr.txt`` Sec. 4.2) and
semantic-threshold triplets (``semantic-similarity-video-retrieval.txt`` Sec. 4.3).

Notation: ``scores[i, j]`` = R(q_i, item_j) over a batch, item i being query i's annotated (video,
moment), so the diagonal holds the positive pairs. ``pairs`` (B, B) bool marks the potentially
relevant pairs (q_i, item_j) — j = i~+ — and ``conf`` (B, B) their confidence C in [0, 1]. Negatives
are drawn beforehand (``sample_negatives``): ``neg_v[i]`` is query i's negative item, ``neg_q[j]``
item j's negative query, so that R^(i, i-) = scores[i, neg_v[i]] and R^(j-, j) = scores[neg_q[j], j].

    Eq. 11  L_rel>neg = 1/N_pairs [ sum_(i,j) [Delta + R^(i, i-) - C_ij R(i, j)]_+
                                    + sum_(k,j) [Delta + R^(j-, j) - C_kj R(k, j)]_+ ]
    Eq. 12  L_pos>=rel = 1/N_pairs [ sum_(i,j) [R(i, j) - C_ij R(i, i)]_+ + sum_(k,j) [R(k, j) - C_kj R(j, j)]_+ ]
    Eq. 14  R_vcmr(i, j) = log o_st(i,j)(t_st^j) + log o_ed(i,j)(t_ed^j) + alpha s_vr(v_j | q_i)
    Eq. 17  L_nll,2 = -1/N_pairs sum_(i,j) C_ij [log P_(i,j),st(t_st^j) + log P_(i,j),ed(t_ed^j)]

Each sum runs over the batch's potentially relevant pairs, once per direction (row: the pair's
item is a potentially relevant item for query i; column: the pair's query is a potentially relevant
query for item j). N_pairs counts the pairs of the batch (``over="pairs"``, the paper's); ``over="batch"``
divides by the batch size B instead, as L_pos>neg is (a control: a lone pair no longer weighs as much as many).
With no pair in a batch every term is 0.
"""

from __future__ import annotations

from typing import Literal

import torch
import torch.nn.functional as F

FloorMode = Literal["shift", "clamp"]
Over = Literal["pairs", "batch"]


def _zero(scores: torch.Tensor) -> torch.Tensor:
    return scores.sum() * 0.0  # keeps the graph (and the dtype/device) for an empty pair set


def _denominator(pairs: torch.Tensor, n_pairs: torch.Tensor, over: Over) -> torch.Tensor | int:
    return n_pairs if over == "pairs" else pairs.shape[0]


def rel_neg_loss(scores: torch.Tensor, pairs: torch.Tensor, conf: torch.Tensor, neg_v: torch.Tensor,
                 neg_q: torch.Tensor, margin: float = 0.1, over: Over = "pairs") -> torch.Tensor:
    """Eq. 11: a potentially relevant pair, weighted by its confidence, above the negative."""
    n_pairs = pairs.sum()
    if n_pairs == 0:
        return _zero(scores)
    ar = torch.arange(scores.shape[0], device=scores.device)
    weighted = conf * scores
    row = (margin + scores[ar, neg_v][:, None] - weighted).clamp(min=0)
    col = (margin + scores[neg_q, ar][None, :] - weighted).clamp(min=0)
    return ((row + col) * pairs).sum() / _denominator(pairs, n_pairs, over)


def pos_rel_loss(scores: torch.Tensor, pairs: torch.Tensor, conf: torch.Tensor, over: Over = "pairs") -> torch.Tensor:
    """Eq. 12: the positive pair, scaled by the confidence, at least as high as the potentially relevant one."""
    n_pairs = pairs.sum()
    if n_pairs == 0:
        return _zero(scores)
    pos = scores.diagonal()
    row = (scores - conf * pos[:, None]).clamp(min=0)
    col = (scores - conf * pos[None, :]).clamp(min=0)
    return ((row + col) * pairs).sum() / _denominator(pairs, n_pairs, over)


def floor_logits(o: torch.Tensor, clip_mask: torch.Tensor, floor: float = 1e-6, mode: FloorMode = "shift") -> torch.Tensor:
    """Make start/end logits positive so that their log exists, with inf_t o(t) = ``floor`` (Eq. 14's note).

    ``shift`` (default) subtracts each row's minimum over its real clips and adds ``floor``: the
    infimum is then exactly ``floor``, the order of the clips is kept and every logit keeps its
    gradient. ``clamp`` is the other reading, max(o, floor): logits below the floor lose their gradient.
    o (..., T), clip_mask broadcastable to o.
    """
    if mode == "clamp":
        return o.clamp(min=floor)
    if mode != "shift":
        raise ValueError(f"floor mode must be 'shift' or 'clamp', got {mode!r}")
    big = torch.finfo(o.dtype).max
    low = o.masked_fill(~clip_mask, big).min(dim=-1, keepdim=True).values
    return (o - low + floor).masked_fill(~clip_mask, floor)


def segment_scores(o_st: torch.Tensor, o_ed: torch.Tensor, clip_mask: torch.Tensor, video_col: torch.Tensor,
                   st: torch.Tensor, ed: torch.Tensor, s_vr: torch.Tensor, alpha: float,
                   floor: float = 1e-6, mode: FloorMode = "shift") -> torch.Tensor:
    """Eq. 14 for every (query i, item j) of a batch -> (B, B).

    o_st, o_ed (B, U, T) logits of every query on every distinct video; clip_mask (U, T);
    video_col (B,) the video of item j; st, ed (B,) item j's target clips; s_vr (B, B) video scores.
    """
    b = o_st.shape[0]
    mask = clip_mask[video_col][None].expand(b, -1, -1)  # (B, B, T)
    lst = floor_logits(o_st[:, video_col], mask, floor, mode).log()
    led = floor_logits(o_ed[:, video_col], mask, floor, mode).log()
    idx_st = st[None, :, None].expand(b, -1, 1)
    idx_ed = ed[None, :, None].expand(b, -1, 1)
    return lst.gather(-1, idx_st).squeeze(-1) + led.gather(-1, idx_ed).squeeze(-1) + alpha * s_vr


def pair_nll_loss(o_st: torch.Tensor, o_ed: torch.Tensor, video_col: torch.Tensor, st: torch.Tensor,
                  ed: torch.Tensor, pairs: torch.Tensor, conf: torch.Tensor, over: Over = "pairs") -> torch.Tensor:
    """Eq. 17: start/end NLL of query i on item j's moment, over the pairs, weighted by C.

    o_st, o_ed (B, U, T) logits (padding at -1e10, so it has no probability)."""
    n_pairs = pairs.sum()
    if n_pairs == 0:
        return _zero(o_st)
    b = o_st.shape[0]
    lp_st = F.log_softmax(o_st, dim=-1)[:, video_col].gather(-1, st[None, :, None].expand(b, -1, 1)).squeeze(-1)
    lp_ed = F.log_softmax(o_ed, dim=-1)[:, video_col].gather(-1, ed[None, :, None].expand(b, -1, 1)).squeeze(-1)
    return -(conf * (lp_st + lp_ed) * pairs).sum() / _denominator(pairs, n_pairs, over)


def threshold_triplet_loss(scores: torch.Tensor, positive: torch.Tensor, neg_v: torch.Tensor,
                           neg_q: torch.Tensor, margin: float = 0.1) -> torch.Tensor:
    """Wray et al. Eq. 4 with semantic thresholding: every pair with S >= T is a positive, the
    negatives (drawn from S < T) are shared per anchor. Mean over the positive pairs, both directions:

        1/|P| sum_(i,j) in P [m + R(i, i-) - R(i, j)]_+  +  1/|P| sum_(i,j) in P [m + R(j-, j) - R(i, j)]_+

    With P the diagonal it is exactly XML's ``hinge_ranking_loss``.
    """
    n = positive.sum()
    ar = torch.arange(scores.shape[0], device=scores.device)
    row = (margin + scores[ar, neg_v][:, None] - scores).clamp(min=0)
    col = (margin + scores[neg_q, ar][None, :] - scores).clamp(min=0)
    return (row * positive).sum() / n + (col * positive).sum() / n
