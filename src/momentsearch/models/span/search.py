"""The span baselines' search. A moment (st, ed) of a video scores p^s_st * p^e_ed within the length
limits; a video's score is its best moment's, computed exactly over every video (retrieval is
exhaustive: CET reads every (query, video) pair, BET matches its query vectors to every clip).

Index arrays: CET keeps the raw clip features (``clips``), BET its encoded unit clip vectors (``h``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from momentsearch.data.batching import video_batches
from momentsearch.data.corpus import Video
from momentsearch.data.features import FeatureStore
from momentsearch.models.layers import eval_mode, length_band
from momentsearch.models.span.network import SpanNet
from momentsearch.search.index import VideoIndex, concat_ragged
from momentsearch.search.stages import DenseGrid, Queries, SearchStages


@torch.no_grad()
def encode_corpus(model: SpanNet, store: FeatureStore, videos: Sequence[Video], clip_lengths: Mapping[str, float],
                  device: torch.device, batch_size: int = 64, progress: bool = True) -> VideoIndex:
    cfg = model.cfg
    name = "clips" if cfg.name == "cet" else "h"
    parts: list[np.ndarray] = []
    with eval_mode(model):
        for chunk, streams, mask in video_batches(store, videos, batch_size, cfg.max_clips, cfg.subtitle_dim > 0,
                                                  progress):
            h = torch.cat(streams, -1) if cfg.name == "cet" else \
                model.encode_clips([x.to(device) for x in streams], mask.to(device)).float().cpu()
            parts += [h[i, : int(mask[i].sum())].half().numpy() for i in range(len(chunk))]
    arr, offsets = concat_ragged(parts)
    return VideoIndex([v.video_id for v in videos], np.array([v.duration for v in videos]),
                      np.array([clip_lengths[v.video_id] for v in videos], np.float64), offsets, {name: arr})


def moment_probs(l_s: torch.Tensor, l_e: torch.Tensor, mask: torch.Tensor, band: torch.Tensor) -> torch.Tensor:
    """Logits (..., T), clip mask (..., T), (T, T) band -> p^s_st p^e_ed (..., T, T) float64, 0 outside."""
    p = torch.sigmoid(l_s.double())[..., :, None] * torch.sigmoid(l_e.double())[..., None, :]
    return p * (band & mask[..., :, None] & mask[..., None, :])


def span_stages(model: SpanNet, index: VideoIndex, device: torch.device | None = None) -> SearchStages:
    """CET's and BET's stages: BET's query network runs once per batch and both roles read its vectors; CET, a
    cross-encoder, reads the token features with each video."""
    dev = device or torch.device("cpu")
    both = SpanStages(model, index, dev)
    network = None if both.cross else (lambda tokens, mask: model.encode_queries(tokens.to(dev), mask.to(dev)))
    return SearchStages(both, both, query_network=network)


class SpanStages:
    """Retriever and localizer at once for CET and BET (:func:`span_stages`)."""

    provides = frozenset({"dense"})

    not_vector_servable = ("a video scores its best moment from the localizer run on each (query, video) pair "
                           "(CET's is a cross-encoder), not an inner product of stored vectors")

    def __init__(self, model: SpanNet, index: VideoIndex, device: torch.device | None = None,
                 pairs_per_pass: int = 1024, chunk_videos: int = 32):
        self.model = model.eval()
        self.index = index
        self.device = device or torch.device("cpu")
        self.pairs_per_pass, self.chunk = pairs_per_pass, chunk_videos
        self.cross = model.cfg.name == "cet"

    @torch.no_grad()
    def localize(self, queries: Queries, videos: np.ndarray, video_scores: torch.Tensor | None = None) -> DenseGrid:
        b, k = videos.shape
        tokens, token_mask = queries.tokens.to(self.device), queries.mask.to(self.device)
        x, mask = self.index.padded("clips" if self.cross else "h", videos.reshape(-1))  # (B*K, T, .)
        x, mask = x.to(self.device), mask.to(self.device)
        qi = torch.arange(b, device=self.device).repeat_interleave(k)
        q = None if self.cross else tokens  # BET: the query network's vectors (span_stages)
        outs = []
        for s in range(0, b * k, self.pairs_per_pass):
            sl = slice(s, s + self.pairs_per_pass)
            if self.cross:
                o = self.model.cross_logits([x[sl]], mask[sl], tokens[qi[sl]], token_mask[qi[sl]])
            else:
                assert q is not None
                o = self.model.bi_logits(q[qi[sl]], x[sl])
            outs.append(o)
        l_s, l_e = torch.cat([o[0] for o in outs]), torch.cat([o[1] for o in outs])
        t = mask.shape[1]
        band = length_band(t, self.model.cfg.n_min, self.model.cfg.n_max, self.device)
        allowed = band & mask[..., :, None] & mask[..., None, :]
        return DenseGrid(moment_probs(l_s, l_e, mask, band).reshape(b, k, t, t).cpu(), allowed.reshape(b, k, t, t).cpu())

    @torch.no_grad()
    def score_videos(self, queries: Queries) -> torch.Tensor:
        n = len(self.index)
        out = []
        for s in range(0, n, self.chunk):
            vids = np.broadcast_to(np.arange(s, min(s + self.chunk, n))[None], (len(queries), min(self.chunk, n - s)))
            grid = self.localize(queries, np.ascontiguousarray(vids))  # a video scores its best moment
            out.append(grid.score.flatten(2).max(-1).values.float())
        return torch.cat(out, dim=1) if out else torch.zeros(len(queries), 0)
