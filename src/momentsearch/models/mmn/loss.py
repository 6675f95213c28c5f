"""MMN / RMMN's loss (Yang et al. Eqs. 8-10):

    L_bce = -1/C sum_i [y_i log p_i + (1 - y_i) log(1 - p_i)],  p_i = sigmoid(10 cos_iou),  over the C
            valid moments of the gold video, y_i its IoU with the gold moment scaled from
            [min_iou, max_iou] to [0, 1] (2D-TAN / MMN); with ``bce_on_negatives`` also over every
            moment of the query's negative videos, y = 0, pooled into one mean or (``balanced``) as a
            second mean beside the gold video's                                                  (Eq. 8)
    p*(m_b|q_b) = e^{(cos(q_b, m_b) - psi)/tau_q} / (e^{(cos(q_b, m_b) - psi)/tau_q} + sum_{m in I_q^-} e^{cos(q_b, m)/tau_q})
    p*(q_b|m_b) likewise over the negative queries I_m^- with tau_m
    L_rmm = -mean_b [log p*(m_b|q_b) + log p*(q_b|m_b)]                                          (Eq. 9)
    L = L_bce + lambda L_rmm                                                                      (Eq. 10)

m_b is the cell of the gold video with the highest IoU. I_q^- holds the moments of the query's
negative videos and the gold video's moments below ``neg_iou``; I_m^- the negative queries of the
batch (``MMNBatch.neg_query``). The paper sums over b; the mean keeps lambda independent of B.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from momentsearch.distributed import sharded
from momentsearch.models.mmn.batches import MMNBatch
from momentsearch.models.mmn.config import MMNConfig
from momentsearch.models.mmn.network import MMN


def iou_targets(iou: torch.Tensor, cfg: MMNConfig) -> torch.Tensor:
    return ((iou - cfg.min_iou) / (cfg.max_iou - cfg.min_iou)).clamp(0.0, 1.0)


def margin_nll(pos: torch.Tensor, neg: torch.Tensor, neg_mask: torch.Tensor, margin: float, tau: float) -> torch.Tensor:
    """-log p* of Eq. 9 per row: pos (B,) positive cosines, neg (B, K) cosines, neg_mask (B, K) bool."""
    logits = torch.cat([((pos - margin) / tau)[:, None], (neg / tau).masked_fill(~neg_mask, float("-inf"))], dim=1)
    return -logits.log_softmax(dim=1)[:, 0]


def mmn_loss(model: MMN, batch: MMNBatch) -> tuple[torch.Tensor, dict[str, float]]:
    cfg = model.cfg
    b = len(batch.query_ids)
    n = cfg.num_clips
    q = sharded(model.encode_queries, batch.tokens, batch.token_mask)  # (B + E, 2, d), rows split over ranks
    m = sharded(model.encode_videos, batch.streams, batch.clip_mask)  # (U, N, N, 2, d)
    valid = model.valid(q.device)  # (N, N)
    rows = torch.arange(b, device=q.device)
    cos = torch.einsum("bsd,uijsd->buijs", q[:b], m)  # (B, U, N, N, 2)
    own = cos[rows, batch.video_col]  # (B, N, N, 2)
    # Eq. 8 on the gold video (and, for RMMN, on the negative videos with target 0)
    y = iou_targets(batch.iou, cfg)
    bce_own = F.binary_cross_entropy_with_logits(cfg.iou_scale * own[..., 0], y, reduction="none")
    cells = valid.sum()
    if cfg.bce_on_negatives:  # the y = 0 term on every cell of the batch's videos, weighted to the negatives
        bce_all = F.binary_cross_entropy_with_logits(cfg.iou_scale * cos[..., 0], torch.zeros_like(cos[..., 0]),
                                                     reduction="none")  # (B, U, N, N)
        w = batch.neg_video.to(cos.dtype)[..., None, None] * valid
        if cfg.bce_negative_weighting == "balanced":  # each part its own mean: the gold video keeps half
            l_bce = (bce_own * valid).sum() / (cells * b) + (bce_all * w).sum() / (cells * batch.neg_video.sum()).clamp(min=1)
        else:
            l_bce = ((bce_own * valid).sum() + (bce_all * w).sum()) / (cells * (b + batch.neg_video.sum()))
    else:
        l_bce = (bce_own * valid).sum() / (cells * b)
    # Eq. 9, both directions, in the mutual-matching space
    best = batch.iou.reshape(b, -1).argmax(1)
    pos_cell = own[..., 1].reshape(b, -1)[rows, best]  # cos(q_b, m_b)
    in_video = (batch.iou < cfg.neg_iou) & valid  # (B, N, N)
    neg_m_mask = torch.cat([in_video.reshape(b, -1),
                            (batch.neg_video[..., None] & valid.reshape(1, 1, -1)).reshape(b, -1)], dim=1)
    neg_m = torch.cat([own[..., 1].reshape(b, -1), cos[..., 1].reshape(b, -1)], dim=1)
    l_qm = margin_nll(pos_cell, neg_m, neg_m_mask, cfg.margin, cfg.tau_q)
    m_pos = m[batch.video_col, ..., 1, :].reshape(b, n * n, -1)[rows, best]  # (B, d) the gold moments
    neg_q = m_pos @ q[:, 1].T  # (B, B + E)
    l_mq = margin_nll(pos_cell, neg_q, batch.neg_query, cfg.margin, cfg.tau_m)
    l_rmm = (l_qm + l_mq).mean()
    loss = l_bce + cfg.lambda_rmm * l_rmm
    with torch.no_grad():
        stats = {"loss": loss.item(), "loss_bce": l_bce.item(), "loss_rmm": l_rmm.item(),
                 "neg_videos_per_query": batch.neg_video.sum(1).float().mean().item(),
                 "neg_queries_per_moment": batch.neg_query.sum(1).float().mean().item()}
    return loss, stats
