"""TVR-Ranking (Ranking-VMR, SIGIR-AP 2024): graded query-moment relevance on TVR's videos.

A file is a JSON list of query-moment pairs::

    {"pair_id": 0, "query_id": 12, "query": "a man opens a door", "video_name": "friends_s01e01_seg02_clip_03",
     "timestamp": [12.3, 17.9], "duration": 61.4, "caption": "...", "similarity": 0.81, "relevance": 3}

``relevance`` is a grade from 0 (not relevant) to 4 (averaged over annotators in val and test, so
it may be fractional); ``caption`` is the TVR description the moment was found by and
``similarity`` its text similarity to the query. :func:`load_tvr_ranking` reads a file into a
graded :class:`MomentRelevance` (value = grade / 4; pairs of grade 0 are counted and left out, as
the metric ignores them); :func:`write_tvr_ranking` writes one in the same format (the synthetic
oracle's table: grade = 4 x oracle relevance). Spans follow the corpus policy: ordered and clamped
to [0, duration], and every change is counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from momentsearch.data.corpus import clean_span
from momentsearch.data.loaders._common import (
    get_field,
    is_finite_number,
    read_json,
    require_file,
)
from momentsearch.data.relevance import MomentRelevance
from momentsearch.errors import AnnotationError
from momentsearch.fileio import write_json

MAX_GRADE = 4.0
FIELDS = ("pair_id", "query_id", "query", "video_name", "timestamp", "duration", "caption", "similarity", "relevance")


@dataclass
class TVRRanking:
    """A TVR-Ranking file: the graded table, each query's text, each video's duration, and counts."""

    relevance: MomentRelevance
    queries: dict[str, str]
    durations: dict[str, float]
    stats: dict[str, int] = field(default_factory=dict)

    def grades(self, i: int) -> np.ndarray:
        """Query ``i``'s grades (0-4) in the order of :meth:`MomentRelevance.row`."""
        return self.relevance.row(i)[3].astype(np.float64) * MAX_GRADE


def load_tvr_ranking(path: str | Path) -> TVRRanking:
    """Read a TVR-Ranking JSON file; a malformed pair names the file and its position and pair_id."""
    p = require_file(path)
    data = read_json(p)
    if not isinstance(data, list):
        raise AnnotationError(p, f"expected a JSON list of query-moment pairs, got {type(data).__name__}")
    queries: dict[str, str] = {}
    durations: dict[str, float] = {}
    rows: dict[str, list[tuple[int, float, float, float]]] = {}
    video_index: dict[str, int] = {}
    seen_pairs: set[str] = set()
    n_zero = n_clamped = n_zero_length = 0
    for i, rec in enumerate(data):
        where = f"[{i}]" + (f" pair_id {rec.get('pair_id')!r}" if isinstance(rec, dict) and "pair_id" in rec else "")

        def err(msg: str, _w: str = where) -> AnnotationError:
            return AnnotationError(p, msg, record=_w)

        if not isinstance(rec, dict):
            raise err(f"expected an object with {', '.join(FIELDS)}, got {type(rec).__name__}")
        pair_id = _id(get_field(rec, "pair_id", (int, str), err), "pair_id", err)
        if pair_id in seen_pairs:
            raise err(f"duplicate pair_id {pair_id!r}")
        seen_pairs.add(pair_id)
        qid = _id(get_field(rec, "query_id", (int, str), err), "query_id", err)
        text = get_field(rec, "query", str, err)
        if queries.setdefault(qid, text) != text:
            raise err(f"query_id {qid!r} has two texts: {queries[qid]!r} and {text!r}")
        video = get_field(rec, "video_name", str, err)
        if not video:
            raise err("empty video_name")
        duration = get_field(rec, "duration", float, err)
        if duration <= 0:
            raise err(f"duration must be > 0, got {duration}")
        if durations.setdefault(video, duration) != duration:
            raise err(f"video {video!r} has two durations: {durations[video]} and {duration}")
        ts = get_field(rec, "timestamp", list, err)
        if len(ts) != 2 or not all(is_finite_number(x) for x in ts):
            raise err(f"timestamp must be [start, end] in finite seconds, got {ts!r}")
        grade = get_field(rec, "relevance", float, err)
        if not 0 <= grade <= MAX_GRADE:
            raise err(f"relevance must lie in [0, {MAX_GRADE:g}], got {grade}")
        rows.setdefault(qid, [])
        if np.float32(grade / MAX_GRADE) == 0:  # 0, or so small that it is 0 as a stored value
            n_zero += 1
            continue
        (st, ed), changed = clean_span(float(ts[0]), float(ts[1]), duration)
        n_clamped += changed
        n_zero_length += ed <= st
        vi = video_index.setdefault(video, len(video_index))
        rows[qid].append((vi, st, ed, grade / MAX_GRADE))
    qids = list(rows)
    rel = MomentRelevance.from_rows(qids, list(video_index), [rows[q] for q in qids])
    stats = {"n_pairs": len(data), "n_queries": len(qids), "n_videos": len(durations), "n_relevant_pairs": rel.nnz,
             "n_grade_zero": n_zero, "n_spans_clamped": int(n_clamped), "n_zero_length_spans": int(n_zero_length)}
    return TVRRanking(rel, queries, durations, stats)


def _id(value: Any, name: str, err: Any) -> str:
    out = str(value)
    if not out:
        raise err(f"empty {name}")
    return out


def write_tvr_ranking(
    path: str | Path, rel: MomentRelevance, queries: Mapping[str, str], durations: Mapping[str, float],
    captions: Mapping[tuple[str, float, float], str] | None = None,
) -> int:
    """Write ``rel`` as a TVR-Ranking file (atomically); returns the number of pairs.

    grade = 4 x value (rounded to 1e-4); ``similarity`` holds the value itself; ``caption`` is
    ``captions[(video, start, end)]`` where given, else "". Integer-looking query ids are written as
    integers, as TVR-Ranking's are.
    """
    missing = [q for q in rel.query_ids if q not in queries]
    if missing:
        raise KeyError(f"{len(missing)} queries have no text, e.g. {missing[:3]}")
    captions = captions or {}
    out: list[dict[str, Any]] = []
    for i, qid in enumerate(rel.query_ids):
        v, s, e, val = rel.row(i)
        for vi, st, ed, x in zip(v.tolist(), s.tolist(), e.tolist(), val.tolist(), strict=True):
            video = rel.video_ids[vi]
            out.append({
                "pair_id": len(out), "query_id": int(qid) if qid.isdigit() else qid, "query": queries[qid],
                "video_name": video, "timestamp": [st, ed], "duration": float(durations[video]),
                "caption": captions.get((video, st, ed), ""), "similarity": round(float(x), 6),
                "relevance": round(float(x) * MAX_GRADE, 4),
            })
    write_json(path, out)
    return len(out)
