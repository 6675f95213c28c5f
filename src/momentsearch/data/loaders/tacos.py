"""TACoS (2D-TAN layout): {video_id: {timestamps: [[start_frame, end_frame]...], sentences, fps, num_frames}}.

Frames become seconds by dividing by ``fps``; a video lasts ``num_frames / fps`` seconds. The raw
frame numbers are kept in each moment's meta under ``frames``.
"""

from __future__ import annotations

import math
from pathlib import Path

from momentsearch.data.corpus import Corpus, Moment, Video
from momentsearch.data.loaders._common import (
    get_field,
    infer_split,
    is_finite_number,
    iter_video_records,
    names_its_file,
    paired_sentences,
    parse_span,
    require_file,
)


@names_its_file
def load_tacos(path: str | Path, split: str | None = None) -> Corpus:
    p = require_file(path)
    split = split or infer_split(p)
    videos, moments = [], []
    for vid, rec, err in iter_video_records(p, "timestamps, sentences, fps, num_frames"):
        fps = get_field(rec, "fps", float, err)
        if fps <= 0:
            raise err(f"fps must be > 0, got {fps}")
        nframes = get_field(rec, "num_frames", float, err)
        if nframes < 0:
            raise err(f"num_frames must be >= 0, got {nframes}")
        dur = nframes / fps
        if not math.isfinite(dur):
            raise err(f"num_frames / fps is not a finite duration ({nframes} / {fps})")
        videos.append(Video(vid, dur, split, None, (), {"fps": fps, "num_frames": int(nframes)}))
        for i, (ts, sent) in enumerate(paired_sentences(rec, err)):
            if not (isinstance(ts, list) and len(ts) == 2):
                raise err(f"timestamp {i} must be [start_frame, end_frame], got {ts!r}")
            secs = [x / fps if is_finite_number(x) else x for x in ts]
            span, quirks = parse_span(secs, dur, err)
            meta = {"frames": ts, **({"quirks": sorted(set(quirks))} if quirks else {})}
            moments.append(Moment(f"{vid}#{i}", sent, vid, (span,), split, None, meta))
    return Corpus.from_parts(videos, moments, name=f"tacos/{split}" if split else "tacos")
