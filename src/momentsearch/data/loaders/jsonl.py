"""momentsearch's generic corpus format: JSON Lines, one video or moment per line.

    {"record": "header", "format": "momentsearch-corpus", "version": 1, "name": "..."}
    {"record": "video", "video_id": "...", "duration": 31.2, "split": "train", "clip_length": 2.0,
     "subtitles": [[start, end, "text"], ...], "meta": {...}}
    {"record": "moment", "query_id": "...", "text": "...", "video_id": "...", "spans": [[st, ed], ...],
     "split": "train", "query_type": null, "meta": {...}}

Every other format converts to it; ``write_jsonl_corpus`` then ``load_jsonl_corpus`` gives back an
equal :class:`Corpus` (floats are written with Python's shortest round-trip repr). The header is
optional when reading; videos may come after the moments that use them.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from momentsearch.data.corpus import Corpus, Moment, Subtitle, Video, clean_span
from momentsearch.data.loaders._common import (
    get_field,
    is_finite_number,
    iter_jsonl,
    names_its_file,
    optional_field,
    require_file,
    span_quirks,
    stream_jsonl,
)
from momentsearch.errors import AnnotationError
from momentsearch.fileio import write_jsonl

FORMAT_NAME = "momentsearch-corpus"
FORMAT_VERSION = 1


def header_record(name: str) -> dict[str, Any]:
    return {"record": "header", "format": FORMAT_NAME, "version": FORMAT_VERSION, "name": name}


def video_record(v: Video) -> dict[str, Any]:
    return {"record": "video", "video_id": v.video_id, "duration": v.duration, "split": v.split,
            "clip_length": v.clip_length, "subtitles": [[s.start, s.end, s.text] for s in v.subtitles], "meta": v.meta}


def moment_record(m: Moment) -> dict[str, Any]:
    return {"record": "moment", "query_id": m.query_id, "text": m.text, "video_id": m.video_id,
            "spans": [list(s) for s in m.spans], "split": m.split, "query_type": m.query_type, "meta": m.meta}


def corpus_records(corpus: Corpus) -> Iterator[dict[str, Any]]:
    yield header_record(corpus.name)
    yield from (video_record(v) for v in corpus.videos.values())
    yield from (moment_record(m) for m in corpus.moments)


def write_jsonl_corpus(corpus: Corpus, path: str | Path) -> Path:
    """Write atomically (temp file, then rename)."""
    write_jsonl(path, corpus_records(corpus))
    return Path(path)


def clamped(m: Moment, duration: float | None) -> Moment:
    """``m`` with its spans ordered and clamped to [0, duration] (the corpus policy); a changed span is
    named in ``meta["quirks"]`` and the first raw spans kept, as the other loaders do."""
    spans, quirks, any_changed = [], set(), False
    for st, ed in m.spans:
        span, changed = clean_span(st, ed, duration)
        if changed:  # a span stored clean is left as it is (and not re-flagged): the round trip stays lossless
            quirks |= set(span_quirks(st, ed, duration, span))
            any_changed = True
        spans.append(span)
    if not any_changed:
        return m
    meta = dict(m.meta)
    meta["quirks"] = sorted(set(meta.get("quirks", [])) | quirks)
    meta.setdefault("raw_spans", [list(s) for s in m.spans])
    return dataclasses.replace(m, spans=tuple(spans), meta=meta)


def _parse(rec: dict[str, Any], err: Any) -> str | Video | Moment:
    """One record: the header's name, a video, or a moment (its spans not yet clamped)."""
    kind = rec.get("record")
    if kind == "header":
        if rec.get("format") != FORMAT_NAME:
            raise err(f"header format is {rec.get('format')!r}, expected {FORMAT_NAME!r}")
        if rec.get("version") != FORMAT_VERSION:
            raise err(f"unsupported version {rec.get('version')!r} (this reader knows {FORMAT_VERSION})")
        return str(rec.get("name") or "")
    if kind == "video":
        subs = []
        for s in optional_field(rec, "subtitles", list, err) or []:
            if not (isinstance(s, list) and len(s) == 3 and is_finite_number(s[0]) and is_finite_number(s[1])
                    and isinstance(s[2], str)):
                raise err(f"a subtitle must be [start, end, text] with finite times, got {s!r}")
            subs.append(Subtitle(float(s[0]), float(s[1]), s[2]))
        clip = optional_field(rec, "clip_length", float, err)
        if clip is not None and clip <= 0:
            raise err(f"'clip_length' must be > 0 seconds, got {clip}")
        return Video(get_field(rec, "video_id", str, err), get_field(rec, "duration", float, err),
                     optional_field(rec, "split", str, err), clip, tuple(subs),
                     optional_field(rec, "meta", dict, err) or {})
    if kind == "moment":
        spans = optional_field(rec, "spans", list, err) or []
        if not all(isinstance(s, list) and len(s) == 2 and is_finite_number(s[0]) and is_finite_number(s[1])
                   for s in spans):
            raise err(f"'spans' must be a list of [start, end] with finite numbers, got {spans!r}")
        qid = str(get_field(rec, "query_id", (str, int), err))
        if not qid:
            raise err("empty query_id")
        return Moment(qid, get_field(rec, "text", str, err), optional_field(rec, "video_id", str, err),
                      tuple((float(a), float(b)) for a, b in spans), optional_field(rec, "split", str, err),
                      optional_field(rec, "query_type", str, err), optional_field(rec, "meta", dict, err) or {})
    raise err(f"'record' must be header, video or moment, got {kind!r}")


def _parsed(p: Path, records: Iterable[tuple[int, dict[str, Any]]]) -> Iterator[tuple[int, str | Video | Moment]]:
    for lineno, rec in records:
        def err(msg: str, _ln: int = lineno) -> AnnotationError:
            return AnnotationError(p, msg, line=_ln)

        try:
            yield lineno, _parse(rec, err)
        except (ValueError, TypeError) as e:
            if isinstance(e, AnnotationError):
                raise
            raise err(str(e)) from None


@names_its_file
def load_jsonl_corpus(path: str | Path, split: str | None = None) -> Corpus:
    """Read the generic format; ``split`` keeps only that split."""
    p = require_file(path)
    name = p.stem
    videos: list[Video] = []
    moments: list[Moment] = []
    pending: list[tuple[int, Moment]] = []
    for lineno, item in _parsed(p, iter_jsonl(p)):
        if isinstance(item, str):
            name = item or name
        elif isinstance(item, Video):
            videos.append(item)
        else:
            pending.append((lineno, item))
    durations = {v.video_id: v.duration for v in videos}
    for lineno, m in pending:  # videos may come after their moments: spans are clamped once all are read
        try:
            moments.append(clamped(m, durations.get(m.video_id or "")))
        except ValueError as e:
            raise AnnotationError(p, str(e), line=lineno) from None
    try:
        corpus = Corpus.from_parts(videos, moments, name=name)
    except ValueError as e:
        raise AnnotationError(p, str(e)) from None
    return corpus.split(split) if split else corpus


def iter_jsonl_corpus(path: str | Path, moments: bool = True) -> Iterator[Video | Moment]:
    """The file's videos and moments one at a time, read line by line: memory stays that of one line, so
    a corpus larger than memory (a generated million: 4.5 GB of JSON, about 30 GB as one :class:`Corpus`)
    can be walked. Each record is checked as :func:`load_jsonl_corpus` checks it; a moment's spans are
    clamped to its video's duration when the video came first (as generation writes them), else kept.
    ``moments=False`` skips the moment lines without parsing them (the videos alone, faster)."""
    p = require_file(path)
    durations: dict[str, float] = {}
    for lineno, item in _parsed(p, stream_jsonl(p, None if moments else b'{"record": "moment"')):
        if isinstance(item, Video):
            durations[item.video_id] = item.duration
            yield item
        elif isinstance(item, Moment):
            try:
                yield clamped(item, durations.get(item.video_id or ""))
            except ValueError as e:
                raise AnnotationError(p, str(e), line=lineno) from None


def iter_jsonl_videos(path: str | Path) -> Iterator[tuple[Video, list[Moment]]]:
    """Each video with its moments, for a file whose moments follow their video (as generation and
    :func:`write_jsonl_corpus` write them): memory stays that of one video. A moment of another video than the
    one before it, or a video id seen twice, is an :class:`AnnotationError` naming the line."""
    p = require_file(path)
    seen: set[str] = set()
    current: tuple[Video, list[Moment]] | None = None
    for lineno, item in _parsed(p, stream_jsonl(p, None)):
        if isinstance(item, Video):
            if item.video_id in seen:
                raise AnnotationError(p, f"video {item.video_id!r} appears twice", line=lineno)
            seen.add(item.video_id)
            if current is not None:
                yield current
            current = (item, [])
        elif isinstance(item, Moment):
            if current is None or item.video_id != current[0].video_id:
                raise AnnotationError(p, f"moment {item.query_id!r} of video {item.video_id!r} does not follow its "
                                         "video; a file read video by video keeps each video's moments after it "
                                         "(load it whole instead)", line=lineno)
            try:
                current[1].append(clamped(item, current[0].duration))
            except ValueError as e:
                raise AnnotationError(p, str(e), line=lineno) from None
    if current is not None:
        yield current


def jsonl_corpus_name(path: str | Path) -> str:
    """The corpus's name from the file's header (its first line), else the file's stem, reading one line."""
    p = require_file(path)
    for _, item in _parsed(p, itertools.islice(stream_jsonl(p, None), 1)):
        if isinstance(item, str) and item:
            return item
    return p.stem
