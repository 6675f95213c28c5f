"""The MVMR paper's two span-prediction baselines (Yang et al. App. D), as two model families:

* ``cet``: a cross-encoder Transformer over the concatenated clip and query token features
  (Eqs. 11-13), reading one (query, video) pair at a time;
* ``bet``: a bi-encoder, a Transformer over the clips and a pooled query mapped to a start and an
  end vector, matched to every clip by a scaled cosine (Eqs. 17-19).

Both predict per-clip start and end probabilities, trained with BCE against interpolated labels
(Eqs. 14-16) on each query's own video; a moment (st, ed) scores p^s_st * p^e_ed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class SpanConfig:
    name: str = "cet"  # cet | bet
    visual_dim: int = 0
    subtitle_dim: int = 0  # a subtitle stream, when the data has one, is concatenated to the visual clips
    query_dim: int = 384
    hidden: int = 512  # d
    layers: int = 6  # Transformer layers (over the pair for CET, over the clips for BET)
    n_heads: int = 8
    mlp_layers: int = 3  # MLP_s and MLP_e
    dropout: float = 0.1
    max_clips: int = 128
    max_tokens: int = 32
    label_power: float = 10.0  # k of Eq. 14
    cos_scale: float = 10.0  # r of Eq. 19 (BET)
    n_min: int = 1  # moment length limits at search, in clips
    n_max: int = 24
    weight_decay: float = 0.01

    def __post_init__(self) -> None:
        if self.name not in ("cet", "bet"):
            raise ValueError(f"name must be cet or bet, got {self.name!r}")
        if self.hidden % self.n_heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of n_heads ({self.n_heads})")
        if self.layers < 1 or self.mlp_layers < 1:
            raise ValueError("layers and mlp_layers must be >= 1")
        if not 1 <= self.n_min <= self.n_max:
            raise ValueError(f"need 1 <= n_min ({self.n_min}) <= n_max ({self.n_max})")
        if self.label_power <= 0 or self.cos_scale <= 0:
            raise ValueError("label_power and cos_scale must be > 0")

    def with_inputs(self, visual_dim: int, subtitle_dim: int, query_dim: int) -> SpanConfig:
        return replace(self, visual_dim=visual_dim, subtitle_dim=subtitle_dim, query_dim=query_dim)
