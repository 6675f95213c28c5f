"""Charades-STA: ``VIDEOID START END##sentence`` lines; durations from ``Charades_v1_<split>.csv``."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from momentsearch.data.corpus import Corpus, Moment, Video
from momentsearch.data.loaders._common import (
    infer_split,
    moment_meta,
    names_its_file,
    parse_span,
    read_text,
    require_file,
    text_lines,
)
from momentsearch.errors import AnnotationError


@names_its_file
def load_charades_durations(path: str | Path) -> dict[str, tuple[float, dict[str, str]]]:
    """Charades' video CSV -> {id: (length in seconds, {scene, ...})}."""
    p = require_file(path)
    out = {}
    reader = csv.DictReader(io.StringIO(read_text(p), newline=""))
    try:
        missing = {"id", "length"} - set(reader.fieldnames or [])
        if missing:
            raise AnnotationError(p, f"CSV lacks the column(s) {sorted(missing)}", line=1)
        for row in reader:
            try:
                length = float(row["length"])
            except (TypeError, ValueError):
                raise AnnotationError(p, f"'length' is not a number: {str(row['length'])[:80]!r}",
                                      line=reader.line_num) from None
            if not (math.isfinite(length) and length > 0):
                raise AnnotationError(p, f"'length' must be a finite number of seconds > 0, got {row['length']!r}",
                                      line=reader.line_num)
            if not row["id"]:
                raise AnnotationError(p, "empty video id", line=reader.line_num)
            out[row["id"]] = (length, {"scene": row.get("scene") or ""})
    except csv.Error as e:
        raise AnnotationError(p, f"malformed CSV: {e}", line=reader.line_num) from None
    return out


@names_its_file
def load_charades_sta(
    path: str | Path, durations_csv: str | Path | None = None, split: str | None = None
) -> Corpus:
    """Load ``charades_sta_<split>.txt``. The CSV defaults to ``Charades_v1_<split>.csv`` beside it;
    without one, a video's duration is estimated as its largest annotated end (flagged in meta)."""
    p = require_file(path)
    split = split or infer_split(p)
    if durations_csv is None and split is not None:
        guess = p.parent / f"Charades_v1_{split}.csv"
        durations_csv = guess if guess.exists() else None
    info = load_charades_durations(durations_csv) if durations_csv is not None else {}

    rows = []
    for lineno, line in text_lines(p):
        if not line.strip():
            continue
        head, sep, sentence = line.partition("##")
        parts = head.split()
        if not sep or len(parts) != 3:
            raise AnnotationError(p, f"expected 'VIDEOID START END##sentence', got {line[:80]!r}", line=lineno)
        vid, st_s, ed_s = parts
        try:
            st, ed = float(st_s), float(ed_s)
        except ValueError:
            raise AnnotationError(p, f"START and END must be numbers, got {st_s[:40]!r} {ed_s[:40]!r}",
                                  line=lineno) from None
        if not (math.isfinite(st) and math.isfinite(ed)):
            raise AnnotationError(p, f"START and END must be finite, got {st_s[:40]!r} {ed_s[:40]!r}", line=lineno)
        if not sentence.strip():
            raise AnnotationError(p, "empty sentence after '##'", line=lineno)
        if info and vid not in info:
            raise AnnotationError(p, f"video {vid[:80]!r} is not in {durations_csv}", line=lineno)
        rows.append((lineno, vid, st, ed, sentence.strip()))

    estimated: dict[str, float] = {}
    if not info:
        for _, vid, st, ed, _ in rows:
            estimated[vid] = max(estimated.get(vid, 0.0), st, ed)

    moments = []
    used: dict[str, float] = {}
    for i, (lineno, vid, st, ed, sentence) in enumerate(rows):
        dur = info[vid][0] if info else estimated[vid]
        span, quirks = parse_span([st, ed], dur, lambda m, _ln=lineno: AnnotationError(p, m, line=_ln))
        qid = f"{split}-{i}" if split else str(i)
        moments.append(Moment(qid, sentence, vid, (span,), split, None, moment_meta([[st, ed]], quirks)))
        used[vid] = dur
    videos = []
    for vid, dur in used.items():
        meta = dict(info[vid][1]) if info else {"duration_estimated_from_annotations": True}
        videos.append(Video(vid, dur, split, None, (), meta))
    return Corpus.from_parts(videos, moments, name=f"charades-sta/{split}" if split else "charades-sta")
