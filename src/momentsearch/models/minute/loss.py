"""MINUTE's training objectives (Sec. 4.3): InfoNCE for the retriever, Shared-Norm NLL for the localizer.

    L_retriever = L^v + L^q, in-batch negatives in both directions                         (Eq. 18)
    L_localizer = L^st + L^ed, the start/end softmax over every clip of the positive video and
                  its n hard negatives together (Shared-Norm)                                (Eq. 19)
"""

from __future__ import annotations

import torch

from momentsearch.distributed import sharded
from momentsearch.losses.contrastive import bidirectional_info_nce
from momentsearch.losses.localization import start_end_nll
from momentsearch.models.minute.batches import MinuteBatch
from momentsearch.models.minute.network import MINUTE


def retriever_loss(model: MINUTE, batch: MinuteBatch) -> tuple[torch.Tensor, dict[str, float]]:
    r = model.retriever
    q = sharded(r.encode_queries, batch.tokens, batch.token_mask)  # this rank's rows, gathered
    c = sharded(r.encode_videos, batch.streams, batch.clip_mask)
    s_r = sharded(lambda qs: r.video_scores(qs, c, batch.clip_mask), q)[:, batch.video_col]  # (B, B)
    l_v, l_q = bidirectional_info_nce(s_r, batch.same_video)
    loss = l_v + l_q
    return loss, {"loss": loss.item(), "loss_retriever": loss.item(), "L^v": l_v.item(), "L^q": l_q.item()}


def shared_norm_logits(model: MINUTE, batch: MinuteBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """l_st, l_ed (B, C, T) of each query on its C = 1 + n candidate videos (positive first)."""
    assert batch.candidates is not None
    loc = model.localizer
    w, q = sharded(loc.query, batch.tokens, batch.token_mask)  # this rank's rows, gathered
    c = sharded(loc.video, batch.streams, batch.clip_mask)  # (U, S, T, d), each distinct video once
    b, n_cand = batch.candidates.shape
    qi = torch.arange(b, device=w.device).repeat_interleave(n_cand)
    vi = batch.candidates.reshape(-1)
    l_st, l_ed = sharded(loc.logits, w[qi], batch.token_mask[qi], q[qi], c[vi], batch.clip_mask[vi])
    return l_st.reshape(b, n_cand, -1), l_ed.reshape(b, n_cand, -1)


def shared_norm_nll(l_st: torch.Tensor, l_ed: torch.Tensor, st: torch.Tensor, ed: torch.Tensor) -> torch.Tensor:
    """Eq. 19, L^st + L^ed averaged over queries: l_st, l_ed (B, C, T) with the positive video in
    block 0 and padding at NEG_INF; one softmax over all C x T clips, so clip t of the positive is index t."""
    b = l_st.shape[0]
    return start_end_nll(l_st.reshape(b, -1), l_ed.reshape(b, -1), st, ed)


def localizer_loss(model: MINUTE, batch: MinuteBatch) -> tuple[torch.Tensor, dict[str, float]]:
    l_st, l_ed = shared_norm_logits(model, batch)
    b = l_st.shape[0]
    loss = shared_norm_nll(l_st, l_ed, batch.st, batch.ed)
    with torch.no_grad():  # how much start probability mass the positive video holds
        mass = l_st.reshape(b, -1).softmax(-1).reshape(l_st.shape)[:, 0].sum(-1).mean()
    return loss, {"loss": loss.item(), "loss_localizer": loss.item(), "positive_video_mass": mass.item()}
