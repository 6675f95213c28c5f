"""MINUTE's search stages (Sec. 4.1): the corpus is encoded once by both video encoders; the
retriever (Eq. 8) scores every video; the localizer reads the query with each of the top-K videos
and ranks every moment of the K together:

* ``shared_norm`` (MINUTE): S = S_R + l_st + l_ed (Eq. 13). Up to one constant per query this is
  log P(m | q, V_K) of Eq. 12, so the scores returned are exp(S - max S), that probability times a
  per-query constant: comparable across the K videos, and positive.
* ``two_stage`` (the earlier two-stage scoring, Eqs. 5-7): exp(alpha S_R) P_st P_ed with P
  normalised within each video, returned likewise as exp(log S - max log S).

Moments outside the length limits [n_min, n_max] clips score 0. Without video scores (SVMR) the
score is P_st P_ed within the one video. Scores are float64 so that far-ranked moments keep a
positive score.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from momentsearch.data.batching import video_batches
from momentsearch.data.corpus import Video
from momentsearch.data.features import FeatureStore
from momentsearch.models.layers import NEG_INF, eval_mode
from momentsearch.models.minute.network import MINUTE
from momentsearch.search.clipmax import ClipMaxRetriever
from momentsearch.search.index import VideoIndex, concat_ragged
from momentsearch.search.stages import DenseGrid, Queries

ARRAYS = ("retr", "loc")  # the retriever's and the localizer's clip representations, (clips, S, d)


@torch.no_grad()
def encode_corpus(model: MINUTE, store: FeatureStore, videos: Sequence[Video], clip_lengths: Mapping[str, float],
                  device: torch.device, batch_size: int = 64, progress: bool = True,
                  arrays: Sequence[str] = ARRAYS) -> VideoIndex:
    cfg = model.cfg
    encoders = {"retr": model.retriever.video, "loc": model.localizer.video}
    parts: dict[str, list[np.ndarray]] = {a: [] for a in arrays}
    with eval_mode(model):
        for chunk, streams, mask in video_batches(store, videos, batch_size, cfg.max_clips, cfg.n_streams == 2,
                                                  progress):
            streams, dmask = [x.to(device) for x in streams], mask.to(device)
            for a in arrays:
                h = encoders[a](streams, dmask).float().cpu()  # (V, S, T, d)
                for i in range(len(chunk)):
                    parts[a].append(h[i, :, : int(mask[i].sum())].permute(1, 0, 2).half().numpy())
    joined = {a: concat_ragged(p) for a, p in parts.items()}
    offsets = next(iter(joined.values()))[1]
    return VideoIndex([v.video_id for v in videos], np.array([v.duration for v in videos]),
                      np.array([clip_lengths[v.video_id] for v in videos], np.float64), offsets,
                      {a: arr for a, (arr, _) in joined.items()})


class MinuteRetriever(ClipMaxRetriever):
    """Eq. 8: mean over streams of the max over clips of the inner product q_c . c_j."""

    def __init__(self, model: MINUTE, index: VideoIndex, device: torch.device | None = None):
        self.model = model.eval()
        super().__init__(lambda q: model.retriever.encode_queries(q.tokens, q.mask), index, "retr", cosine=False,
                         device=device)


class MinuteLocalizer:
    provides = frozenset({"dense"})

    def __init__(self, model: MINUTE, index: VideoIndex, device: torch.device | None = None,
                 scoring: str = "shared_norm", alpha: float = 1.0, pairs_per_pass: int = 256):
        if scoring not in ("shared_norm", "two_stage"):
            raise ValueError(f"scoring must be shared_norm or two_stage, got {scoring!r}")
        self.model = model.eval()
        self.index = index
        self.device = device or torch.device("cpu")
        self.scoring, self.alpha = scoring, alpha
        self.pairs_per_pass = pairs_per_pass

    @torch.no_grad()
    def logits(self, queries: Queries, videos: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """l_st, l_ed (B, K, T) of each query on its K videos, and the clip mask (B, K, T). The (query, video)
        pairs go through the localizer shortest video first, ``pairs_per_pass`` at a time, each pass padded to its
        own longest video: a pair's logits do not depend on its pass (padding is masked out), and the clips
        a pass reads are about half those of padding every pair to the longest of all."""
        loc = self.model.localizer
        tokens, token_mask = queries.tokens.to(self.device), queries.mask.to(self.device)
        w, q = loc.query(tokens, token_mask)
        b, k = videos.shape
        flat = videos.reshape(-1)
        n = self.index.n_clips[flat]
        t = int(n.max()) if len(n) else 1
        st = torch.full((b * k, t), NEG_INF, device=self.device)
        ed = torch.full((b * k, t), NEG_INF, device=self.device)
        order = np.argsort(n, kind="stable")
        for s in range(0, b * k, self.pairs_per_pass):
            rows = order[s: s + self.pairs_per_pass]
            c, mask = self.index.padded("loc", flat[rows])  # (P, T_pass, S, d)
            c, mask = c.permute(0, 2, 1, 3).float().to(self.device), mask.to(self.device)
            qi = torch.from_numpy(rows // k).to(self.device)
            o = loc.logits(w[qi], token_mask[qi], q[qi], c, mask)
            at = torch.from_numpy(rows).to(self.device)
            st[at, : mask.shape[1]] = o[0]
            ed[at, : mask.shape[1]] = o[1]
        mask = torch.from_numpy(np.arange(t)[None, :] < n[:, None]).to(self.device)
        return st.reshape(b, k, t), ed.reshape(b, k, t), mask.reshape(b, k, t)

    @torch.no_grad()
    def localize(self, queries: Queries, videos: np.ndarray, video_scores: torch.Tensor | None = None) -> DenseGrid:
        l_st, l_ed, mask = self.logits(queries, videos)
        grid = moment_scores(l_st, l_ed, mask, self.model.moment_band(mask.shape[-1], mask.device),
                             None if video_scores is None else video_scores.to(self.device), self.scoring, self.alpha)
        return DenseGrid(grid.score.cpu(), grid.valid.cpu(), masked=True)


def moment_scores(l_st: torch.Tensor, l_ed: torch.Tensor, mask: torch.Tensor, band: torch.Tensor,
                  video_scores: torch.Tensor | None, scoring: str, alpha: float) -> DenseGrid:
    """(B, K, T) logits, clip mask, (T, T) length band, S_R (B, K) or None -> (B, K, T, T) float64 log-scores
    (-inf off the valid cells) and the valid cells."""
    l_st, l_ed = l_st.double(), l_ed.double()
    allowed = band & mask[..., :, None] & mask[..., None, :]  # (B, K, T, T)
    if video_scores is None or scoring == "two_stage":  # per-video normalisation (Eq. 7)
        l_st = l_st.masked_fill(~mask, float("-inf")).log_softmax(-1)
        l_ed = l_ed.masked_fill(~mask, float("-inf")).log_softmax(-1)
    log_s = l_st[..., :, None] + l_ed[..., None, :]
    if video_scores is not None:
        s_r = video_scores.double()
        log_s = log_s + (s_r if scoring == "shared_norm" else alpha * s_r)[..., None, None]  # Eq. 13 / Eq. 5
    return DenseGrid(log_s.masked_fill(~allowed, float("-inf")), allowed, masked=True)
