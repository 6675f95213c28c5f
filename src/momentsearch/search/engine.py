"""Two-stage search: a retriever scores every video, a localizer ranks moments in the top K.

Roles (any model can fill them):

* ``Retriever.score_videos(tokens, token_mask) -> (B, V)`` video scores over the index;
* ``Localizer.localize(tokens, token_mask, videos (B, K)) -> (B, K, T, T)`` moment scores
  s_tl[st, ed] (clip indices; 0 where a span is not allowed), padded to the longest video;
* ``combine(s_tl, s_vr) -> (B, K, T, T)`` the final moment score (XML: Eq. 3).

The engine keeps the top ``k_videos`` videos, scores their moments, converts clip indices to
seconds, drops near-duplicates with temporal NMS and returns the top ``n_moments`` as
:class:`RankedMoments` (VCMR), with the video ranking (VR) beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch
import torch.nn.functional as F

from momentsearch.evaluation.predictions import RankedMoments
from momentsearch.models.xml import XML
from momentsearch.search.index import VideoIndex
from momentsearch.search.nms import temporal_nms


class Retriever(Protocol):
    def score_videos(self, tokens: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor: ...


class Localizer(Protocol):
    def localize(self, tokens: torch.Tensor, token_mask: torch.Tensor, videos: np.ndarray) -> torch.Tensor: ...
    def combine(self, s_tl: torch.Tensor, s_vr: torch.Tensor) -> torch.Tensor: ...


class XMLRetriever:
    """Eq. 1 over an index: max over each video's clips of cos(q_s, H1), averaged over streams."""

    def __init__(self, model: XML, index: VideoIndex, chunk_clips: int = 200_000):
        self.model = model.eval()
        self.index = index
        self.chunk = chunk_clips
        self._h1n: list[torch.Tensor] | None = None

    def _normalized(self) -> list[torch.Tensor]:
        if self._h1n is None:
            n = self.index.h1.shape[0]
            self._h1n = [F.normalize(torch.from_numpy(np.array(self.index.h1[s: s + self.chunk], np.float32)), dim=-1)
                         for s in range(0, n, self.chunk)]  # a copy: the index may be a read-only memory map
        return self._h1n

    @torch.no_grad()
    def score_videos(self, tokens: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
        q = F.normalize(self.model.encode_queries(tokens, token_mask), dim=-1)  # (B, S, d)
        cos = torch.cat([torch.einsum("bsd,nsd->bns", q, h) for h in self._normalized()], dim=1)  # (B, N, S)
        per_video = np.maximum.reduceat(cos.numpy(), self.index.offsets[:-1], axis=1)  # (B, V, S)
        return torch.from_numpy(per_video).mean(-1)


class XMLLocalizer:
    def __init__(self, model: XML, index: VideoIndex):
        self.model = model.eval()
        self.index = index

    @torch.no_grad()
    def localize(self, tokens: torch.Tensor, token_mask: torch.Tensor, videos: np.ndarray) -> torch.Tensor:
        q = self.model.encode_queries(tokens, token_mask)  # (B, S, d)
        b, k = videos.shape
        h2, mask = self.index.padded("h2", videos.reshape(-1))  # (B*K, S, T, d)
        qq = q[:, None].expand(b, k, *q.shape[1:]).reshape(b * k, *q.shape[1:])
        o_st, o_ed = self.model.st_ed_logits(qq, h2, mask)
        s_tl = self.model.moment_scores(o_st, o_ed)
        return s_tl.reshape(b, k, *s_tl.shape[1:])

    def combine(self, s_tl: torch.Tensor, s_vr: torch.Tensor) -> torch.Tensor:
        b, k = s_vr.shape
        return self.model.vcmr_scores(s_tl.reshape(b * k, *s_tl.shape[2:]), s_vr.reshape(-1)).reshape(s_tl.shape)


@dataclass
class SearchResult:
    vcmr: RankedMoments
    vr: RankedMoments


class SearchEngine:
    def __init__(
        self, retriever: Retriever, localizer: Localizer, index: VideoIndex,
        k_videos: int = 100, n_moments: int = 100, nms_threshold: float = 0.7, candidates_per_video: int = 20,
    ):
        self.retriever, self.localizer, self.index = retriever, localizer, index
        self.k_videos = min(k_videos, len(index))
        self.n_moments = n_moments
        self.nms_threshold = nms_threshold
        self.candidates_per_video = candidates_per_video

    @torch.no_grad()
    def search(self, query_ids: Sequence[str], tokens: torch.Tensor, token_mask: torch.Tensor) -> SearchResult:
        """tokens (B, L, D_q) padded token features of B queries -> ranked moments and videos."""
        s_vr = self.retriever.score_videos(tokens, token_mask)  # (B, V)
        top_vr, top_v = s_vr.topk(self.k_videos, dim=1)
        s_tl = self.localizer.localize(tokens, token_mask, top_v.numpy())  # (B, K, T, T)
        scores = self.localizer.combine(s_tl, top_vr)
        b, k, t, _ = scores.shape
        c = min(self.candidates_per_video, t * t)
        best, flat = scores.reshape(b, k, t * t).topk(c, dim=-1)  # (B, K, c)
        st_clip, ed_clip = (flat // t).numpy(), (flat % t).numpy()
        vids = np.broadcast_to(top_v.numpy()[:, :, None], st_clip.shape)
        dt = self.index.clip_length
        dur = self.index.durations[vids]
        start = st_clip * dt
        end = np.minimum((ed_clip + 1) * dt, dur)
        best = best.numpy()
        lists = []
        for i in range(b):
            ok = best[i].ravel() > 0
            v, s, e, sc = vids[i].ravel()[ok], start[i].ravel()[ok], end[i].ravel()[ok], best[i].ravel()[ok]
            keep = temporal_nms(v, s, e, sc, self.nms_threshold, self.n_moments)
            lists.append(list(zip(v[keep], s[keep], e[keep], sc[keep], strict=True)))
        vcmr = RankedMoments.from_lists(list(query_ids), self.index.video_ids, lists)
        vr_lists = [list(zip(top_v[i].numpy(), np.zeros(k), np.zeros(k), top_vr[i].numpy(), strict=True))
                    for i in range(b)]
        vr = RankedMoments.from_lists(list(query_ids), self.index.video_ids, vr_lists)
        return SearchResult(vcmr, vr)
