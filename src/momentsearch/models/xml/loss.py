"""The training objective of one batch: XML's, or with many-to-many relevance (Eq. 9).

    L = L_vr + lambda_tl L_tl + lambda_vcmr L_vcmr                                   (Eq. 9)
    L_vr = L_pos>neg + lambda_rel>neg L_rel>neg + lambda_pos>=rel L_pos>=rel   on s_vr     (Eq. 13)
    L_tl = L_nll,1 + lambda_tl,2 L_nll,2                                             (Eq. 18)
    L_vcmr = the same three ranking terms on R_vcmr                                  (Eq. 15)

With ``relevance.method: threshold`` L_vr is Wray et al.'s thresholded triplet loss instead. Every
negative is drawn from the items that are neither the positive's video nor potentially relevant.
With the default config this is exactly XML's loss (and draws the same random numbers).

**Video-level bookkeeping** (issue 42). A batch holds several moments of one video (``queries_per_video``),
and s_vr is defined per video: every column of a video carries the same score. So for L_vr a column is a
negative of query i only when its *video* holds neither i's own moment nor any moment potentially relevant
to i (or with S >= T, for thresholds), and a video holding positives of i counts once as a positive
(:func:`per_video`). L_vcmr scores moments, so its bookkeeping stays per column. Families touched: XML
(+PR, +SL, thresholds); MINUTE's InfoNCE excludes the query's own video already and takes no pairs.

**From the whole table** (issue 75, ``relevance.exclusion: table``, the default): a video is no negative of
query i in the video-level terms when it holds any moment paired with i anywhere in the split, whether that
moment is in the batch or not (``Batch.partner_videos``). Before, only the batch's own pairs kept a video out,
so a partner outside the batch left its video a negative of i (``exclusion: batch`` does that still). The
threshold method's positives stay the batch's pairs (a positive needs its moment); the segment-level terms
score moments, so their bookkeeping stays per column.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from momentsearch.distributed import sharded
from momentsearch.losses import hinge_ranking_loss, sample_negatives, start_end_nll
from momentsearch.losses.multilevel import (
    pair_nll_loss,
    pos_rel_loss,
    rel_neg_loss,
    segment_scores,
    threshold_triplet_loss,
)
from momentsearch.models.xml.batches import Batch
from momentsearch.models.xml.config import XMLConfig
from momentsearch.models.xml.network import XML


def _confidence(batch: Batch, cfg: XMLConfig) -> torch.Tensor:
    """C of the batch's pairs: Psi from the table, or 1 for every pair (the C == 1 ablation)."""
    assert batch.pairs is not None and batch.conf is not None
    return batch.pairs.float() if cfg.relevance.confidence_one else batch.conf


def per_video(mask: torch.Tensor, video_col: torch.Tensor) -> torch.Tensor:
    """A (B, B) column mask -> True at (i, j) when column j's video holds a True column of row i (for scores
    defined per video, the columns of one video are one item)."""
    same = video_col[:, None] == video_col[None, :]
    return (mask.float() @ same.float()) > 0


def first_columns(video_col: torch.Tensor) -> torch.Tensor:
    """(B,) True at the first column of each video in the batch."""
    same = video_col[:, None] == video_col[None, :]
    return same.float().argmax(dim=0) == torch.arange(len(video_col), device=video_col.device)


def _ranking(scores: torch.Tensor, batch: Batch, cfg: XMLConfig, pool: int | None, gen: torch.Generator,
             lam_rel_neg: float, lam_pos_rel: float, to_unit: Callable[[torch.Tensor], torch.Tensor],
             video_level: bool = False) -> tuple[torch.Tensor, dict[str, float]]:
    """L_pos>neg (+ the pair terms): Eq. 13 on s_vr or Eq. 15 on R_vcmr. ``to_unit`` maps the
    scores into [0, 1] for the pair terms when ``relevance.pair_score`` is ``unit``; ``video_level``: the scores
    are per video (s_vr), so negatives and threshold positives are kept per video (module docstring)."""
    rc = cfg.relevance
    pairs = batch.pairs
    held = None if pairs is None else (per_video(pairs, batch.video_col) if video_level else pairs)
    exclude = batch.same_video if held is None else batch.same_video | held
    reach: dict[str, float] = {}
    if video_level and batch.partner_videos is not None:  # what the table adds to the batch's own pairs
        only_table = batch.partner_videos & ~exclude
        reach = {"partner columns": float(batch.partner_videos.sum()), "outside-batch partner columns":
                 float(only_table.sum())}
        if rc.exclusion == "table":
            exclude = exclude | batch.partner_videos  # a partner's video is no negative, in the batch or not
    neg_v, neg_q = sample_negatives(scores, exclude, pool, gen)
    if rc.method == "threshold":
        assert pairs is not None and held is not None
        eye = torch.eye(len(scores), dtype=torch.bool, device=scores.device)
        positive = eye | (held & first_columns(batch.video_col)[None, :] & ~batch.same_video if video_level
                          else pairs)
        loss = threshold_triplet_loss(scores, positive, neg_v, neg_q, cfg.margin)
        return loss, {"pos>neg": loss.item(), **reach}
    loss = hinge_ranking_loss(scores, neg_v, neg_q, cfg.margin)
    parts = {"pos>neg": loss.item(), **reach}
    if rc.method == "pairs":
        assert pairs is not None
        conf = _confidence(batch, cfg)
        r = to_unit(scores) if rc.pair_score == "unit" else scores
        rn = rel_neg_loss(r, pairs, conf, neg_v, neg_q, cfg.margin, rc.pair_mean)  # type: ignore[arg-type]
        pr = pos_rel_loss(r, pairs, conf, rc.pair_mean)  # type: ignore[arg-type]
        loss = loss + lam_rel_neg * rn + lam_pos_rel * pr
        parts |= {"rel>neg": rn.item(), "pos>=rel": pr.item()}
    return loss, parts


def batch_loss(model: XML, batch: Batch, cfg: XMLConfig, pool: int | None,
               generator: torch.Generator) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss of one batch and its named terms; ``pool`` None draws random in-batch negatives,
    k draws from the k highest-scoring ones (XML's hard negatives)."""
    rc = cfg.relevance
    # each encoder on this rank's rows, gathered: the loss sees the whole (global) batch on every rank
    q = sharded(model.encode_queries, batch.tokens, batch.token_mask)
    h1, h2 = sharded(model.encode_videos, batch.streams, batch.clip_mask)  # the U distinct videos
    s_vr = sharded(lambda qs: model.video_scores(qs, h1, batch.clip_mask), q)[:, batch.video_col]  # (B, B)
    l_vr, vr_parts = _ranking(s_vr, batch, cfg, pool, generator, rc.lambda_rel_neg_vr, rc.lambda_pos_rel_vr,
                              lambda s: (1 + s) / 2, video_level=True)
    stats = {f"vr {k}": v for k, v in vr_parts.items()}
    with_pairs = rc.method == "pairs" and batch.pairs is not None
    every_pair = rc.lambda_vcmr > 0 or (with_pairs and rc.lambda_tl2 > 0)
    if every_pair:  # logits of every query on every distinct video of the batch
        o_st_all, o_ed_all = sharded(lambda qs: model.st_ed_logits_all(qs, h2, batch.clip_mask), q)
        ar = torch.arange(len(batch.video_col), device=batch.video_col.device)
        o_st, o_ed = o_st_all[ar, batch.video_col], o_ed_all[ar, batch.video_col]
    else:
        o_st, o_ed = sharded(model.st_ed_logits, q, h2[batch.video_col], batch.clip_mask[batch.video_col])
    l_tl = start_end_nll(o_st, o_ed, batch.st, batch.ed)
    stats["nll1"] = l_tl.item()
    if with_pairs and rc.lambda_tl2 > 0:
        assert batch.pairs is not None
        nll2 = pair_nll_loss(o_st_all, o_ed_all, batch.video_col, batch.st, batch.ed, batch.pairs,
                             _confidence(batch, cfg), rc.pair_mean)  # type: ignore[arg-type]
        l_tl = l_tl + rc.lambda_tl2 * nll2
        stats["nll2"] = nll2.item()
    loss = l_vr + cfg.lambda_tl * l_tl
    if rc.lambda_vcmr > 0:
        r_vcmr = segment_scores(o_st_all, o_ed_all, batch.clip_mask, batch.video_col, batch.st, batch.ed, s_vr,
                                cfg.alpha, rc.floor, rc.floor_mode)  # type: ignore[arg-type]
        r_vcmr = r_vcmr * rc.segment_scale
        l_vcmr, seg_parts = _ranking(r_vcmr, batch, cfg, pool, generator, rc.lambda_rel_neg_vcmr,
                                     rc.lambda_pos_rel_vcmr, torch.sigmoid)
        loss = loss + rc.lambda_vcmr * l_vcmr
        stats |= {f"vcmr {k}": v for k, v in seg_parts.items()} | {"loss_vcmr": l_vcmr.item()}
    n_pairs = float(batch.pairs.sum()) if batch.pairs is not None else 0.0
    return loss, {"loss": loss.item(), "loss_vr": l_vr.item(), "loss_tl": l_tl.item(), "pairs_per_batch": n_pairs,
                  **stats}
