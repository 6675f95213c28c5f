"""Ranked moments: for Q queries, up to K ranked (video, start, end, score) entries as padded (Q, K)
arrays (video index -1 pads). The list order is the ranking. What a search returns and what evaluation
and TVR's submission files (``evaluation.predictions``) read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

DEFAULT_MAX_PREDICTIONS = 100


@dataclass(frozen=True)
class Hit:
    """One ranked moment: ``start`` and ``end`` in seconds; a higher ``score`` is better (its scale
    is the model's own: compare scores within one query only)."""

    video_id: str
    start: float
    end: float
    score: float


@dataclass
class RankedMoments:
    """Q ranked lists of (video index, start s, end s, score), padded to K with video index -1."""

    query_ids: list[str]
    video_ids: list[str]  # video index -> video id
    video_idx: np.ndarray  # (Q, K) int64
    start: np.ndarray  # (Q, K) float64
    end: np.ndarray  # (Q, K) float64
    score: np.ndarray  # (Q, K) float64 (nan in padding)
    query_texts: list[str] | None = None

    def __post_init__(self) -> None:
        shape = self.video_idx.shape
        if len(shape) != 2 or shape[0] != len(self.query_ids):
            raise ValueError(f"video_idx must be (Q={len(self.query_ids)}, K), got {shape}")
        for name, arr in (("start", self.start), ("end", self.end), ("score", self.score)):
            if arr.shape != shape:
                raise ValueError(f"{name} must have shape {shape}")

    @classmethod
    def from_lists(
        cls,
        query_ids: Sequence[str],
        video_ids: Sequence[str],
        lists: Sequence[Sequence[Sequence[float]]],
        max_k: int | None = None,
        query_texts: Sequence[str] | None = None,
    ) -> RankedMoments:
        """``lists[i]`` = [(video_idx, start, end, score), ...] in rank order."""
        k = max((len(x) for x in lists), default=0)
        if max_k is not None:
            k = min(k, max_k)
        q = len(lists)
        vid = np.full((q, k), -1, np.int64)
        st = np.zeros((q, k))
        ed = np.zeros((q, k))
        sc = np.full((q, k), np.nan)
        for i, row in enumerate(lists):
            row = row[:k]
            if not len(row):
                continue
            arr = np.asarray(row, dtype=np.float64)
            vid[i, : len(row)] = arr[:, 0].astype(np.int64)
            st[i, : len(row)] = arr[:, 1]
            ed[i, : len(row)] = arr[:, 2]
            sc[i, : len(row)] = arr[:, 3] if arr.shape[1] > 3 else np.nan
        return cls(list(query_ids), list(video_ids), vid, st, ed, sc, list(query_texts) if query_texts else None)

    @property
    def k(self) -> int:
        return self.video_idx.shape[1]

    def truncate(self, k: int) -> RankedMoments:
        return RankedMoments(
            self.query_ids, self.video_ids, self.video_idx[:, :k], self.start[:, :k], self.end[:, :k],
            self.score[:, :k], self.query_texts,
        )

    def hits(self, i: int) -> list[Hit]:
        """Query ``i``'s ranked moments as :class:`Hit` (video ids, seconds), best first."""
        n = int((self.video_idx[i] >= 0).sum())
        ids = self.video_ids
        return [Hit(ids[v], s, e, c) for v, s, e, c in zip(self.video_idx[i, :n].tolist(), self.start[i, :n].tolist(),
                                                            self.end[i, :n].tolist(), self.score[i, :n].tolist(),
                                                            strict=True)]

    def row_of(self) -> dict[str, int]:
        return {q: i for i, q in enumerate(self.query_ids)}

    def to_tvr_entries(self, max_k: int = DEFAULT_MAX_PREDICTIONS) -> list[dict[str, Any]]:
        out = []
        texts = self.query_texts or [""] * len(self.query_ids)
        n_valid = np.minimum((self.video_idx >= 0).sum(axis=1), max_k)
        score = np.where(np.isnan(self.score), None, self.score).tolist()  # NaN -> null
        vid, st, ed = self.video_idx.tolist(), self.start.tolist(), self.end.tolist()
        for i, qid in enumerate(self.query_ids):
            n = int(n_valid[i])
            preds = [list(p) for p in zip(vid[i][:n], st[i][:n], ed[i][:n], score[i][:n], strict=True)]
            out.append({"desc_id": _desc_id(qid), "desc": texts[i], "predictions": preds})
        return out


def _desc_id(query_id: str) -> int | str:
    """TVR's desc_ids are ints; ids that look like ints are written as ints."""
    return int(query_id) if query_id.lstrip("-").isdigit() else query_id
