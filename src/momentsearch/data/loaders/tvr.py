"""TVR: ``tvr_*_release.jsonl`` queries, ``tvr_video2dur_idx.json`` corpus, TVQA subtitle jsonl.

Query lines carry ``desc_id``, ``desc`` and, where the ground truth is released, ``vid_name``,
``duration``, ``ts`` = [start, end] seconds and ``type`` in {v, t, vt}. The video corpus of a
split (all videos, also those no query names) comes from ``tvr_video2dur_idx.json``:
``{split: {vid_name: [duration, index]}}``. Subtitles (``tvqa_preprocessed_subtitles.jsonl``) are
lines ``{"vid_name": ..., "sub": [{"start": s, "end": e, "text": ...}, ...]}``.
"""

from __future__ import annotations

from pathlib import Path

from momentsearch.data.corpus import Corpus, Moment, Subtitle, Video
from momentsearch.data.loaders._common import (
    get_field,
    infer_split,
    is_finite_number,
    iter_jsonl,
    moment_meta,
    names_its_file,
    parse_span,
    read_json,
    require_file,
)
from momentsearch.errors import AnnotationError

TVR_CLIP_LENGTH = 1.5  # seconds: the stride of TVR's released clip features
_SPLIT_ALIASES = {"test": "test_public"}


@names_its_file
def load_tvr_video2dur(path: str | Path, split: str) -> dict[str, float]:
    p = require_file(path)
    data = read_json(p)
    if not isinstance(data, dict):
        raise AnnotationError(p, "expected {split: {vid_name: [duration, index]}}")
    key = split if split in data else _SPLIT_ALIASES.get(split, split)
    if key not in data:
        raise AnnotationError(p, f"no split {split!r}; it has {sorted(data)}")
    if not isinstance(data[key], dict):
        raise AnnotationError(p, f"split {key!r} must map video names to [duration, index]", record=key)
    out = {}
    for vid, val in data[key].items():
        if not (isinstance(val, list) and len(val) == 2 and is_finite_number(val[0]) and val[0] >= 0):
            raise AnnotationError(p, f"expected [duration >= 0, index], got {val!r}", record=f"{key}/{vid}")
        out[vid] = float(val[0])
    return out


@names_its_file
def load_tvr_subtitles(path: str | Path) -> dict[str, tuple[Subtitle, ...]]:
    p = require_file(path)
    out: dict[str, tuple[Subtitle, ...]] = {}
    for lineno, rec in iter_jsonl(p):
        def err(msg: str, _ln: int = lineno) -> AnnotationError:
            return AnnotationError(p, msg, line=_ln)

        vid = get_field(rec, "vid_name", str, err)
        subs = get_field(rec, "sub", list, err)
        lines = []
        for i, s in enumerate(subs):
            if not isinstance(s, dict):
                raise err(f"sub[{i}] must be an object with start, end, text")
            st = get_field(s, "start", float, err)
            ed = get_field(s, "end", float, err)
            lines.append(Subtitle(st, ed, get_field(s, "text", str, err)))
        out[vid] = tuple(lines)
    return out


@names_its_file
def load_tvr(
    path: str | Path,
    video2dur: str | Path | None = None,
    subtitles: str | Path | None = None,
    split: str | None = None,
    clip_length: float | None = TVR_CLIP_LENGTH,
) -> Corpus:
    """Load a TVR query file. ``video2dur`` defaults to ``tvr_video2dur_idx.json`` beside it."""
    p = require_file(path)
    split = split or infer_split(p)
    if video2dur is None and (p.parent / "tvr_video2dur_idx.json").exists() and split is not None:
        video2dur = p.parent / "tvr_video2dur_idx.json"
    durations = load_tvr_video2dur(video2dur, split) if video2dur is not None and split is not None else {}
    subs = load_tvr_subtitles(subtitles) if subtitles is not None else {}

    moments: list[Moment] = []
    record_durations: dict[str, float] = {}
    for lineno, rec in iter_jsonl(p):
        def err(msg: str, _ln: int = lineno) -> AnnotationError:
            return AnnotationError(p, msg, line=_ln)

        desc_id = get_field(rec, "desc_id", (int, str), err)
        if desc_id == "":
            raise err("empty desc_id")
        text = get_field(rec, "desc", str, err)
        qtype = rec.get("type")
        if qtype is not None and qtype not in ("v", "t", "vt"):
            raise err(f"field 'type' must be one of v, t, vt, got {qtype!r}")
        if "vid_name" not in rec:  # released without ground truth (test_public)
            moments.append(Moment(str(desc_id), text, None, (), split, qtype))
            continue
        vid = get_field(rec, "vid_name", str, err)
        dur = durations.get(vid)
        if "duration" in rec:
            rec_dur = get_field(rec, "duration", float, err)
            if dur is None:
                dur = rec_dur
            record_durations[vid] = rec_dur
        if dur is None:
            raise err(f"video {vid!r} has no duration: neither a 'duration' field nor an entry in video2dur")
        span, quirks = parse_span(get_field(rec, "ts", list, err), dur, err)
        moments.append(
            Moment(str(desc_id), text, vid, (span,), split, qtype, moment_meta([list(map(float, rec["ts"]))], quirks))
        )
        durations.setdefault(vid, dur)

    videos = [
        Video(vid, dur, split, clip_length, subs.get(vid, ()))
        for vid, dur in durations.items()
    ]
    try:
        return Corpus.from_parts(videos, moments, name=f"tvr/{split}" if split else "tvr")
    except ValueError as e:
        raise AnnotationError(p, str(e)) from None
