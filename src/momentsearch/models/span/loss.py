"""The span baselines' labels and loss (Yang et al. Eqs. 14-16).

    y^s_i = ((x_e - i + 1) / (x_e - x_s + 1))^k,  y^e_i = ((i - x_s + 1) / (x_e - x_s + 1))^k  for
    x_s <= i <= x_e, else 0                                                             (Eq. 14)
    L = (BCE(p^s, y^s) + BCE(p^e, y^e)) / 2, over each video's real clips               (Eqs. 15-16)

Eq. 14 as printed has no "+ 1" in the numerator: its label at the true start would be
((L - 1) / L)^k, below 1 for every moment and 0 for a one-clip moment. With the "+ 1" the label is 1
at the true boundary and decays to (1 / L)^k at the other end, which is what interpolated labels are for.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def interpolated_labels(st: torch.Tensor, ed: torch.Tensor, t: int, k: float) -> tuple[torch.Tensor, torch.Tensor]:
    """st, ed (B,) clip indices (inclusive) -> y^s, y^e (B, T)."""
    i = torch.arange(t, device=st.device, dtype=torch.float32)[None]
    s, e = st[:, None].float(), ed[:, None].float()
    inside = (i >= s) & (i <= e)
    length = e - s + 1
    y_s = ((e - i + 1) / length).clamp(min=0) ** k
    y_e = ((i - s + 1) / length).clamp(min=0) ** k
    return y_s * inside, y_e * inside


def span_bce(l_s: torch.Tensor, l_e: torch.Tensor, st: torch.Tensor, ed: torch.Tensor, mask: torch.Tensor,
             k: float) -> torch.Tensor:
    """Eqs. 15-16 from logits l_s, l_e (B, T) with clip mask (B, T)."""
    y_s, y_e = interpolated_labels(st, ed, l_s.shape[1], k)
    w = mask.to(l_s.dtype)
    bce_s = (F.binary_cross_entropy_with_logits(l_s, y_s, reduction="none") * w).sum() / w.sum()
    bce_e = (F.binary_cross_entropy_with_logits(l_e, y_e, reduction="none") * w).sum() / w.sum()
    return (bce_s + bce_e) / 2
