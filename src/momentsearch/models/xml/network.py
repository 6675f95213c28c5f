"""XML, Cross-modal Moment Localization (Lei et al., 2020), as Sec. 3.2 of
``potentially-relevant-pairs-vcmr.txt`` describes it.

Query: token features E^q (l_q, D_q) -> linear + positional encoding -> one encoder layer ->
modular (learned attention) pooling into one query vector q_s per video stream s.

Video: clip features E^v (l_v, D_v) per stream -> linear + positional encoding -> self-attention
(-> cross-attention between the visual and subtitle streams when both exist) -> H^{v,1}
(retrieval); one more encoder layer -> H^{v,2} (localization). d = 256. An encoder layer is, as in
Lei et al.'s code, self-attention + dense + LayerNorm (``encoder_layer: attention``), or a full
Transformer layer with a d-wide feed-forward block (``transformer``, the default before issue 23).

    s_vr(v | q)          = mean_s max_t cos(q_s, H^{v,1}_{s,t})                         (Eq. 1)
    o_st, o_ed           = Conv1D_st/ed( mean_s <W_s q_s, H^{v,2}_{s,t}> )  (logits along t; W_s a
                           per-stream linear map, so localization has its own view of the query)
    s_tl(t_st, t_ed)     = P_st(t_st) P_ed(t_ed),  P = softmax(o)                       (Eq. 2)
    s_vcmr(v, t_st, t_ed) = s_tl * exp(alpha * s_vr)                                     (Eq. 3)
    n_min <= t_ed - t_st + 1 <= n_max clips                                              (Eq. 4)

Streams are averaged with equal weight, and weights start as BERT's (normal, std 0.02), as XML's
reference implementation does.
Shapes: B queries, L tokens, V videos, S streams, T clips, d hidden.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from momentsearch.models.dropout import multihead_attention
from momentsearch.models.layers import (
    NEG_INF,
    AttentionLayer,
    LinearLayer,
    MultiHeadAttention,
    PositionalEncoding,
    bert_init,
    check_input_dims,
    length_band,
    modular_pooling,
    transformer_layer,
)
from momentsearch.models.xml.config import XMLConfig

__all__ = ["NEG_INF", "XML", "CrossAttention", "LinearLayer", "PositionalEncoding", "encoder_layer", "transformer_layer"]

class CrossAttention(nn.Module):
    """x attends to y (padding of y masked), with a residual connection and LayerNorm. Lei et al.'s
    code has no output projection here (``projection=False``); ``nn.MultiheadAttention`` has one."""

    def __init__(self, d: int, heads: int, dropout: float, projection: bool = True):
        super().__init__()
        self.att: nn.Module = (nn.MultiheadAttention(d, heads, dropout=dropout, batch_first=True) if projection
                               else MultiHeadAttention(d, heads, dropout, output=False))
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor, y: torch.Tensor, y_pad: torch.Tensor) -> torch.Tensor:
        if isinstance(self.att, nn.MultiheadAttention):
            out = multihead_attention(self.att, x, y, key_padding_mask=y_pad)
        else:
            out = self.att(x, y, y_pad)
        return self.norm(x + out)


def encoder_layer(cfg: XMLConfig) -> nn.Module:
    """One encoder layer as ``cfg.encoder_layer`` names it (see :class:`XMLConfig`)."""
    if cfg.encoder_layer == "attention":
        return AttentionLayer(cfg.hidden, cfg.n_heads, cfg.dropout)
    return transformer_layer(cfg.hidden, cfg.n_heads, cfg.dropout)


class XML(nn.Module):
    def __init__(self, cfg: XMLConfig):
        super().__init__()
        check_input_dims(cfg)
        self.cfg = cfg
        d, p = cfg.hidden, cfg.dropout
        self.query_input = LinearLayer(cfg.query_dim, d, p)
        self.query_pos = PositionalEncoding(cfg.max_tokens, d, p)
        self.query_encoder = encoder_layer(cfg)
        self.modular = nn.Linear(d, cfg.n_streams)  # one attention-pooling head per stream
        dims = [cfg.visual_dim] + ([cfg.subtitle_dim] if cfg.n_streams == 2 else [])
        self.video_input = nn.ModuleList(LinearLayer(dv, d, p) for dv in dims)
        self.video_pos = nn.ModuleList(PositionalEncoding(cfg.max_clips, d, p) for _ in dims)
        self.video_encoder1 = nn.ModuleList(encoder_layer(cfg) for _ in dims)
        projection = cfg.encoder_layer == "transformer"
        self.cross = (nn.ModuleList(CrossAttention(d, cfg.n_heads, p, projection) for _ in dims)
                      if cfg.n_streams == 2 else None)
        self.video_encoder2 = nn.ModuleList(encoder_layer(cfg) for _ in dims)
        self.query_linear = nn.ModuleList(nn.Linear(d, d) for _ in dims)  # W_s: the localization query
        k = cfg.conv_kernel
        self.conv_st = nn.Conv1d(1, 1, k, padding=k // 2, bias=False)
        self.conv_ed = nn.Conv1d(1, 1, k, padding=k // 2, bias=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bert_init(self, self.cfg.init_std)

    # ---- encoders -----------------------------------------------------------------------------
    def encode_queries(self, tokens: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
        """tokens (B, L, D_q), token_mask (B, L) bool (True = real) -> q (B, S, d)."""
        x = self.query_pos(self.query_input(tokens))
        x = self.query_encoder(x, src_key_padding_mask=~token_mask)
        return modular_pooling(self.modular(x), x, token_mask)

    def encode_videos(
        self, streams: list[torch.Tensor], clip_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """streams: [(V, T, D_s)] per stream, clip_mask (V, T) bool -> H1, H2 each (V, S, T, d)."""
        if len(streams) != self.cfg.n_streams:
            raise ValueError(f"model expects {self.cfg.n_streams} stream(s), got {len(streams)}")
        pad = ~clip_mask
        hs = [
            enc(pos(inp(x)), src_key_padding_mask=pad)
            for x, inp, pos, enc in zip(streams, self.video_input, self.video_pos, self.video_encoder1, strict=True)
        ]
        if self.cross is not None:
            hs = [self.cross[0](hs[0], hs[1], pad), self.cross[1](hs[1], hs[0], pad)]
        h1 = torch.stack(hs, dim=1)
        h2 = torch.stack(
            [enc(h, src_key_padding_mask=pad) for h, enc in zip(hs, self.video_encoder2, strict=True)], dim=1
        )
        return h1, h2

    # ---- scores -------------------------------------------------------------------------------
    @staticmethod
    def video_scores(q: torch.Tensor, h1: torch.Tensor, clip_mask: torch.Tensor) -> torch.Tensor:
        """Eq. 1 for every (query, video): q (B, S, d), h1 (V, S, T, d) -> s_vr (B, V) in [-1, 1]."""
        cos = torch.einsum("bsd,vstd->bvst", F.normalize(q, dim=-1), F.normalize(h1, dim=-1))
        cos = cos.masked_fill(~clip_mask[None, :, None, :], NEG_INF)
        return cos.max(dim=-1).values.mean(dim=-1)

    def localizing_queries(self, q: torch.Tensor) -> torch.Tensor:
        """q (N, S, d) -> the per-stream linear maps of Eq. 2's query side, (N, S, d)."""
        return torch.stack([lin(q[:, i]) for i, lin in enumerate(self.query_linear)], dim=1)

    def st_ed_logits(
        self, q: torch.Tensor, h2: torch.Tensor, clip_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Paired: q (N, S, d), h2 (N, S, T, d), clip_mask (N, T) -> o_st, o_ed (N, T); padding -1e10."""
        ql = self.localizing_queries(q)
        return self.conv_logits(torch.einsum("nsd,nstd->nt", ql, h2) / q.shape[1], clip_mask)

    def st_ed_logits_all(
        self, q: torch.Tensor, h2: torch.Tensor, clip_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Every (query, video): q (B, S, d), h2 (U, S, T, d), clip_mask (U, T) -> o_st, o_ed (B, U, T)."""
        ql = self.localizing_queries(q)
        b, u, t = q.shape[0], h2.shape[0], h2.shape[2]
        sim = torch.einsum("bsd,ustd->but", ql, h2).reshape(b * u, t) / q.shape[1]
        o_st, o_ed = self.conv_logits(sim, clip_mask.repeat(b, 1))
        return o_st.reshape(b, u, t), o_ed.reshape(b, u, t)

    def conv_logits(self, sim: torch.Tensor, clip_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Eq. 2's convolutions over (N, T) query-clip similarities -> o_st, o_ed (N, T); padding -1e10."""
        sim = sim.masked_fill(~clip_mask, 0.0)  # padding must not reach real clips through the convolution
        o_st = self.conv_st(sim[:, None]).squeeze(1).masked_fill(~clip_mask, NEG_INF)
        o_ed = self.conv_ed(sim[:, None]).squeeze(1).masked_fill(~clip_mask, NEG_INF)
        return o_st, o_ed

    def moment_scores(self, o_st: torch.Tensor, o_ed: torch.Tensor) -> torch.Tensor:
        """Eqs. 2 and 4: (N, T) logits -> (N, T, T) s_tl[st, ed] = P_st(st) P_ed(ed), 0 off the band."""
        p_st, p_ed = o_st.softmax(-1), o_ed.softmax(-1)
        band = length_band(o_st.shape[-1], self.cfg.n_min, self.cfg.n_max, o_st.device)
        return p_st[:, :, None] * p_ed[:, None, :] * band

    def vcmr_scores(self, s_tl: torch.Tensor, s_vr: torch.Tensor) -> torch.Tensor:
        """Eq. 3: s_tl (N, T, T), s_vr (N,) -> s_vcmr (N, T, T)."""
        return s_tl * torch.exp(self.cfg.alpha * s_vr)[:, None, None]
