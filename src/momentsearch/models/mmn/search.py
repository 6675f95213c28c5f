"""MMN / RMMN's search: every video is encoded once into its 2D map in the two joint spaces; a query
is one vector per space, and a moment's score s (Eq. 10) is comparable across videos (a bi-encoder),
so the retriever is exact: a video's score is its best moment's.

The index stores, per video, N rows (one per start clip i) of (N, 2, d) unit vectors: row i holds the
moments [i, j]. Each video's clip length in the index is duration / N, so cell (i, j) is the span
[i dur / N, (j + 1) dur / N) for the engine.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from momentsearch.data.batching import video_batches
from momentsearch.data.corpus import Video
from momentsearch.data.features import FeatureStore
from momentsearch.models.layers import eval_mode
from momentsearch.models.mmn.network import MMN
from momentsearch.search.index import VideoIndex
from momentsearch.search.stages import DenseGrid, Queries, SearchStages

ARRAY = "map"
F32_CACHE_BYTES = 1 << 29  # an index whose maps take at most this much as float32 is converted once, not per read


@torch.no_grad()
def encode_corpus(model: MMN, store: FeatureStore, videos: Sequence[Video], device: torch.device,
                  batch_size: int = 32, progress: bool = True, max_clips: int = 100_000) -> VideoIndex:
    n = model.cfg.num_clips
    parts = []
    with eval_mode(model):
        for _, streams, mask in video_batches(store, videos, batch_size, max_clips, model.cfg.subtitle_dim > 0,
                                              progress):
            parts.append(model.encode_videos([x.to(device) for x in streams], mask.to(device)).half().cpu().numpy())
    maps = np.concatenate(parts) if parts else np.zeros((0, n, n, 2, model.cfg.joint_dim), np.float16)
    durations = np.array([v.duration for v in videos], np.float64)
    return VideoIndex([v.video_id for v in videos], durations, durations / n, np.arange(len(videos) + 1) * n,
                      {ARRAY: maps.reshape(-1, n, 2, model.cfg.joint_dim)})


def map_stages(model: MMN, index: VideoIndex, device: torch.device | None = None) -> SearchStages:
    """MMN's stages: the query network (one unit vector per joint space) runs once per batch; the retriever and the
    localizer (one object) read its output."""
    dev = device or torch.device("cpu")
    both = MapStages(model, index, dev)
    return SearchStages(both, both, query_network=lambda tokens, mask: model.encode_queries(tokens.to(dev),
                                                                                            mask.to(dev)))


class MapStages:
    """Retriever and localizer at once: ``score_videos`` (B, V) and ``localize`` (B, K, N, N), over the queries
    MMN's query network made (:func:`map_stages`)."""

    provides = frozenset({"dense"})

    not_vector_servable = ("a moment scores sigmoid(iou_scale cos_iou) ((1 + cos_con) / 2)^p (Eq. 10), a product over "
                           "two joint spaces that no single inner product gives")

    def __init__(self, model: MMN, index: VideoIndex, device: torch.device | None = None, chunk_videos: int = 256):
        self.model = model.eval()
        self.index = index
        self.device = device or torch.device("cpu")
        self.chunk = chunk_videos
        n = model.cfg.num_clips
        if index.offsets[-1] != len(index) * n:
            raise ValueError(f"the index does not hold {n} rows per video: it was not built for this model")
        self.n = n
        self._f32: torch.Tensor | None = None  # the whole index as float32, where it is small (:meth:`_maps`)

    def _maps(self, videos: np.ndarray) -> torch.Tensor:
        """The float32 maps (K, N, N, 2, d) of ``videos``. A small index is converted from float16 once (numpy's
        conversion cost more than Eq. 10 itself on every read); the values are the same either way."""
        a = self.index.array(ARRAY)
        rows = (videos[:, None] * self.n + np.arange(self.n)[None]).reshape(-1)
        if self._f32 is None and a.size * 4 <= F32_CACHE_BYTES:
            self._f32 = torch.from_numpy(np.asarray(a, np.float32)).to(self.device)
        if self._f32 is not None:
            m = self._f32.index_select(0, torch.from_numpy(rows).to(self.device))
        else:
            m = torch.from_numpy(np.asarray(a[rows], np.float32)).to(self.device)
        return m.reshape(len(videos), self.n, self.n, 2, -1)

    @torch.no_grad()
    def score_videos(self, queries: Queries) -> torch.Tensor:
        q = queries.tokens.to(self.device)  # (B, 2, d)
        out = []
        for s in range(0, len(self.index), self.chunk):
            vids = np.arange(s, min(s + self.chunk, len(self.index)))
            out.append(self.model.scores(q, self._maps(vids)).flatten(2).max(-1).values.cpu())
        return torch.cat(out, dim=1) if out else torch.zeros(len(queries), 0)

    @torch.no_grad()
    def localize(self, queries: Queries, videos: np.ndarray, video_scores: torch.Tensor | None = None) -> DenseGrid:
        q = queries.tokens.to(self.device)
        score = torch.stack([self.model.scores(q[b: b + 1], self._maps(videos[b]))[0].double().cpu()
                             for b in range(len(videos))])
        return DenseGrid(score, self.model.valid().expand(score.shape).clone())


def training_index(model: MMN, store: FeatureStore, videos: Sequence[Video], device: torch.device) -> SearchStages:
    """The stages over the training videos (CM-ANS mining)."""
    return map_stages(model, encode_corpus(model, store, videos, device, progress=False), device)
