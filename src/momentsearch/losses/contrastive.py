"""InfoNCE with in-batch negatives in both directions (MINUTE Eq. 18; van den Oord et al.)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def bidirectional_info_nce(scores: torch.Tensor, same: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """scores (B, B): S[i, j] = score of query i with item j's video; the diagonal holds the positives.

    Returns (L^v, L^q), each a mean over the batch: L^v = -log softmax_j S[i, j] at j = i (query to
    video), L^q = -log softmax_i S[i, j] at i = j (video to query). ``same`` (B, B) bool marks pairs
    that share a video; off the diagonal they are neither positive nor negative and leave both sums.
    """
    if scores.ndim != 2 or scores.shape[0] != scores.shape[1]:
        raise ValueError(f"scores must be square (B, B), got {tuple(scores.shape)}")
    s = scores
    if same is not None:
        eye = torch.eye(len(s), dtype=torch.bool, device=s.device)
        s = s.masked_fill(same & ~eye, float("-inf"))
    target = torch.arange(len(s), device=s.device)
    return F.cross_entropy(s, target), F.cross_entropy(s.t(), target)
