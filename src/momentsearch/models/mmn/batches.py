"""MMN / RMMN's training batches: B (query, gold moment) pairs and the videos their negatives come from.

* First stage: the batch's videos are the queries' own videos; every other video of the batch is a
  negative of p(m|q) and every other query a negative of p(q|m), as MMN's in-batch negatives; with
  ``true_negatives`` a pair with s_te >= t_tr is dropped from the negatives (Eq. 4); s_te is the
  sentence embeddings' (Eq. 1) or a relevance table's (``true_negatives_table``).
* Hard stage (CM-ANS, set by the family): each query brings its drawn hard negative videos, each
  video its drawn hard negative queries, and these are the only negatives across videos.
Within the gold video, moments with IoU < ``neg_iou`` are negatives of p(m|q) in both stages.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import torch
from scipy import sparse

from momentsearch.data.batching import batches_of, load_video_batch, pad_tokens
from momentsearch.data.corpus import Corpus
from momentsearch.data.features import FeatureStore
from momentsearch.models.layers import TensorBatch
from momentsearch.models.mmn.config import MMNConfig
from momentsearch.models.mmn.negatives import unreliable_from_table, unreliable_pairs
from momentsearch.relevance.training_pairs import training_pairs
from momentsearch.text.queries import QueryFeatures, annotated_moments


@dataclass
class MMNBatch(TensorBatch):
    query_ids: list[str]  # the B training queries (extra negative queries follow them in ``tokens``)
    tokens: torch.Tensor  # (B + E, L, D_q)
    token_mask: torch.Tensor  # (B + E, L)
    streams: list[torch.Tensor]  # [(U, T, D_s)]
    clip_mask: torch.Tensor  # (U, T)
    video_col: torch.Tensor  # (B,) the gold video among the U
    iou: torch.Tensor  # (B, N, N) IoU of each cell of the gold video with the gold moment
    neg_video: torch.Tensor  # (B, U) bool: video u is a negative of p(m|q_b)
    neg_query: torch.Tensor  # (B, B + E) bool: query j is a negative of p(q|m_b)


def cell_iou(start: float, end: float, duration: float, n: int) -> np.ndarray:
    """(N, N) tIoU of every cell [i, j] = [i dur / N, (j + 1) dur / N) with [start, end]; 0 for j < i."""
    edges = np.arange(n + 1) * duration / n
    s, e = edges[:-1, None], edges[None, 1:]
    inter = np.clip(np.minimum(e, end) - np.maximum(s, start), 0, None)
    union = np.maximum(e, end) - np.minimum(s, start)
    return np.where(e > s, inter / np.maximum(union, 1e-9), 0.0)


def span_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element-wise tIoU of spans a (..., 2) and b (..., 2)."""
    inter = np.clip(np.minimum(a[..., 1], b[..., 1]) - np.maximum(a[..., 0], b[..., 0]), 0, None)
    union = np.maximum(a[..., 1], b[..., 1]) - np.minimum(a[..., 0], b[..., 0])
    return inter / np.maximum(union, 1e-9)


class MMNBatches:
    def __init__(self, corpus: Corpus, store: FeatureStore, queries: QueryFeatures, clip_lengths: Mapping[str, float],
                 cfg: MMNConfig, max_clips: int = 100_000):
        self.moments, self.tokens, _ = annotated_moments(corpus, store, queries)
        self.store, self.clip_lengths, self.cfg, self.max_clips = store, clip_lengths, cfg, max_clips
        self.videos = list(corpus.videos.values())
        self.video_pos = {v.video_id: i for i, v in enumerate(self.videos)}
        self.positive = np.array([self.video_pos[m.video_id] for m in self.moments])  # type: ignore[index]
        self.spans = np.array([m.span for m in self.moments], np.float64)  # type: ignore[misc]
        self.durations = np.array([v.duration for v in self.videos], np.float64)
        emb = np.stack([t.astype(np.float32).mean(0) for t in self.tokens])  # the sentence embedding (Eq. 1)
        self.emb = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
        self.unreliable: sparse.csr_matrix | None = self._unreliable(cfg) if cfg.true_negatives else None
        self.hard = False  # set by the family: the CM-ANS stage
        self.ans: tuple[np.ndarray, ...] | None = None  # r(q, v) candidates, mined once (MMNFamily.prepare_epoch)
        self.hard_videos: np.ndarray | None = None  # (Q, h) this epoch's negative videos per query (-1: none)
        self.hard_queries: np.ndarray | None = None  # (V, h_q) this epoch's negative queries per video (-1: none)

    def _unreliable(self, cfg: MMNConfig) -> sparse.csr_matrix:
        """The pairs Eq. 4 removes from the negatives: s_te >= t_tr, s_te from the sentence embeddings or
        from ``true_negatives_table``."""
        if not cfg.true_negatives_table:
            return unreliable_pairs(self.emb, self.positive, len(self.videos), cfg.t_tr)
        spec = SimpleNamespace(method="threshold", table=cfg.true_negatives_table, theta=cfg.t_tr)
        related = training_pairs(spec, [m.query_id for m in self.moments])
        return unreliable_from_table(related, self.positive, len(self.videos))

    def __len__(self) -> int:
        return len(self.moments)

    def reopen(self) -> None:
        self.store.reopen()

    def sampler(self, batch_size: int, generator: torch.Generator) -> Iterator[list[int]]:
        order = torch.randperm(len(self.moments), generator=generator).tolist()
        yield from batches_of(order, batch_size)

    def _reliable(self, q: np.ndarray, v: np.ndarray) -> np.ndarray:
        """(len(q), len(v)) bool: v is a reliable negative of q (always True without the filter)."""
        if self.unreliable is None:
            return np.ones((len(q), len(v)), bool)
        return ~self.unreliable[q][:, v].toarray()

    def collate(self, idx: Sequence[int]) -> MMNBatch:
        idx = np.asarray(idx)
        pos = self.positive[idx]
        n = self.cfg.num_clips
        extra = np.zeros(0, np.int64)
        if self.hard:
            if self.hard_videos is None or self.hard_queries is None:
                raise RuntimeError("the hard stage needs drawn negatives (the family's prepare_epoch)")
            hv = self.hard_videos[idx]
            hq = self.hard_queries[pos]
            videos = np.unique(np.concatenate([pos, hv[hv >= 0]]))
            extra = np.setdiff1d(np.unique(hq[hq >= 0]), idx)
        else:
            videos = np.unique(pos)
        col = np.searchsorted(videos, pos)
        qs = np.concatenate([idx, extra])
        b = len(idx)
        iou = np.stack([cell_iou(*self.spans[i], self.durations[p], n) for i, p in zip(idx, pos, strict=True)])
        best = iou.reshape(b, -1).argmax(1)  # the positive moment m_b: the gold moment's cell
        cells = np.stack([best // n, best % n + 1], 1) * (self.durations[pos] / n)[:, None]  # its span, seconds
        if self.hard:
            neg_video = (videos[None, :] == hv[:, :, None]).any(1)
            neg_query = (qs[None, :] == hq[:, :, None]).any(1)
        else:
            neg_video = (videos[None, :] != pos[:, None]) & self._reliable(idx, videos)
            same = self.positive[qs][None, :] == pos[:, None]  # (B, B + E)
            overlap = span_iou(self.spans[qs][None, :, :], cells[:, None, :]) >= self.cfg.sent_removal_iou
            neg_query = ~(same & overlap) & self._reliable(qs, pos).T
            neg_query[np.arange(b), np.arange(b)] = False
        tokens, tmask = pad_tokens([self.tokens[i] for i in qs], self.cfg.max_tokens)
        streams, cmask = load_video_batch(self.store, [self.videos[v].video_id for v in videos], self.max_clips,
                                          self.cfg.subtitle_dim > 0)
        return MMNBatch([self.moments[i].query_id for i in idx], tokens, tmask, streams, cmask,
                        torch.from_numpy(col).long(), torch.from_numpy(iou).float(), torch.from_numpy(neg_video),
                        torch.from_numpy(neg_query))
