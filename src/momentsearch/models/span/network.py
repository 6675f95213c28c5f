"""CET and BET (Yang et al. App. D). Shapes: B pairs or queries, T clips, L tokens, d hidden.

CET:  H̄^v = H^v W^v, H̄^q = H^q W^q                                                   (Eq. 11)
      H^{v,q} = TransformerEnc(H̄^v ⊕ H̄^q)                                              (Eq. 12)
      p^s = sigmoid(MLP_s(H^{v,q}_{1:l_v})),  p^e = sigmoid(MLP_e(H^{v,q}_{1:l_v}))      (Eq. 13)
BET:  H̃^v = TransformerEnc(H̄^v)                                                        (Eq. 17)
      H̃^s = MLP_s(Pool(H̄^q)),  H̃^e = MLP_e(Pool(H̄^q))                                  (Eq. 18)
      p^s = sigmoid(r cos(H̃^v, H̃^s)),  p^e = sigmoid(r cos(H̃^v, H̃^e))                  (Eq. 19)

The Transformers add learned position embeddings, and CET a modality embedding for clip vs token
(the paper leaves both unsaid; without them a Transformer cannot tell clip order or side).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from momentsearch.models.layers import bert_init, check_input_dims, transformer_layer
from momentsearch.models.span.config import SpanConfig


def mlp(d: int, layers: int, out: int) -> nn.Sequential:
    mods: list[nn.Module] = []
    for _ in range(layers - 1):
        mods += [nn.Linear(d, d), nn.ReLU()]
    return nn.Sequential(*mods, nn.Linear(d, out))


class SpanNet(nn.Module):
    def __init__(self, cfg: SpanConfig):
        super().__init__()
        check_input_dims(cfg)
        self.cfg = cfg
        d = cfg.hidden
        self.w_v = nn.Linear(cfg.visual_dim + cfg.subtitle_dim, d)  # W^v
        self.w_q = nn.Linear(cfg.query_dim, d)  # W^q
        n_pos = cfg.max_clips + (cfg.max_tokens if cfg.name == "cet" else 0)
        self.pos = nn.Embedding(n_pos, d)
        self.modality = nn.Embedding(2, d)
        self.norm = nn.LayerNorm(d)
        self.encoder = nn.ModuleList(transformer_layer(d, cfg.n_heads, cfg.dropout) for _ in range(cfg.layers))
        out = 1 if cfg.name == "cet" else d
        self.mlp_s, self.mlp_e = mlp(d, cfg.mlp_layers, out), mlp(d, cfg.mlp_layers, out)
        bert_init(self, 0.02)

    def _clips(self, streams: list[torch.Tensor]) -> torch.Tensor:
        x = torch.cat(streams, dim=-1)
        if x.shape[-1] != self.w_v.in_features:
            raise ValueError(f"model expects clip features of dim {self.w_v.in_features} (visual + subtitle), "
                             f"got {x.shape[-1]}")
        if x.shape[1] > self.cfg.max_clips:
            raise ValueError(f"{x.shape[1]} clips exceed the model's max_clips={self.cfg.max_clips}")
        return self.w_v(x)

    def _encode(self, x: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        x = self.norm(x + self.pos.weight[: x.shape[1]])
        for layer in self.encoder:
            x = layer(x, src_key_padding_mask=pad)
        return x

    # CET ------------------------------------------------------------------------------------
    def cross_logits(self, streams: list[torch.Tensor], clip_mask: torch.Tensor, tokens: torch.Tensor,
                     token_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Paired: clips (B, T, .), tokens (B, L, D_q) -> start, end logits (B, T)."""
        v = self._clips(streams) + self.modality.weight[0]
        q = self.w_q(tokens) + self.modality.weight[1]
        t = v.shape[1]
        h = self._encode(torch.cat([v, q], dim=1), ~torch.cat([clip_mask, token_mask], dim=1))[:, :t]
        return self.mlp_s(h).squeeze(-1), self.mlp_e(h).squeeze(-1)

    # BET ------------------------------------------------------------------------------------
    def encode_clips(self, streams: list[torch.Tensor], clip_mask: torch.Tensor) -> torch.Tensor:
        """(V, T, .) -> unit clip vectors H̃^v (V, T, d)."""
        return F.normalize(self._encode(self._clips(streams), ~clip_mask), dim=-1)

    def encode_queries(self, tokens: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
        """(B, L, D_q) -> unit start and end vectors (B, 2, d)."""
        w = token_mask[..., None].to(tokens.dtype)
        pooled = (self.w_q(tokens) * w).sum(1) / w.sum(1).clamp(min=1)  # Pool(H̄^q)
        return F.normalize(torch.stack([self.mlp_s(pooled), self.mlp_e(pooled)], dim=1), dim=-1)

    def bi_logits(self, q: torch.Tensor, clips: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Paired: q (B, 2, d), clips (B, T, d) -> r cos, the start and end logits (B, T)."""
        cos = torch.einsum("bsd,btd->bst", q, clips) * self.cfg.cos_scale
        return cos[:, 0], cos[:, 1]

    def pair_logits(self, streams: list[torch.Tensor], clip_mask: torch.Tensor, tokens: torch.Tensor,
                    token_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.cfg.name == "cet":
            return self.cross_logits(streams, clip_mask, tokens, token_mask)
        return self.bi_logits(self.encode_queries(tokens, token_mask), self.encode_clips(streams, clip_mask))
