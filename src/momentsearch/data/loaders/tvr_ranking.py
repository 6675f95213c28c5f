"""TVR-Ranking (Ranking-VMR, SIGIR-AP 2024): graded query-moment relevance on TVR's videos.

The released files (``val.json``, ``test.json``, ``train_top*.json``; JSON, or JSON Lines with one
query a line) group the moments per query, as the reference loader (``modules/dataset_tvrr.py``:
``expand_annotations``, ``get_relevant_moment_gt``) reads them::

    {"query_id": 12, "query": "a man opens a door",
     "relevant_moment": [{"pair_id": 0, "video_name": "friends_s01e01_seg02_clip_03", "timestamp": [12.3, 17.9],
                          "duration": 61.4, "caption": "...", "similarity": 0.81, "relevance": 3}, ...]}

The data card also describes a flat list of pairs (each record a moment with ``query_id`` and
``query``): both layouts are read. ``relevance`` is a grade from 0 (not relevant) to 4 (averaged
over annotators in val and test, so it may be fractional); ``caption`` is the TVR description the
moment was found by and ``similarity`` its text similarity to the query.

:func:`load_tvr_ranking` keeps two views: ``moments``, each query's moments exactly as the file has
them (grade 0 included, spans not clamped), which NDCG@K,IoU scores as the reference does; and a
graded :class:`MomentRelevance` (value = grade / 4, grade-0 moments counted and left out, spans ordered
and clamped to [0, duration] with every change counted), for training and relevance tables.
:func:`write_tvr_ranking` writes the released (grouped) layout, or the flat one.
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
    iter_jsonl,
    optional_field,
    parse_json,
    read_text,
    require_file,
)
from momentsearch.data.relevance import MomentRelevance
from momentsearch.errors import AnnotationError
from momentsearch.fileio import write_json

MAX_GRADE = 4.0
FIELDS = ("pair_id", "query_id", "query", "video_name", "timestamp", "duration", "caption", "similarity", "relevance")
MOMENT_FIELDS = ("video_name", "timestamp", "duration", "relevance")
LAYOUTS = ("grouped", "flat")
EXPECTED = "a JSON list (or JSON Lines) of queries with a relevant_moment list, or of query-moment pairs"
GradedMoment = tuple[str, float, float, float]  # (video name, start, end, grade 0-4) as the file has them


@dataclass
class TVRRanking:
    """A TVR-Ranking file: each query's moments as written, the graded table, each query's text,
    each video's duration, counts, and the layout it was read from."""

    relevance: MomentRelevance
    queries: dict[str, str]
    durations: dict[str, float]
    stats: dict[str, int] = field(default_factory=dict)
    moments: dict[str, list[GradedMoment]] = field(default_factory=dict)
    layout: str = "flat"

    def grades(self, i: int) -> np.ndarray:
        """Query ``i``'s grades (0-4) in the order of :meth:`MomentRelevance.row`."""
        return self.relevance.row(i)[3].astype(np.float64) * MAX_GRADE


def _records(p: Path) -> list[tuple[dict[str, Any], str | None, int | None]]:
    """(record, its position, its line) for a JSON list or for JSON Lines."""
    text = read_text(p)
    first = text.lstrip()[:1]
    if first == "[":
        recs = [(rec, f"[{i}]", None) for i, rec in enumerate(parse_json(p, text))]
    elif first == "{":
        recs = [(rec, None, n) for n, rec in iter_jsonl(p)]
    else:
        raise AnnotationError(p, f"expected {EXPECTED}")
    for rec, pos, line in recs:
        if not isinstance(rec, dict):
            raise AnnotationError(p, f"expected {EXPECTED}; this record is a {type(rec).__name__}", record=pos, line=line)
    if recs and not {"relevant_moment", "pair_id", "video_name"} & set(recs[0][0]):
        raise AnnotationError(p, f"expected {EXPECTED}; the first record has the keys {sorted(recs[0][0])[:8]}",
                              record=recs[0][1], line=recs[0][2])
    return recs


def load_tvr_ranking(path: str | Path) -> TVRRanking:
    """Read a TVR-Ranking file in either layout; a malformed record names the file, its position or
    line, and the pair_id or query_id."""
    p = require_file(path)
    records = _records(p)
    layout = "grouped" if records and "relevant_moment" in records[0][0] else "flat"
    queries: dict[str, str] = {}
    durations: dict[str, float] = {}
    moments: dict[str, list[GradedMoment]] = {}
    rows: dict[str, list[tuple[int, float, float, float]]] = {}
    video_index: dict[str, int] = {}
    seen_pairs: set[str] = set()
    counts = {"n_pairs": 0, "n_grade_zero": 0, "n_spans_clamped": 0, "n_zero_length_spans": 0}
    for rec, pos, line in records:
        ident = "pair_id" if layout == "flat" else "query_id"
        where = pos if ident not in rec else f"{pos or ''} {ident} {rec.get(ident)!r}".strip()

        def err(msg: str, _w: str | None = where, _l: int | None = line) -> AnnotationError:
            return AnnotationError(p, msg, record=_w, line=_l)

        if ("relevant_moment" in rec) != (layout == "grouped"):
            raise err(f"mixes the two layouts: the first record is {layout}, this one is not")
        qid = _id(get_field(rec, "query_id", (int, str), err), "query_id", err)
        text = get_field(rec, "query", str, err)
        if layout == "grouped":
            if qid in queries:
                raise err(f"query_id {qid!r} appears twice")
            items = get_field(rec, "relevant_moment", list, err)
        else:
            if queries.setdefault(qid, text) != text:
                raise err(f"query_id {qid!r} has two texts: {queries[qid]!r} and {text!r}")
            items = [rec]
        queries[qid] = text
        moments.setdefault(qid, [])
        rows.setdefault(qid, [])
        for j, m in enumerate(items):
            merr = err if layout == "flat" else (
                lambda msg, _w=where, _l=line, _j=j: AnnotationError(p, f"relevant_moment[{_j}]: {msg}", record=_w, line=_l))
            if not isinstance(m, dict):
                raise merr(f"expected an object with {', '.join(MOMENT_FIELDS)}, got {type(m).__name__}")
            pair = optional_field(m, "pair_id", (int, str), merr) if layout == "grouped" else get_field(m, "pair_id", (int, str), merr)
            if pair is not None:
                pair = _id(pair, "pair_id", merr)
                if pair in seen_pairs:
                    raise merr(f"duplicate pair_id {pair!r}")
                seen_pairs.add(pair)
            video, st, ed, duration, grade = _moment(m, merr)
            if durations.setdefault(video, duration) != duration:
                raise merr(f"video {video!r} has two durations: {durations[video]} and {duration}")
            counts["n_pairs"] += 1
            moments[qid].append((video, st, ed, grade))
            if np.float32(grade / MAX_GRADE) == 0:  # 0, or so small that it is 0 as a stored value
                counts["n_grade_zero"] += 1
                continue
            (cst, ced), changed = clean_span(st, ed, duration)
            counts["n_spans_clamped"] += changed
            counts["n_zero_length_spans"] += ced <= cst
            rows[qid].append((video_index.setdefault(video, len(video_index)), cst, ced, grade / MAX_GRADE))
    qids = list(rows)
    rel = MomentRelevance.from_rows(qids, list(video_index), [rows[q] for q in qids])
    stats = {"n_pairs": counts["n_pairs"], "n_queries": len(qids), "n_videos": len(durations),
             "n_relevant_pairs": rel.nnz, "n_grade_zero": counts["n_grade_zero"],
             "n_spans_clamped": int(counts["n_spans_clamped"]), "n_zero_length_spans": int(counts["n_zero_length_spans"])}
    return TVRRanking(rel, queries, durations, stats, moments, layout)


def _moment(m: dict[str, Any], err: Any) -> tuple[str, float, float, float, float]:
    """(video, start, end, duration, grade) of one moment record, checked; the span as written."""
    video = get_field(m, "video_name", str, err)
    if not video:
        raise err("empty video_name")
    duration = get_field(m, "duration", float, err)
    if duration <= 0:
        raise err(f"duration must be > 0, got {duration}")
    ts = get_field(m, "timestamp", list, err)
    if len(ts) != 2 or not all(is_finite_number(x) for x in ts):
        raise err(f"timestamp must be [start, end] in finite seconds, got {ts!r}")
    grade = get_field(m, "relevance", float, err)
    if not 0 <= grade <= MAX_GRADE:
        raise err(f"relevance must lie in [0, {MAX_GRADE:g}], got {grade}")
    return video, float(ts[0]), float(ts[1]), duration, float(grade)


def _id(value: Any, name: str, err: Any) -> str:
    out = str(value)
    if not out:
        raise err(f"empty {name}")
    return out


def write_tvr_ranking(
    path: str | Path, rel: MomentRelevance, queries: Mapping[str, str], durations: Mapping[str, float],
    captions: Mapping[tuple[str, float, float], str] | None = None, layout: str = "grouped",
) -> int:
    """Write ``rel`` as a TVR-Ranking file (atomically); returns the number of pairs.

    ``layout="grouped"`` (the default) writes the released files' layout, a JSON list of queries each
    with its ``relevant_moment`` list, which the reference code reads; ``"flat"`` a list of pairs.
    grade = 4 x value (rounded to 1e-4); ``similarity`` holds the value itself; ``caption`` is
    ``captions[(video, start, end)]`` where given, else "". Integer-looking query ids are written as
    integers, as TVR-Ranking's are.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    missing = [q for q in rel.query_ids if q not in queries]
    if missing:
        raise KeyError(f"{len(missing)} queries have no text, e.g. {missing[:3]}")
    captions = captions or {}
    out: list[dict[str, Any]] = []
    n = 0
    for i, qid in enumerate(rel.query_ids):
        v, s, e, val = rel.row(i)
        query = {"query_id": int(qid) if qid.isdigit() else qid, "query": queries[qid]}
        group = []
        for vi, st, ed, x in zip(v.tolist(), s.tolist(), e.tolist(), val.tolist(), strict=True):
            video = rel.video_ids[vi]
            group.append({
                "pair_id": n, "video_name": video, "timestamp": [st, ed], "duration": float(durations[video]),
                "caption": captions.get((video, st, ed), ""), "similarity": round(float(x), 6),
                "relevance": round(float(x) * MAX_GRADE, 4),
            })
            n += 1
        if layout == "grouped":
            out.append({**query, "relevant_moment": group})
        else:
            out.extend({"pair_id": g["pair_id"], **query, **{k: g[k] for k in FIELDS[3:]}} for g in group)
    write_json(path, out)
    return n
