"""MINUTE's training batches, in two phases (Sec. 4.3).

* ``retriever``: B (query, positive video) pairs; the other videos of the batch are the in-batch
  negatives of InfoNCE (Eq. 18).
* ``localizer``: each query with its positive video and ``n_negatives`` hard negatives drawn from
  the trained retriever's top-ranked training videos (``pool``, mined by the family), for the
  Shared-Norm start/end NLL (Eq. 19). ``candidates[:, 0]`` is the positive.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from momentsearch.data.batching import batches_of, load_video_batch, pad_tokens
from momentsearch.data.corpus import Corpus
from momentsearch.data.features import FeatureStore
from momentsearch.losses.localization import span_to_clip_indices
from momentsearch.models.layers import TensorBatch
from momentsearch.text.queries import QueryFeatures, annotated_moments

PHASES = ("retriever", "localizer")


@dataclass
class MinuteBatch(TensorBatch):
    query_ids: list[str]
    tokens: torch.Tensor  # (B, L, D_q)
    token_mask: torch.Tensor  # (B, L) bool
    streams: list[torch.Tensor]  # [(U, T, D_s)] the batch's U distinct videos
    clip_mask: torch.Tensor  # (U, T) bool
    video_col: torch.Tensor  # (B,) the positive video of query i among the U
    same_video: torch.Tensor  # (B, B) bool
    st: torch.Tensor  # (B,) target start clip
    ed: torch.Tensor  # (B,) target end clip
    candidates: torch.Tensor | None = None  # (B, 1 + n) localizer phase: positive then negatives, among the U


class MinuteBatches:
    """All annotated moments of a split; ``phase``, ``pool`` and ``negatives`` are set by the family
    before each epoch (:meth:`MINUTEFamily.prepare_epoch`)."""

    def __init__(self, corpus: Corpus, store: FeatureStore, queries: QueryFeatures, clip_lengths: Mapping[str, float],
                 max_clips: int, max_tokens: int, use_subtitle: bool, localizer_batch_size: int = 0):
        self.moments, self.tokens, self._n_clips = annotated_moments(corpus, store, queries)
        self.videos = list(corpus.videos.values())  # the videos negatives are mined from
        self.video_pos = {v.video_id: i for i, v in enumerate(self.videos)}
        self.positive = np.array([self.video_pos[m.video_id] for m in self.moments])  # type: ignore[index]
        self.store, self.clip_lengths = store, clip_lengths
        self.max_clips, self.max_tokens, self.use_subtitle = max_clips, max_tokens, use_subtitle
        self.localizer_batch_size = localizer_batch_size
        self.phase = "retriever"
        self.pool: np.ndarray | None = None  # (Q, P) indices into self.videos, best first
        self.negatives: np.ndarray | None = None  # (Q, n) this epoch's draw from the pool

    def __len__(self) -> int:
        return len(self.moments)

    def reopen(self) -> None:
        self.store.reopen()

    def draw_negatives(self, n: int, generator: torch.Generator) -> None:
        """n distinct videos per query, uniformly from its pool (a new draw every epoch)."""
        if self.pool is None:
            raise RuntimeError("mine the negative pool first")
        keys = torch.rand(self.pool.shape, generator=generator).numpy()
        pick = np.argsort(keys, axis=1, kind="stable")[:, :n]
        self.negatives = np.take_along_axis(self.pool, pick, axis=1)

    def sampler(self, batch_size: int, generator: torch.Generator) -> Iterator[list[int]]:
        if self.phase == "localizer" and self.localizer_batch_size:
            batch_size = self.localizer_batch_size
        order = torch.randperm(len(self.moments), generator=generator).tolist()
        yield from batches_of(order, batch_size)

    def collate(self, idx: Sequence[int]) -> MinuteBatch:
        ms = [self.moments[i] for i in idx]
        pos = self.positive[list(idx)]
        cand = None
        if self.phase == "localizer":
            if self.negatives is None:
                raise RuntimeError("localizer batches need negatives (draw_negatives)")
            cand_pos = np.concatenate([pos[:, None], self.negatives[list(idx)]], axis=1)  # (B, 1 + n)
            unique, inverse = np.unique(cand_pos, return_inverse=True)
            cand = torch.from_numpy(inverse.reshape(cand_pos.shape))
            col = cand[:, 0]
        else:
            unique, inverse = np.unique(pos, return_inverse=True)
            col = torch.from_numpy(inverse)
        ids = [self.videos[int(u)].video_id for u in unique]
        tokens, tmask = pad_tokens([self.tokens[i] for i in idx], self.max_tokens)
        streams, cmask = load_video_batch(self.store, ids, self.max_clips, self.use_subtitle)
        st, ed = zip(*(span_to_clip_indices(*m.span, self.clip_lengths[m.video_id], self._n_clips[m.video_id])  # type: ignore[index]
                       for m in ms), strict=True)
        return MinuteBatch([m.query_id for m in ms], tokens, tmask, streams, cmask, col.long(),
                           torch.from_numpy(pos[:, None] == pos[None, :]), torch.tensor(st), torch.tensor(ed),
                           None if cand is None else cand.long())
