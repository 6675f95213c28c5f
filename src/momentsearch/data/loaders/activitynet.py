"""ActivityNet Captions (2D-TAN layout): {video_id: {duration, timestamps: [[s, e]...], sentences: [...]}}."""

from __future__ import annotations

from pathlib import Path

from momentsearch.data.corpus import Corpus, Moment, Video
from momentsearch.data.loaders._common import (
    get_field,
    infer_split,
    iter_video_records,
    moment_meta,
    names_its_file,
    paired_sentences,
    parse_span,
    require_file,
)


@names_its_file
def load_activitynet(path: str | Path, split: str | None = None) -> Corpus:
    p = require_file(path)
    split = split or infer_split(p)
    videos, moments = [], []
    for vid, rec, err in iter_video_records(p, "duration, timestamps, sentences"):
        dur = get_field(rec, "duration", float, err)
        videos.append(Video(vid, dur, split))
        for i, (ts, sent) in enumerate(paired_sentences(rec, err)):
            span, quirks = parse_span(ts, dur, err)
            moments.append(Moment(f"{vid}#{i}", sent, vid, (span,), split, None, moment_meta([ts], quirks)))
    return Corpus.from_parts(videos, moments, name=f"activitynet/{split}" if split else "activitynet")
