"""TACoS (2D-TAN layout): {video_id: {timestamps: [[start_frame, end_frame]...], sentences, fps, num_frames}}."""

from __future__ import annotations

from pathlib import Path

from momentsearch.data.corpus import Corpus, Moment, Video
from momentsearch.data.loaders._common import (
    get_field,
    infer_split,
    line_of_key,
    moment_meta,
    parse_span,
    read_json,
    require_file,
)
from momentsearch.errors import AnnotationError


def load_tacos(path: str | Path, split: str | None = None) -> Corpus:
    p = require_file(path)
    split = split or infer_split(p)
    data = read_json(p)
    if not isinstance(data, dict):
        raise AnnotationError(p, "expected {video_id: {timestamps, sentences, fps, num_frames}}")
    videos, moments = [], []
    for vid, rec in data.items():
        def err(msg: str, _vid: str = vid) -> AnnotationError:
            return AnnotationError(p, msg, line=line_of_key(p, _vid), record=_vid)

        if not isinstance(rec, dict):
            raise err("expected an object with timestamps, sentences, fps, num_frames")
        fps = get_field(rec, "fps", float, err)
        if fps <= 0:
            raise err(f"fps must be > 0, got {fps}")
        nframes = get_field(rec, "num_frames", float, err)
        stamps = get_field(rec, "timestamps", list, err)
        sents = get_field(rec, "sentences", list, err)
        if len(stamps) != len(sents):
            raise err(f"{len(stamps)} timestamps but {len(sents)} sentences")
        dur = nframes / fps
        videos.append(Video(vid, dur, split, None, (), {"fps": fps, "num_frames": int(nframes)}))
        for i, (ts, sent) in enumerate(zip(stamps, sents, strict=True)):
            if not isinstance(sent, str) or not sent.strip():
                raise err(f"sentence {i} is empty or not a string")
            if not (isinstance(ts, list) and len(ts) == 2):
                raise err(f"timestamp {i} must be [start_frame, end_frame], got {ts!r}")
            secs = [x / fps if isinstance(x, (int, float)) and not isinstance(x, bool) else x for x in ts]
            span, quirks = parse_span(secs, dur, err)
            meta = moment_meta(secs, quirks, {"frames": ts})
            meta.pop("raw_spans", None)  # the raw frames are kept under 'frames'
            moments.append(Moment(f"{vid}#{i}", sent.strip(), vid, (span,), split, None, meta))
    return Corpus.from_parts(videos, moments, name=f"tacos/{split}" if split else "tacos")
