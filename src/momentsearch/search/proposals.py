"""From a localizer's output to :class:`~momentsearch.search.stages.Proposals`, the one shape the engine reads.

* :func:`grid_proposals`: a dense grid (every (start clip, end clip) of each candidate, with its valid cells)
  -> each candidate's top ``c`` valid cells, in seconds. The one conversion of a dense grid, for VCMR and SVMR.
* :func:`clip_proposals`: proposals on each video's clip grid (:class:`ClipProposals`, what ``propose`` returns
  for long videos: its best ``n`` spans per candidate at its own length, so memory grows with T x max length,
  not T^2) -> seconds.
* :func:`banded_top`: the dense grid's top-n of one video inside a length band, without building the grid.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from momentsearch.search.index import VideoIndex, clips_to_seconds
from momentsearch.search.stages import DenseGrid, Proposals


@dataclass
class ClipProposals:
    """Each candidate's best spans in clips of its own grid (inclusive), best first: (B, K, n) each."""

    st: np.ndarray  # start clip
    ed: np.ndarray  # end clip (inclusive)
    score: np.ndarray
    valid: np.ndarray  # bool: False where the video has fewer than n spans

    def __post_init__(self) -> None:
        if not (self.st.shape == self.ed.shape == self.score.shape == self.valid.shape and self.st.ndim == 3):
            raise ValueError(f"ClipProposals: st, ed, score and valid must share one (B, K, n) shape, got "
                             f"{self.st.shape}, {self.ed.shape}, {self.score.shape}, {self.valid.shape}")


def clip_proposals(index: VideoIndex, videos: np.ndarray, props: ClipProposals) -> Proposals:
    """Clip-grid proposals of ``videos`` (B, K) -> seconds on each video's own grid."""
    start, end = clips_to_seconds(index, np.broadcast_to(videos[:, :, None], props.st.shape), props.st, props.ed)
    return Proposals(start, end, props.score, props.valid)


def grid_proposals(index: VideoIndex, videos: np.ndarray, grid: DenseGrid, c: int | None) -> Proposals:
    """Each candidate's ``c`` best valid cells of a dense grid (None: every cell), best first, in seconds; a video
    with fewer valid cells has its remaining slots marked not valid. The grid is consumed: its cells that are not
    moments are set to -inf in place (no copy of a (B, K, T, T) grid)."""
    score, valid = grid.score.cpu(), grid.valid.cpu()
    b, k, t, _ = score.shape
    n = t * t if c is None else min(c, t * t)
    flat_valid = valid.reshape(b, k, t * t)
    flat_scores = score.reshape(b, k, t * t)
    if not grid.masked:
        flat_scores.masked_fill_(~flat_valid, float("-inf"))  # in place: the grid is consumed
    best_t, flat = flat_scores.topk(n, dim=-1)  # (B, K, n): a cell that is not a moment never outranks one that is
    ok = flat_valid.gather(-1, flat).numpy()
    best = best_t.numpy()
    st, ed = (flat // t).numpy(), (flat % t).numpy()
    return clip_proposals(index, videos, ClipProposals(st, ed, best, ok))


def banded_top(p_st: torch.Tensor, p_ed: torch.Tensor, n_min: int, n_max: int, n: int
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``n`` best spans of one video by p_st[st] * p_ed[ed] with n_min <= ed - st + 1 <= n_max.

    p_st, p_ed (T,) -> (st (n,), ed (n,), score (n,), valid (n,)) best first; a video with fewer than n spans in
    the band has its remaining slots not valid. This is the dense ``moment_scores`` grid's top-n without building
    the (T, T) grid: (T, n_max) only."""
    t = p_st.shape[0]
    lengths = torch.arange(n_min - 1, n_max, device=p_st.device)  # ed - st
    ed = torch.arange(t, device=p_st.device)[:, None] + lengths[None, :]  # (T, L)
    ok = ed < t
    s = p_st[:, None] * p_ed[ed.clamp(max=t - 1)] * ok
    k = min(n, s.numel())
    score, flat = s.reshape(-1).topk(k)
    valid = ok.reshape(-1)[flat]
    st = flat // len(lengths)
    out_ed = st + lengths[flat % len(lengths)]
    if k < n:
        pad = n - k
        st, out_ed = torch.cat([st, st.new_zeros(pad)]), torch.cat([out_ed, out_ed.new_zeros(pad)])
        score, valid = torch.cat([score, score.new_zeros(pad)]), torch.cat([valid, valid.new_zeros(pad)])
    return st, out_ed, score, valid
