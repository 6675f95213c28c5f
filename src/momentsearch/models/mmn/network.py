"""MMN / RMMN's network (Yang et al. Sec. 5.3, after Wang et al. 2022 and 2D-TAN): a bi-encoder whose
video side is a 2D temporal map of every moment, matched to the query by cosine in two joint spaces.

Video: the clips (visual, subtitle concatenated when present) are average-pooled into N segments
(MMN samples N clips with stride l_c / (k N)), an FC (1-D conv, kernel 1) + ReLU gives f_i (hidden);
the 2D map holds F[i, j] = max(f_i .. f_j) for i <= j (max-pooling aggregation), then L 2D
convolutions (kernel k, ReLU, invalid cells zeroed) give F'. Layer norm, then a 1x1 convolution per
space (a linear map of the channels) projects F' into the IoU space and the mutual-matching space.

Query: token features -> linear -> Transformer layer(s) -> global average pooling over tokens ->
layer norm -> one linear projection per space. (The paper fine-tunes DistilBERT; here the token
features of the text layer are the input, as for every family.)

    s_iou = cos(f_q^iou, f_m^iou),  p_iou = sigmoid(10 s_iou)                         (Eq. 8)
    s_rmm = cos(f_q^rmm, f_m^rmm)                                                       (Eq. 9)
    s = p_iou * ((1 + s_rmm) / 2) ** score_pow                                          (Eq. 10)

Eq. 10 writes s = s_iou * s_rmm; the product of two cosines ranks a pair of negative cosines high,
so both factors are mapped into [0, 1] as MMN's released inference does.
Shapes: B queries, L tokens, V videos, T clips, N sampled clips, C hidden, d joint dim.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from momentsearch.models.layers import (
    LinearLayer,
    PositionalEncoding,
    bert_init,
    check_input_dims,
    length_band,
    transformer_layer,
)
from momentsearch.models.mmn.config import MMNConfig


def segment_pool(x: torch.Tensor, mask: torch.Tensor, n: int) -> torch.Tensor:
    """x (V, T, D), mask (V, T) -> (V, N, D): each video's real clips cut into n equal segments, each
    averaged (a segment shorter than one clip takes the clip it falls in)."""
    lengths = mask.sum(1).clamp(min=1).to(x.dtype)  # (V,)
    k = torch.arange(n, device=x.device, dtype=x.dtype)
    lo = torch.floor(k[None] * lengths[:, None] / n)  # (V, N)
    hi = torch.maximum(torch.floor((k[None] + 1) * lengths[:, None] / n), lo + 1)
    t = torch.arange(x.shape[1], device=x.device, dtype=x.dtype)
    w = ((t[None, None] >= lo[..., None]) & (t[None, None] < hi[..., None])).to(x.dtype)  # (V, N, T)
    return (w @ x) / w.sum(-1, keepdim=True)


def moment_map(f: torch.Tensor, span: int) -> torch.Tensor:
    """f (V, C, N) -> (V, C, N, N): [i, j] = max(f_i .. f_j) for 0 <= j - i < span, 0 elsewhere."""
    v, c, n = f.shape
    out = f.new_zeros(v, c, n, n)
    idx = torch.arange(n, device=f.device)
    cur = f
    out[:, :, idx, idx] = f
    for o in range(1, span):
        cur = torch.maximum(cur[..., :-1], f[..., o:])
        out[:, :, idx[: n - o], idx[o:]] = cur
    return out


class MMN(nn.Module):
    def __init__(self, cfg: MMNConfig):
        super().__init__()
        check_input_dims(cfg)
        self.cfg = cfg
        c, d, p = cfg.hidden, cfg.joint_dim, cfg.dropout
        self.clip_fc = nn.Conv1d(cfg.visual_dim + cfg.subtitle_dim, c, 1)
        k, n_layers = cfg.kernel_size, cfg.conv_layers
        pads = ([(k - 1) * n_layers // 2] + [0] * (n_layers - 1)) if cfg.mask_renorm else [k // 2] * n_layers
        self.convs = nn.ModuleList(nn.Conv2d(c, c, k, padding=pad) for pad in pads)
        self.conv_norms = nn.ModuleList((nn.BatchNorm2d(c) if cfg.conv_norm == "batch" else nn.Identity())
                                        for _ in range(n_layers))
        self.video_norm = nn.LayerNorm(c)
        self.video_proj = nn.ModuleDict({"iou": nn.Linear(c, d), "rmm": nn.Linear(c, d)})  # 1x1 convolutions
        self.query_input = LinearLayer(cfg.query_dim, c, p)
        self.query_pos = PositionalEncoding(cfg.max_tokens, c, p)
        self.query_layers = nn.ModuleList(transformer_layer(c, cfg.n_heads, p) for _ in range(cfg.query_layers))
        self.query_norm = nn.LayerNorm(c)
        self.query_proj = nn.ModuleDict({"iou": nn.Linear(c, d), "rmm": nn.Linear(c, d)})
        bert_init(self, 0.02)
        for conv in [self.clip_fc, *self.convs]:  # convolutions keep PyTorch's (Kaiming) init, as MMN
            conv.reset_parameters()

    def valid(self, device: torch.device | None = None) -> torch.Tensor:
        """(N, N) bool: the cells that are moments (i <= j, at most ``span`` clips)."""
        return length_band(self.cfg.num_clips, 1, self.cfg.span, device)

    def encode_videos(self, streams: list[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
        """streams [(V, T, D_s)], mask (V, T) -> unit vectors (V, N, N, 2, d): [..., 0, :] the IoU
        space, [..., 1, :] the mutual-matching space; invalid cells are 0."""
        x = torch.cat(streams, dim=-1)
        if x.shape[-1] != self.clip_fc.in_channels:
            raise ValueError(f"model expects clip features of dim {self.clip_fc.in_channels} (visual + subtitle), "
                             f"got {x.shape[-1]}")
        if self.cfg.pool_after_fc:  # MMN's FeatAvgPool: conv1x1, ReLU, then the average
            f = segment_pool(F.relu(self.clip_fc(x.transpose(1, 2))).transpose(1, 2), mask, self.cfg.num_clips)
            f = f.transpose(1, 2)
        else:
            f = F.relu(self.clip_fc(segment_pool(x, mask, self.cfg.num_clips).transpose(1, 2)))  # (V, C, N)
        valid = self.valid(x.device).to(f.dtype)
        m = self.map_convs(moment_map(f, self.cfg.span), valid)
        h = self.video_norm(m.permute(0, 2, 3, 1))  # (V, N, N, C)
        out = torch.stack([F.normalize(self.video_proj[s](h), dim=-1) for s in ("iou", "rmm")], dim=3)
        return out * valid[None, :, :, None, None]

    def map_convs(self, m: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """The 2D convolutions over the moment map m (V, C, N, N); valid (N, N) as m's dtype."""
        if not self.cfg.mask_renorm:
            for conv, norm in zip(self.convs, self.conv_norms):
                m = F.relu(norm(conv(m))) * valid
            return m
        seen = valid[None, None]  # MMN: the mask grows by what each kernel reaches
        for conv, norm in zip(self.convs, self.conv_norms):
            m = F.relu(norm(conv(m)))
            count = torch.round(F.conv2d(seen, m.new_ones(1, 1, *conv.kernel_size), padding=conv.padding))
            m = m * torch.where(count > 0, 1.0 / count.clamp(min=1), 0.0)
            seen = (count > 0).to(m.dtype)
        return m

    def encode_queries(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """tokens (B, L, D_q), mask (B, L) -> unit vectors (B, 2, d) (IoU space, mutual-matching space)."""
        h = self.query_pos(self.query_input(tokens))
        for layer in self.query_layers:
            h = layer(h, src_key_padding_mask=~mask)
        w = mask[..., None].to(h.dtype)
        pooled = self.query_norm((h * w).sum(1) / w.sum(1).clamp(min=1))
        return torch.stack([F.normalize(self.query_proj[s](pooled), dim=-1) for s in ("iou", "rmm")], dim=1)

    def scores(self, q: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        """Eq. 10 for every (query, video, moment): q (B, 2, d), m (V, N, N, 2, d) -> s (B, V, N, N) in
        [0, 1], 0 at invalid cells."""
        cos = torch.einsum("bsd,vijsd->bvijs", q, m)
        s = torch.sigmoid(self.cfg.iou_scale * cos[..., 0]) * ((1 + cos[..., 1]) / 2).clamp(min=0) ** self.cfg.score_pow
        return s * self.valid(q.device)
