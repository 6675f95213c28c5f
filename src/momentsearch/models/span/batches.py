"""The span baselines' training batches: B queries, each with its own video (the NLVL training the
paper gives CET and BET: no other video is seen in training)."""

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
from momentsearch.models.span.config import SpanConfig
from momentsearch.text.queries import QueryFeatures, annotated_moments


@dataclass
class SpanBatch(TensorBatch):
    query_ids: list[str]
    tokens: torch.Tensor  # (B, L, D_q)
    token_mask: torch.Tensor  # (B, L)
    streams: list[torch.Tensor]  # [(B, T, D_s)] each query's own video
    clip_mask: torch.Tensor  # (B, T)
    st: torch.Tensor  # (B,)
    ed: torch.Tensor  # (B,)


class SpanBatches:
    def __init__(self, corpus: Corpus, store: FeatureStore, queries: QueryFeatures, clip_lengths: Mapping[str, float],
                 cfg: SpanConfig):
        self.moments, self.tokens, self.n_clips = annotated_moments(corpus, store, queries)
        self.store, self.clip_lengths, self.cfg = store, clip_lengths, cfg

    def __len__(self) -> int:
        return len(self.moments)

    def reopen(self) -> None:
        self.store.reopen()

    def sampler(self, batch_size: int, generator: torch.Generator) -> Iterator[list[int]]:
        yield from batches_of(torch.randperm(len(self.moments), generator=generator).tolist(), batch_size)

    def collate(self, idx: Sequence[int]) -> SpanBatch:
        ms = [self.moments[i] for i in idx]
        vids = [m.video_id for m in ms]
        tokens, tmask = pad_tokens([self.tokens[i] for i in idx], self.cfg.max_tokens)
        streams, cmask = load_video_batch(self.store, vids, self.cfg.max_clips, self.cfg.subtitle_dim > 0)
        st, ed = zip(*(span_to_clip_indices(*m.span, self.clip_lengths[v], self.n_clips[v])  # type: ignore[misc]
                       for m, v in zip(ms, vids, strict=True)), strict=True)
        return SpanBatch([m.query_id for m in ms], tokens, tmask, streams, cmask,
                         torch.tensor(np.array(st)), torch.tensor(np.array(ed)))
