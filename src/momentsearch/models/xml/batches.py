"""XML's training batches: query token features, the positive video's clips, target clips."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from scipy import sparse

from momentsearch.data.batching import batches_of, load_video_batch, pad_tokens
from momentsearch.data.corpus import Corpus
from momentsearch.data.features import FeatureStore
from momentsearch.errors import ConfigError
from momentsearch.losses.localization import span_to_clip_indices
from momentsearch.models.layers import TensorBatch
from momentsearch.text.queries import QueryFeatures, annotated_moments


@dataclass
class Batch(TensorBatch):
    query_ids: list[str]
    video_ids: list[str]
    tokens: torch.Tensor  # (B, L, D_q)
    token_mask: torch.Tensor  # (B, L) bool
    streams: list[torch.Tensor]  # [(U, T, D_s)] the batch's U distinct videos, each encoded once
    clip_mask: torch.Tensor  # (U, T) bool
    video_col: torch.Tensor  # (B,) which of the U videos is query i's
    st: torch.Tensor  # (B,) target start clip
    ed: torch.Tensor  # (B,) target end clip
    same_video: torch.Tensor  # (B, B) bool: row and column hold the same video
    pairs: torch.Tensor | None = None  # (B, B) bool: item j potentially relevant to query i (other video)
    conf: torch.Tensor | None = None  # (B, B) float: its confidence C (or relevance S), 0 off the pairs
    # (B, B) bool: column j's video holds a moment paired with query i anywhere in the split (the whole table)
    partner_videos: torch.Tensor | None = None


class MomentBatches:
    """All annotated moments of a split, batched in a seeded order per epoch."""

    def __init__(self, corpus: Corpus, store: FeatureStore, queries: QueryFeatures,
                 clip_lengths: Mapping[str, float], max_clips: int, max_tokens: int, use_subtitle: bool,
                 queries_per_video: int = 0):
        self.moments, self.tokens, self._n_clips = annotated_moments(corpus, store, queries)
        self.pair_matrix: sparse.csr_matrix | None = None  # (Q, Q) over self.moments, see attach_pairs
        self.pair_videos: sparse.csr_matrix | None = None  # (Q, V) bool: a video holding a partner of query q
        self._video_row = {v: r for r, v in enumerate(dict.fromkeys(m.video_id for m in self.moments))}
        self.store, self.clip_lengths = store, clip_lengths
        self.max_clips, self.max_tokens, self.use_subtitle = max_clips, max_tokens, use_subtitle
        self.queries_per_video = queries_per_video

    def __len__(self) -> int:
        return len(self.moments)

    @property
    def query_ids(self) -> list[str]:
        return [m.query_id for m in self.moments]

    def attach_pairs(self, matrix: sparse.csr_matrix) -> None:
        """Potentially relevant pairs over ``self.query_ids`` (from :func:`training.pairs.training_pairs`)."""
        if matrix.shape != (len(self), len(self)):
            raise ConfigError(f"pair matrix {matrix.shape} does not match {len(self)} training queries")
        self.pair_matrix = matrix.tocsr()
        self.pair_videos = partner_videos(self.pair_matrix, np.array([self._video_row[m.video_id]  # type: ignore[index]
                                                                      for m in self.moments]), len(self._video_row))

    def reopen(self) -> None:
        self.store.reopen()

    def epoch(self, batch_size: int, generator: torch.Generator) -> Iterator[Batch]:
        return (self.collate(idx) for idx in self.sampler(batch_size, generator))

    def sampler(self, batch_size: int, generator: torch.Generator) -> Iterator[list[int]]:
        """Random batches of queries (XML's practice); with ``queries_per_video`` > 0, batches are
        filled with groups of up to that many queries of one video, so a batch holds fewer distinct
        videos to encode (every query is still visited once per epoch)."""
        queries_per_video = self.queries_per_video
        if queries_per_video <= 0:
            order = torch.randperm(len(self.moments), generator=generator).tolist()
        else:
            by_video: dict[str, list[int]] = {}
            for i, m in enumerate(self.moments):
                by_video.setdefault(m.video_id, []).append(i)  # type: ignore[arg-type]
            groups = []
            for idx in by_video.values():
                perm = torch.randperm(len(idx), generator=generator).tolist()
                shuffled = [idx[p] for p in perm]
                groups.extend(shuffled[s: s + queries_per_video] for s in range(0, len(shuffled), queries_per_video))
            order = [i for g in torch.randperm(len(groups), generator=generator).tolist() for i in groups[g]]
        yield from batches_of(order, batch_size)

    def collate(self, idx: Sequence[int]) -> Batch:
        ms = [self.moments[i] for i in idx]
        vids = [m.video_id for m in ms]
        unique = list(dict.fromkeys(vids))
        col = {v: j for j, v in enumerate(unique)}
        tokens, tmask = pad_tokens([self.tokens[i] for i in idx], self.max_tokens)
        streams, cmask = load_video_batch(self.store, unique, self.max_clips, self.use_subtitle)  # type: ignore[arg-type]
        st, ed = zip(*(span_to_clip_indices(*m.span, self.clip_lengths[m.video_id], self._n_clips[m.video_id])  # type: ignore[index]
                       for m in ms),
                     strict=True)  # type: ignore[index]
        v = np.array(vids)
        same = v[:, None] == v[None, :]
        pairs = conf = held = None
        if self.pair_matrix is not None:
            block = self.pair_matrix[idx][:, idx].toarray()
            present = (block > 0) & ~same
            pairs = torch.from_numpy(present)
            conf = torch.from_numpy(np.where(present, block, 0.0).astype(np.float32))
            rows = [self._video_row[x] for x in vids]  # type: ignore[index]
            held = torch.from_numpy(self.pair_videos[idx][:, rows].toarray() & ~same)  # type: ignore[index]
        return Batch([m.query_id for m in ms], vids, tokens, tmask, streams, cmask,  # type: ignore[arg-type]
                     torch.tensor([col[x] for x in vids]), torch.tensor(st), torch.tensor(ed),
                     torch.from_numpy(same), pairs, conf, held)


def partner_videos(pairs: sparse.csr_matrix, query_video: np.ndarray, n_videos: int) -> sparse.csr_matrix:
    """(Q, V) bool: video v holds a moment paired with query q (a nonzero of ``pairs`` (Q, Q) in one of v's
    queries' columns), read from the whole table."""
    coo = sparse.coo_matrix(pairs)
    keep = coo.data > 0
    m = sparse.csr_matrix((np.ones(int(keep.sum()), bool), (coo.row[keep], query_video[coo.col[keep]])),
                          shape=(pairs.shape[0], n_videos))
    m.sum_duplicates()
    return m
