"""The video-level hinge ranking loss of XML in both directions (Eq. 10):

    L_pos>neg = 1/N [ sum_i [Delta + R(i, i-) - R(i, i)]_+  +  sum_j [Delta + R(j-, j) - R(j, j)]_+ ]

``scores[i, j]`` = R(q_i, v_j) for the batch's queries and their videos (row i's positive is
column i). For each query a negative video, and for each video a negative query, is drawn at
random from the ``pool`` highest-scoring negatives in the batch (``pool=None``: from all of them).
Columns holding the same video as the positive are never negatives. Sampling is separate from the
loss so that the loss is a plain differentiable function of the scores.
"""

from __future__ import annotations

import torch


def sample_negatives(
    scores: torch.Tensor, positive: torch.Tensor, pool: int | None, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """scores (N, N), positive (N, N) bool -> (negative video per query (N,), negative query per video (N,)).

    A row (or column) with no negative at all gets its own index, which makes its term Delta."""
    with torch.no_grad():
        s = scores.detach().masked_fill(positive, float("-inf"))
        return _draw(s, pool, generator), _draw(s.t(), pool, generator)


def _draw(s: torch.Tensor, pool: int | None, generator: torch.Generator | None) -> torch.Tensor:
    n, m = s.shape
    valid = torch.isfinite(s)
    k = m if pool is None else min(pool, m)
    if pool is None:  # uniform over all negatives
        weights = valid.float()
    else:  # uniform over the top-k negatives
        top = s.topk(k, dim=1).indices
        weights = torch.zeros_like(s).scatter_(1, top, 1.0) * valid.float()
    empty = weights.sum(1) == 0
    weights[empty, 0] = 1.0
    # drawn on the CPU with the CPU generator, wherever the scores are: the same draws on every device
    idx = torch.multinomial(weights.cpu(), 1, generator=generator).squeeze(1).to(s.device)
    return torch.where(empty, torch.arange(n, device=s.device), idx)


def hinge_ranking_loss(
    scores: torch.Tensor, neg_video: torch.Tensor, neg_query: torch.Tensor, margin: float = 0.1
) -> torch.Tensor:
    """Eq. 10 with sampled negatives: mean over queries + mean over videos of the hinge."""
    n = scores.shape[0]
    ar = torch.arange(n, device=scores.device)
    pos = scores[ar, ar]
    q_term = (margin + scores[ar, neg_video] - pos).clamp(min=0)
    v_term = (margin + scores[neg_query, ar] - pos).clamp(min=0)
    return q_term.mean() + v_term.mean()
