"""Ranked predictions per query, and TVR's submission JSON.

:class:`RankedMoments` holds, for Q queries, up to K ranked (video, start, end, score) entries as
padded (Q, K) arrays (video index -1 pads). The list order is the ranking; evaluation ignores
scores, as TVR's does.

TVR's submission file::

    {"video2idx": {"vid_name": idx, ...},
     "VCMR": [{"desc_id": 90200, "desc": "...", "predictions": [[idx, st, ed, score], ...]}, ...],
     "SVMR": [...], "VR": [...]}
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from momentsearch.errors import PredictionError
from momentsearch.fileio import write_json

TASKS = ("VCMR", "SVMR", "VR")
DEFAULT_MAX_PREDICTIONS = 100


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
        for name in ("start", "end", "score"):
            if getattr(self, name).shape != shape:
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

    def row_of(self) -> dict[str, int]:
        return {q: i for i, q in enumerate(self.query_ids)}

    def to_tvr_entries(self, max_k: int = DEFAULT_MAX_PREDICTIONS) -> list[dict[str, Any]]:
        out = []
        texts = self.query_texts or [""] * len(self.query_ids)
        for i, qid in enumerate(self.query_ids):
            n = int((self.video_idx[i] >= 0).sum())
            n = min(n, max_k)
            preds = [
                [int(self.video_idx[i, j]), float(self.start[i, j]), float(self.end[i, j]),
                 None if math.isnan(self.score[i, j]) else float(self.score[i, j])]
                for j in range(n)
            ]
            out.append({"desc_id": _desc_id(qid), "desc": texts[i], "predictions": preds})
        return out


def _desc_id(query_id: str) -> int | str:
    """TVR's desc_ids are ints; ids that look like ints are written as ints."""
    return int(query_id) if query_id.lstrip("-").isdigit() else query_id


@dataclass
class Submission:
    """A TVR-format submission: one :class:`RankedMoments` per task, sharing ``video2idx``."""

    video2idx: dict[str, int]
    tasks: dict[str, RankedMoments] = field(default_factory=dict)

    def to_json(self, max_k: int = DEFAULT_MAX_PREDICTIONS) -> dict[str, Any]:
        obj: dict[str, Any] = {"video2idx": self.video2idx}
        for task in TASKS:
            if task in self.tasks:
                obj[task] = self.tasks[task].to_tvr_entries(max_k)
        return obj

    def write(self, path: str | Path, max_k: int = DEFAULT_MAX_PREDICTIONS) -> None:
        """Write atomically; top ``max_k`` (100) predictions per query, as TVR expects."""
        write_json(path, self.to_json(max_k), indent=None)

    @classmethod
    def from_ranked(cls, tasks: Mapping[str, RankedMoments]) -> Submission:
        if not tasks:
            raise ValueError("a submission needs at least one task")
        first = next(iter(tasks.values()))
        for t, r in tasks.items():
            if t not in TASKS:
                raise ValueError(f"unknown task {t!r}; tasks are {TASKS}")
            if r.video_ids != first.video_ids:
                raise ValueError("all tasks of a submission must share one video index")
        return cls({v: i for i, v in enumerate(first.video_ids)}, dict(tasks))

    @classmethod
    def read(cls, path: str | Path, max_k: int | None = None) -> Submission:
        """Read a TVR submission; errors name the file, the task and the entry at fault."""
        p = Path(path)
        if not p.is_file():
            raise PredictionError(f"{p}: prediction file not found")
        try:
            obj = json.loads(p.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise PredictionError(f"{p}:{e.lineno}: invalid JSON: {e.msg}") from None
        if not isinstance(obj, dict) or "video2idx" not in obj:
            raise PredictionError(f"{p}: expected an object with 'video2idx' and at least one of {TASKS}")
        v2i = obj["video2idx"]
        if not isinstance(v2i, dict) or not all(isinstance(i, int) for i in v2i.values()):
            raise PredictionError(f"{p}: 'video2idx' must map video names to integer indices")
        idx2vid: dict[int, str] = {}
        for name, i in v2i.items():
            if i in idx2vid:
                raise PredictionError(f"{p}: video2idx gives index {i} to both {idx2vid[i]!r} and {name!r}")
            idx2vid[i] = name
        # internal index space: 0..V-1 in the order of video2idx; raw indices are mapped onto it
        video_ids = list(v2i)
        raw_to_internal = {v2i[name]: j for j, name in enumerate(video_ids)}
        tasks = {}
        for task in TASKS:
            if task not in obj:
                continue
            entries = obj[task]
            if not isinstance(entries, list):
                raise PredictionError(f"{p}: '{task}' must be a list of per-query entries")
            qids, texts, lists = [], [], []
            seen: set[str] = set()
            for n, e in enumerate(entries):
                where = f"{p}: {task}[{n}]"
                if not isinstance(e, dict) or "desc_id" not in e or "predictions" not in e:
                    raise PredictionError(f"{where}: needs 'desc_id' and 'predictions'")
                qid = str(e["desc_id"])
                if qid in seen:
                    raise PredictionError(f"{where}: desc_id {e['desc_id']!r} appears twice")
                seen.add(qid)
                preds = e["predictions"]
                if not isinstance(preds, list):
                    raise PredictionError(f"{where}: 'predictions' must be a list")
                rows = []
                for r, pr in enumerate(preds[:max_k] if max_k else preds):
                    if (
                        not isinstance(pr, list) or len(pr) < 3
                        or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in pr[:3])
                    ):
                        raise PredictionError(f"{where}.predictions[{r}]: expected [video_idx, st, ed, score], got {pr!r}")
                    if not all(math.isfinite(x) for x in pr[:3]):
                        raise PredictionError(f"{where}.predictions[{r}]: NaN or inf in {pr!r}")
                    score = pr[3] if len(pr) > 3 and isinstance(pr[3], (int, float)) else float("nan")
                    # an index that video2idx lacks can never match: keep it as a miss (-2)
                    rows.append((raw_to_internal.get(int(pr[0]), -2), pr[1], pr[2], score))
                qids.append(qid)
                texts.append(str(e.get("desc", "")))
                lists.append(rows)
            tasks[task] = RankedMoments.from_lists(qids, video_ids, lists, query_texts=texts)
        if not tasks:
            raise PredictionError(f"{p}: no task lists; expected at least one of {TASKS}")
        return cls(dict(v2i), tasks)
