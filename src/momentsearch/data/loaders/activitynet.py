"""ActivityNet Captions (2D-TAN layout): {video_id: {duration, timestamps: [[s, e]...], sentences: [...]}}."""

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


def load_activitynet(path: str | Path, split: str | None = None) -> Corpus:
    p = require_file(path)
    split = split or infer_split(p)
    data = read_json(p)
    if not isinstance(data, dict):
        raise AnnotationError(p, "expected {video_id: {duration, timestamps, sentences}}")
    videos, moments = [], []
    for vid, rec in data.items():
        def err(msg: str, _vid: str = vid) -> AnnotationError:
            return AnnotationError(p, msg, line=line_of_key(p, _vid), record=_vid)

        if not isinstance(rec, dict):
            raise err("expected an object with duration, timestamps, sentences")
        dur = get_field(rec, "duration", float, err)
        stamps = get_field(rec, "timestamps", list, err)
        sents = get_field(rec, "sentences", list, err)
        if len(stamps) != len(sents):
            raise err(f"{len(stamps)} timestamps but {len(sents)} sentences")
        videos.append(Video(vid, dur, split))
        for i, (ts, sent) in enumerate(zip(stamps, sents, strict=True)):
            if not isinstance(sent, str) or not sent.strip():
                raise err(f"sentence {i} is empty or not a string")
            span, quirks = parse_span(ts, dur, err)
            moments.append(Moment(f"{vid}#{i}", sent.strip(), vid, (span,), split, None, moment_meta([ts], quirks)))
    return Corpus.from_parts(videos, moments, name=f"activitynet/{split}" if split else "activitynet")
