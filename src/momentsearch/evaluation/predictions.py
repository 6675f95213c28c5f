"""Ranked predictions per query, and TVR's submission JSON.

:class:`~momentsearch.search.ranked.RankedMoments` (what a search returns) holds, for Q queries, up to K
ranked (video, start, end, score) entries; evaluation ignores scores, as TVR's does.

TVR's submission file::

    {"video2idx": {"vid_name": idx, ...},
     "VCMR": [{"desc_id": 90200, "desc": "...", "predictions": [[idx, st, ed, score], ...]}, ...],
     "SVMR": [...], "VR": [...]}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from momentsearch.errors import PredictionError
from momentsearch.fileio import atomic_open, gc_paused
from momentsearch.search.ranked import DEFAULT_MAX_PREDICTIONS, RankedMoments

TASKS = ("VCMR", "SVMR", "VR")


@dataclass
class Submission:
    """A TVR-format submission: one :class:`RankedMoments` per task, sharing ``video2idx``."""

    video2idx: dict[str, int]
    tasks: dict[str, RankedMoments] = field(default_factory=dict)
    source: str | None = None  # the file it was read from: errors while evaluating it name the file

    def to_json(self, max_k: int = DEFAULT_MAX_PREDICTIONS) -> dict[str, Any]:
        obj: dict[str, Any] = {"video2idx": self.video2idx}
        for task in TASKS:
            if task in self.tasks:
                obj[task] = self.tasks[task].to_tvr_entries(max_k)
        return obj

    def write(self, path: str | Path, max_k: int = DEFAULT_MAX_PREDICTIONS) -> None:
        """Write atomically; top ``max_k`` (100) predictions per query, as TVR expects."""
        with gc_paused():
            data = orjson.dumps(self.to_json(max_k))
        with atomic_open(path, "wb") as fh:
            fh.write(data)

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
        with gc_paused():
            return cls._read(p, max_k)

    @classmethod
    def _read(cls, p: Path, max_k: int | None) -> Submission:
        raw = p.read_bytes()
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            line = raw.count(b"\n", 0, e.pos) + 1
            raise PredictionError(f"{p}:{line}: invalid JSON: {e.msg}") from None
        if not isinstance(obj, dict) or "video2idx" not in obj:
            raise PredictionError(f"{p}: expected an object with 'video2idx' and at least one of {TASKS}")
        v2i = obj["video2idx"]
        if not isinstance(v2i, dict) or not all(isinstance(i, int) and not isinstance(i, bool) and abs(i) <= 2 ** 53
                                                for i in v2i.values()):
            raise PredictionError(f"{p}: 'video2idx' must map video names to integer indices (of at most 2^53)")
        idx2vid: dict[int, str] = {}
        for name, i in v2i.items():
            if i in idx2vid:
                raise PredictionError(f"{p}: video2idx gives index {i} to both {idx2vid[i]!r} and {name!r}")
            idx2vid[i] = name
        # internal index space: 0..V-1 in the order of video2idx; an unknown raw index becomes -2 (a miss)
        video_ids = list(v2i)
        raw_idx = np.array(list(v2i.values()), np.int64)
        tasks = {}
        for task in TASKS:
            if task in obj:
                tasks[task] = _read_task(p, task, obj[task], video_ids, raw_idx, max_k)
        if not tasks:
            raise PredictionError(f"{p}: no task lists; expected at least one of {TASKS}")
        return cls(dict(v2i), tasks, str(p))


def _read_task(
    p: Path, task: str, entries: Any, video_ids: list[str], raw_idx: np.ndarray, max_k: int | None
) -> RankedMoments:
    if not isinstance(entries, list):
        raise PredictionError(f"{p}: '{task}' must be a list of per-query entries")
    qids, texts, rows = [], [], []
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
        rows.append(_prediction_array(where, preds[:max_k] if max_k else preds))
        qids.append(qid)
        texts.append(str(e.get("desc", "")))
    k = max((len(r) for r in rows), default=0)
    vid = np.full((len(rows), k), -1, np.int64)
    st, ed = np.zeros((len(rows), k)), np.zeros((len(rows), k))
    sc = np.full((len(rows), k), np.nan)
    for i, r in enumerate(rows):
        n = len(r)
        vid[i, :n], st[i, :n], ed[i, :n], sc[i, :n] = r[:, 0], r[:, 1], r[:, 2], r[:, 3]
    lengths = np.array([len(r) for r in rows], np.int64)
    return RankedMoments(qids, video_ids, _map_video_indices(vid, lengths, raw_idx), st, ed, sc, texts)


def _map_video_indices(raw: np.ndarray, lengths: np.ndarray, video2idx_values: np.ndarray) -> np.ndarray:
    """Raw submission indices -> positions in video2idx: -2 for an index video2idx lacks
    (a prediction that can never match, but still takes its rank), -1 for padding."""
    real = np.arange(raw.shape[1])[None, :] < lengths[:, None]
    out = np.where(real, -2, -1).astype(np.int64)
    if len(video2idx_values):
        order = np.argsort(video2idx_values)
        sorted_vals = video2idx_values[order]
        pos = np.clip(np.searchsorted(sorted_vals, raw), 0, len(sorted_vals) - 1)
        known = real & (sorted_vals[pos] == raw)
        out[known] = order[pos[known]]
    return out


def _prediction_array(where: str, preds: list[Any]) -> np.ndarray:
    """[[video_idx, st, ed, score], ...] -> (n, 4) float64 (score NaN where absent); checked."""
    if not preds:
        return np.zeros((0, 4))
    try:
        arr = np.array(preds, dtype=np.float64)
        ok = arr.ndim == 2 and arr.shape[1] >= 3
    except (TypeError, ValueError):
        ok = False
    if not ok:  # find the offending row for the message
        for r, pr in enumerate(preds):
            if (
                not isinstance(pr, list) or len(pr) < 3
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in pr[:3])
            ):
                raise PredictionError(f"{where}.predictions[{r}]: expected [video_idx, st, ed, score], got {pr!r}")
        raise PredictionError(f"{where}: predictions must all have the same length [video_idx, st, ed, score]")
    bad = ~np.isfinite(arr[:, :3]).all(axis=1)
    if bad.any():
        r = int(bad.argmax())
        raise PredictionError(f"{where}.predictions[{r}]: NaN or inf in {preds[r]!r}")
    bad = (arr[:, 0] != np.round(arr[:, 0])) | (np.abs(arr[:, 0]) > 2.0 ** 53)
    if bad.any():
        r = int(bad.argmax())
        raise PredictionError(f"{where}.predictions[{r}]: the video index must be an integer of at most 2^53, "
                              f"got {preds[r][0]!r}")
    if arr.shape[1] == 3:
        arr = np.column_stack([arr, np.full(len(arr), np.nan)])
    return arr[:, :4]
