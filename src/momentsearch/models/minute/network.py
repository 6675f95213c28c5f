"""MINUTE, Multi-video raNking with mUltImodal cluE (Hou et al.), Sec. 4.2: a late-fusion video
retriever and an early-fusion moment localizer, each with its own query and video encoders.

Query encoder (both networks): token features -> linear + position -> one Transformer layer ->
token representations w, and modular pooling (Eq. 14) into one vector per video stream (q_I, q_s).

Video encoder (both networks): image and subtitle clips -> linear, + modality embedding ('ME') +
position embedding ('PE'), the two streams side by side through one multimodal Transformer layer
(intra- and inter-modal attention) -> I_j, s_j.

    S_R = (max_j q_I . I_j + max_j q_s . s_j) / 2                                          (Eq. 8)

Localizer: multimodal clue mining (MCM) weighs each clip per stream by the query,
    p_c^j = (W_c c^j) * q_c,   c^j <- norm(p_c^j) * c^j   (norm = L2 over the feature dim)   (Eqs. 15-16)
    f^j = FC([I^j; s^j])                                                                   (Eq. 17)
then a 3-layer multimodal Transformer (MMT) over [f^1..f^T; w^1..w^L] and two 1-D convolutions
over the clip outputs give the start and end logits l_st, l_ed (T,).

With one stream (no subtitles) S_R = max_j q_I . I_j and MCM weighs images only.
Shapes: B queries, L tokens, V videos, S streams, T clips, N (query, video) pairs, d hidden.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from momentsearch.models.layers import (
    NEG_INF,
    LinearLayer,
    PositionalEncoding,
    bert_init,
    check_input_dims,
    length_band,
    modular_pooling,
    transformer_layer,
)
from momentsearch.models.minute.config import MINUTEConfig


def by_length(fn: Callable[[torch.Tensor, int], torch.Tensor], mask: torch.Tensor, passes: int, fill: float,
              dim: int) -> torch.Tensor:
    """``fn(rows, t)`` over the rows of ``mask`` (N, T) in ``passes`` passes of about equal size, shortest first,
    each cut to its own longest row t (dimension ``dim`` of fn's output); the outputs padded back to T with
    ``fill`` and put back in row order. Padding is masked out wherever it is read, so each row's values are those
    of one pass of every row padded to T, less the arithmetic on padding (the converge preset's videos hold
    10-75 clips, median 31)."""
    n, t_all = mask.shape
    lengths = mask.sum(1)
    order = torch.argsort(lengths, stable=True)
    outs = []
    for rows in order.chunk(passes):
        t = max(1, int(lengths[rows[-1]]))
        o = fn(rows, t)
        if t < t_all:
            pad = list(o.shape)
            pad[dim] = t_all - t
            o = torch.cat([o, o.new_full(pad, fill)], dim=dim)
        outs.append(o)
    return torch.cat(outs)[torch.argsort(order)]


class QueryEncoder(nn.Module):
    def __init__(self, cfg: MINUTEConfig):
        super().__init__()
        d, p = cfg.hidden, cfg.dropout
        self.input = LinearLayer(cfg.query_dim, d, p)
        self.pos = PositionalEncoding(cfg.max_tokens, d, p)
        self.layer = transformer_layer(d, cfg.n_heads, p)
        self.modular = nn.Linear(d, cfg.n_streams)  # W_c of Eq. 14, one per stream

    def forward(self, tokens: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """tokens (B, L, D_q), mask (B, L) True = real -> w (B, L, d), q (B, S, d)."""
        w = self.layer(self.pos(self.input(tokens)), src_key_padding_mask=~mask)
        return w, modular_pooling(self.modular(w), w, mask)


class VideoEncoder(nn.Module):
    def __init__(self, cfg: MINUTEConfig):
        super().__init__()
        d, p = cfg.hidden, cfg.dropout
        dims = [cfg.visual_dim] + ([cfg.subtitle_dim] if cfg.n_streams == 2 else [])
        self.input = nn.ModuleList(LinearLayer(dv, d, p) for dv in dims)
        self.modality = nn.Embedding(len(dims), d)  # ME
        self.pos = PositionalEncoding(cfg.max_clips, d, p)  # PE (+ LayerNorm, dropout)
        self.layer = transformer_layer(d, cfg.n_heads, p)
        self.passes = cfg.length_passes

    def forward(self, streams: list[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
        """streams [(V, T, D_s)], mask (V, T) -> (V, S, T, d) (zeros past each pass's longest video)."""
        if len(streams) != len(self.input):
            raise ValueError(f"model expects {len(self.input)} stream(s), got {len(streams)}")
        if self.passes <= 1:
            return self._forward(streams, mask)
        return by_length(lambda rows, t: self._forward([s[rows, :t] for s in streams], mask[rows, :t]), mask,
                         self.passes, 0.0, 2)

    def _forward(self, streams: list[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
        x = [self.pos(inp(s) + self.modality.weight[i]) for i, (s, inp) in enumerate(zip(streams, self.input, strict=True))]
        v, t = mask.shape
        h = self.layer(torch.cat(x, dim=1), src_key_padding_mask=~mask.repeat(1, len(x)))
        return h.reshape(v, len(x), t, -1)


class Retriever(nn.Module):
    """Sec. 4.2.1: late fusion; video representations can be indexed offline."""

    def __init__(self, cfg: MINUTEConfig):
        super().__init__()
        self.query = QueryEncoder(cfg)
        self.video = VideoEncoder(cfg)

    def encode_queries(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.query(tokens, mask)[1]

    def encode_videos(self, streams: list[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
        return self.video(streams, mask)

    @staticmethod
    def video_scores(q: torch.Tensor, c: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """Eq. 8 for every (query, video): q (B, S, d), c (V, S, T, d), mask (V, T) -> S_R (B, V)."""
        sim = torch.einsum("bsd,vstd->bvst", q, c).masked_fill(~mask[None, :, None, :], NEG_INF)
        return sim.max(dim=-1).values.mean(dim=-1)


class Localizer(nn.Module):
    """Sec. 4.2.2: early fusion of one query with one video per pair."""

    def __init__(self, cfg: MINUTEConfig):
        super().__init__()
        d, p, k = cfg.hidden, cfg.dropout, cfg.conv_kernel
        self.cfg = cfg
        self.query = QueryEncoder(cfg)
        self.video = VideoEncoder(cfg)
        self.clue = nn.ModuleList(nn.Linear(d, d) for _ in range(cfg.n_streams)) if cfg.use_mcm else None  # W_c, Eq. 15
        self.fuse = nn.Linear(cfg.n_streams * d, d)  # Eq. 17
        self.segment = nn.Embedding(2, d) if cfg.use_mmt else None  # clip vs query token in the MMT
        self.mmt = nn.ModuleList(transformer_layer(d, cfg.n_heads, p) for _ in range(cfg.localizer_layers)) \
            if cfg.use_mmt else None
        self.conv_st = nn.Conv1d(d, 1, k, padding=k // 2)
        self.conv_ed = nn.Conv1d(d, 1, k, padding=k // 2)

    def clues(self, q: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """MCM, Eqs. 15-17: q (N, S, d) clue queries, c (N, S, T, d) clips -> fused clips (N, T, d)."""
        if self.clue is not None:
            p = torch.stack([lin(c[:, i]) for i, lin in enumerate(self.clue)], dim=1) * q[:, :, None]
            c = nn.functional.normalize(p, dim=-1) * c
        elif self.cfg.mcm_scale_control:  # MCM's weights have unit norm: elements of RMS 1/sqrt(d)
            c = c / math.sqrt(c.shape[-1])
        n, s, t, d = c.shape
        return self.fuse(c.permute(0, 2, 1, 3).reshape(n, t, s * d))

    def logits(self, w: torch.Tensor, w_mask: torch.Tensor, q: torch.Tensor, c: torch.Tensor,
               c_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Paired: tokens w (N, L, d), w_mask (N, L), clue queries q (N, S, d), clips c (N, S, T, d),
        c_mask (N, T) -> l_st, l_ed (N, T), NEG_INF at padding."""
        if self.cfg.length_passes <= 1:
            return self._logits(w, w_mask, q, c, c_mask)
        both = by_length(lambda rows, t: torch.stack(self._logits(w[rows], w_mask[rows], q[rows], c[rows, :, :t],
                                                                  c_mask[rows, :t]), dim=-1),
                         c_mask, self.cfg.length_passes, NEG_INF, 1)  # (N, T, 2)
        return both[..., 0], both[..., 1]

    def _logits(self, w: torch.Tensor, w_mask: torch.Tensor, q: torch.Tensor, c: torch.Tensor,
                c_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f = self.clues(q, c)
        t = f.shape[1]
        if self.mmt is not None:
            assert self.segment is not None
            x = torch.cat([f + self.segment.weight[0], w + self.segment.weight[1]], dim=1)
            pad = ~torch.cat([c_mask, w_mask], dim=1)
            for layer in self.mmt:
                x = layer(x, src_key_padding_mask=pad)
            f = x[:, :t]
        f = f.masked_fill(~c_mask[..., None], 0.0).transpose(1, 2)  # padding must not reach real clips
        l_st = self.conv_st(f).squeeze(1).masked_fill(~c_mask, NEG_INF)
        l_ed = self.conv_ed(f).squeeze(1).masked_fill(~c_mask, NEG_INF)
        return l_st, l_ed


class MINUTE(nn.Module):
    """The two networks of one model; the family trains them in turn (retriever, then localizer)."""

    def __init__(self, cfg: MINUTEConfig):
        super().__init__()
        check_input_dims(cfg)
        self.cfg = cfg
        self.retriever = Retriever(cfg)
        bert_init(self.retriever, cfg.init_std)  # before the localizer draws: its ablations leave the retriever as is
        self.localizer = Localizer(cfg)
        bert_init(self.localizer, cfg.init_std)

    def moment_band(self, t: int, device: torch.device) -> torch.Tensor:
        """(T, T) bool: n_min <= ed - st + 1 <= n_max clips (the moment-length limits of Sec. 5.3)."""
        return length_band(t, self.cfg.n_min, self.cfg.n_max, device)
