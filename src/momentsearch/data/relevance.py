"""Graded many-to-many relevance of queries to moments, stored sparse (CSR by query).

Row ``i`` lists the moments (video, start, end) that query ``i`` is relevant to, each with a
value in (0, 1]. The one annotated pair is the special case :meth:`MomentRelevance.annotated`;
the synthetic oracle and the relevance layer build fuller tables. Video-level relevance is the
maximum over a video's moments (MVMR, Eq. 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from momentsearch.data.corpus import Corpus
from momentsearch.errors import RelevanceTableError
from momentsearch.fileio import atomic_path
from momentsearch.readers import check_array, read_npz


@dataclass
class MomentRelevance:
    """CSR table: entries ``indptr[i]:indptr[i+1]`` belong to ``query_ids[i]``, sorted by video."""

    query_ids: list[str]
    video_ids: list[str]
    indptr: np.ndarray  # (Q+1,) int64
    video_idx: np.ndarray  # (N,) int64, index into video_ids
    start: np.ndarray  # (N,) float64 seconds
    end: np.ndarray  # (N,) float64 seconds
    value: np.ndarray  # (N,) float32 in (0, 1]

    def __post_init__(self) -> None:
        q = len(self.query_ids)
        n = len(self.video_idx)
        if self.indptr.shape != (q + 1,) or self.indptr[0] != 0 or self.indptr[-1] != n:
            raise ValueError(f"indptr must have {q + 1} entries from 0 to {n}")
        if np.any(np.diff(self.indptr) < 0):
            raise ValueError("indptr must be non-decreasing")
        for name in ("start", "end", "value"):
            if getattr(self, name).shape != (n,):
                raise ValueError(f"{name} must have {n} entries")
        if n and (self.video_idx.min() < 0 or self.video_idx.max() >= len(self.video_ids)):
            raise ValueError("video_idx out of range of video_ids")
        if n and not (np.all(self.value > 0) and np.all(self.value <= 1) and np.isfinite(self.value).all()):
            raise ValueError("relevance values must lie in (0, 1]")
        # sort each row by video so that (query, video) groups are contiguous
        row = np.repeat(np.arange(q), np.diff(self.indptr))
        order = np.lexsort((self.start, self.video_idx, row))
        if not np.array_equal(order, np.arange(n)):
            self.video_idx, self.start, self.end, self.value = (
                a[order] for a in (self.video_idx, self.start, self.end, self.value)
            )

    # ---- construction -----------------------------------------------------------------------
    @classmethod
    def from_rows(
        cls,
        query_ids: Sequence[str],
        video_ids: Sequence[str],
        rows: Sequence[Sequence[tuple[int, float, float, float]]],
    ) -> MomentRelevance:
        """``rows[i]`` = [(video_idx, start, end, value), ...] for query i."""
        indptr = np.zeros(len(rows) + 1, dtype=np.int64)
        indptr[1:] = np.cumsum([len(r) for r in rows])
        flat = [e for r in rows for e in r]
        arr = np.asarray(flat, dtype=np.float64).reshape(-1, 4)
        return cls(
            list(query_ids),
            list(video_ids),
            indptr,
            arr[:, 0].astype(np.int64),
            arr[:, 1].copy(),
            arr[:, 2].copy(),
            arr[:, 3].astype(np.float32),
        )

    @classmethod
    def annotated(cls, corpus: Corpus, video_ids: Sequence[str] | None = None) -> MomentRelevance:
        """The annotated pairs only, value 1.0 (each annotator span is one relevant moment)."""
        vids = list(video_ids) if video_ids is not None else list(corpus.videos)
        index = {v: i for i, v in enumerate(vids)}
        rows = [
            [(index[m.video_id], st, ed, 1.0) for st, ed in m.spans] if m.has_ground_truth else []
            for m in corpus.moments
        ]
        return cls.from_rows([m.query_id for m in corpus.moments], vids, rows)

    # ---- queries -------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.query_ids)

    @property
    def nnz(self) -> int:
        return int(len(self.video_idx))

    def row(self, i: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        a, b = self.indptr[i], self.indptr[i + 1]
        return self.video_idx[a:b], self.start[a:b], self.end[a:b], self.value[a:b]

    def row_ids(self) -> np.ndarray:
        """(N,) the query index of every entry."""
        return np.repeat(np.arange(len(self.query_ids)), np.diff(self.indptr))

    def threshold(self, min_value: float) -> MomentRelevance:
        """Keep entries with value >= ``min_value``."""
        keep = self.value >= np.float32(min_value)
        rows = self.row_ids()[keep]
        indptr = np.zeros(len(self.query_ids) + 1, dtype=np.int64)
        np.add.at(indptr, rows + 1, 1)
        return MomentRelevance(
            self.query_ids, self.video_ids, np.cumsum(indptr), self.video_idx[keep],
            self.start[keep], self.end[keep], self.value[keep],
        )

    def select(self, query_ids: Sequence[str], video_ids: Sequence[str] | None = None) -> MomentRelevance:
        """The rows of ``query_ids`` (in that order), keeping only entries on ``video_ids`` if given.

        Raises KeyError naming the first query the table lacks.
        """
        row_of = {q: i for i, q in enumerate(self.query_ids)}
        missing = [q for q in query_ids if q not in row_of]
        if missing:
            raise KeyError(f"{len(missing)} queries are not in the relevance table, e.g. {missing[:3]}")
        rows = np.array([row_of[q] for q in query_ids], np.int64)
        lens = np.diff(self.indptr)[rows]
        take = np.concatenate([np.arange(self.indptr[r], self.indptr[r + 1]) for r in rows]) if len(rows) else np.zeros(0, np.int64)
        take = take.astype(np.int64)
        new_vids = list(self.video_ids) if video_ids is None else list(video_ids)
        vmap = {v: i for i, v in enumerate(new_vids)}
        remap = np.array([vmap.get(v, -1) for v in self.video_ids], np.int64)
        vid = remap[self.video_idx[take]] if len(take) else np.zeros(0, np.int64)
        keep = vid >= 0
        row_new = np.repeat(np.arange(len(rows)), lens)[keep]
        indptr = np.zeros(len(rows) + 1, np.int64)
        np.add.at(indptr, row_new + 1, 1)
        return MomentRelevance(list(query_ids), new_vids, np.cumsum(indptr), vid[keep], self.start[take][keep],
                               self.end[take][keep], self.value[take][keep])

    def video_relevance(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query index, video index, value) triples: max over each video's moments."""
        rows = self.row_ids()
        if not len(rows):
            return rows, rows.copy(), np.zeros(0, np.float32)
        key = rows * len(self.video_ids) + self.video_idx
        # entries are sorted by (row, video): group boundaries where key changes
        starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
        vmax = np.maximum.reduceat(self.value, starts)
        return rows[starts], self.video_idx[starts], vmax

    def dense_video_relevance(self) -> np.ndarray:
        """(Q, V) float32 matrix of video-level relevance (for small corpora and tests)."""
        q, v, val = self.video_relevance()
        out = np.zeros((len(self.query_ids), len(self.video_ids)), np.float32)
        out[q, v] = val
        return out

    # ---- storage -------------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            np.savez_compressed(
                fh,
                query_ids=np.asarray(self.query_ids, dtype=str),
                video_ids=np.asarray(self.video_ids, dtype=str),
                indptr=self.indptr, video_idx=self.video_idx,
                start=self.start, end=self.end, value=self.value,
            )

    @classmethod
    def load(cls, path: str | Path) -> MomentRelevance:
        """A table written by :meth:`save`; any other archive, a missing array, an array of another kind
        or length, or values out of range is a :class:`RelevanceTableError` naming the file and array."""
        p = Path(path)

        def error(msg: str) -> RelevanceTableError:
            return RelevanceTableError(msg if msg.startswith(str(p)) else f"{p}: {msg}")

        z = read_npz(p, error, ("query_ids", "video_ids", "indptr", "video_idx", "start", "end", "value"))
        ids = {k: check_array(z[k], f"{p} [{k}]", error, ndim=1, kinds="U") for k in ("query_ids", "video_ids")}
        indptr = check_array(z["indptr"], f"{p} [indptr]", error, ndim=1, kinds="iu", length=len(ids["query_ids"]) + 1)
        n = int(indptr[-1])
        idx = check_array(z["video_idx"], f"{p} [video_idx]", error, ndim=1, kinds="iu")
        cols = {"video_idx": idx, **{k: check_array(z[k], f"{p} [{k}]", error, ndim=1, kinds=kinds, length=len(idx),
                                                    finite=True)
                                     for k, kinds in (("start", "fi"), ("end", "fi"), ("value", "f"))}}
        if len(cols["video_idx"]) != n:
            raise error(f"indptr ends at {n} but the table has {len(cols['video_idx'])} entries")
        if (cols["start"] < 0).any() or (cols["end"] < cols["start"]).any():
            raise error("a moment starts before 0 s or ends before it starts")
        try:
            return cls(ids["query_ids"].tolist(), ids["video_ids"].tolist(), indptr.astype(np.int64),
                       cols["video_idx"].astype(np.int64), cols["start"].astype(np.float64),
                       cols["end"].astype(np.float64), cols["value"].astype(np.float32))
        except ValueError as e:  # the table's own checks: indptr, index ranges, values in (0, 1]
            raise error(str(e)) from None
