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

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from momentsearch.data.corpus import Corpus, Moment, Subtitle, Video
from momentsearch.data.loaders._common import get_field, iter_jsonl, require_file
from momentsearch.errors import AnnotationError
from momentsearch.fileio import write_jsonl

FORMAT_NAME = "momentsearch-corpus"
FORMAT_VERSION = 1


def corpus_records(corpus: Corpus) -> Iterator[dict[str, Any]]:
    yield {"record": "header", "format": FORMAT_NAME, "version": FORMAT_VERSION, "name": corpus.name}
    for v in corpus.videos.values():
        yield {
            "record": "video",
            "video_id": v.video_id,
            "duration": v.duration,
            "split": v.split,
            "clip_length": v.clip_length,
            "subtitles": [[s.start, s.end, s.text] for s in v.subtitles],
            "meta": v.meta,
        }
    for m in corpus.moments:
        yield {
            "record": "moment",
            "query_id": m.query_id,
            "text": m.text,
            "video_id": m.video_id,
            "spans": [list(s) for s in m.spans],
            "split": m.split,
            "query_type": m.query_type,
            "meta": m.meta,
        }


def write_jsonl_corpus(corpus: Corpus, path: str | Path) -> Path:
    """Write atomically (temp file, then rename)."""
    write_jsonl(path, corpus_records(corpus))
    return Path(path)


def load_jsonl_corpus(path: str | Path, split: str | None = None) -> Corpus:
    """Read the generic format; ``split`` keeps only that split."""
    p = require_file(path)
    name = p.stem
    videos: list[Video] = []
    moments: list[Moment] = []
    lines: dict[str, int] = {}
    for lineno, rec in iter_jsonl(p):
        def err(msg: str, _ln: int = lineno) -> AnnotationError:
            return AnnotationError(p, msg, line=_ln)

        kind = rec.get("record")
        try:
            if kind == "header":
                if rec.get("format") != FORMAT_NAME:
                    raise err(f"header format is {rec.get('format')!r}, expected {FORMAT_NAME!r}")
                if rec.get("version") != FORMAT_VERSION:
                    raise err(f"unsupported version {rec.get('version')!r} (this reader knows {FORMAT_VERSION})")
                name = rec.get("name") or name
            elif kind == "video":
                subs = []
                for s in rec.get("subtitles") or []:
                    if not (isinstance(s, list) and len(s) == 3):
                        raise err(f"a subtitle must be [start, end, text], got {s!r}")
                    subs.append(Subtitle(float(s[0]), float(s[1]), str(s[2])))
                clip = rec.get("clip_length")
                videos.append(
                    Video(
                        get_field(rec, "video_id", str, err),
                        get_field(rec, "duration", float, err),
                        rec.get("split"),
                        None if clip is None else float(clip),
                        tuple(subs),
                        rec.get("meta") or {},
                    )
                )
                lines[videos[-1].video_id] = lineno
            elif kind == "moment":
                spans = rec.get("spans") or []
                if not isinstance(spans, list) or not all(isinstance(s, list) and len(s) == 2 for s in spans):
                    raise err(f"'spans' must be a list of [start, end], got {spans!r}")
                moments.append(
                    Moment(
                        str(get_field(rec, "query_id", (str, int), err)),
                        get_field(rec, "text", str, err),
                        rec.get("video_id"),
                        tuple((float(a), float(b)) for a, b in spans),
                        rec.get("split"),
                        rec.get("query_type"),
                        rec.get("meta") or {},
                    )
                )
                lines[f"q:{moments[-1].query_id}"] = lineno
            else:
                raise err(f"'record' must be header, video or moment, got {kind!r}")
        except (ValueError, TypeError) as e:
            if isinstance(e, AnnotationError):
                raise
            raise err(str(e)) from None
    try:
        corpus = Corpus.from_parts(videos, moments, name=name)
    except ValueError as e:
        raise AnnotationError(p, str(e)) from None
    return corpus.split(split) if split else corpus
