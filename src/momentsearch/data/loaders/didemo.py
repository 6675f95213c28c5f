"""DiDeMo: a JSON list of {annotation_id, description, video, num_segments, times, dl_link}.

``times`` holds one [start_seg, end_seg] pair per annotator, in 5-second segment indices with
inclusive ends: [s, e] covers seconds [5*s, 5*(e+1)]. The release has no durations; videos were
cut to ``num_segments`` 5-second chunks (the last may be shorter), so the duration is taken as
``5 * num_segments`` (an upper bound) and spans are capped there. Every annotator span is kept.
"""

from __future__ import annotations

from pathlib import Path

from momentsearch.data.corpus import Corpus, Moment, Video
from momentsearch.data.loaders._common import (
    get_field,
    infer_split,
    names_its_file,
    parse_span,
    read_json,
    require_file,
)
from momentsearch.errors import AnnotationError

SEGMENT_SECONDS = 5.0


@names_its_file
def load_didemo(path: str | Path, split: str | None = None) -> Corpus:
    p = require_file(path)
    split = split or infer_split(p)
    data = read_json(p)
    if not isinstance(data, list):
        raise AnnotationError(p, f"expected a JSON list of annotations, got {type(data).__name__}")
    moments = []
    videos: dict[str, Video] = {}
    for i, rec in enumerate(data):
        def err(msg: str, _i: int = i) -> AnnotationError:
            return AnnotationError(p, msg, record=f"#{_i}")

        if not isinstance(rec, dict):
            raise err("expected an object")
        ann_id = get_field(rec, "annotation_id", (int, str), err)
        text = get_field(rec, "description", str, err)
        vid = get_field(rec, "video", str, err)
        nseg = get_field(rec, "num_segments", int, err)
        if not 1 <= nseg <= 6:
            raise err(f"num_segments must be 1..6, got {nseg}")
        times = get_field(rec, "times", list, err)
        if not times:
            raise err("'times' is empty: no annotator span")
        dur = SEGMENT_SECONDS * nseg
        spans, quirks, raw = [], [], []
        for t in times:
            if not (isinstance(t, list) and len(t) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in t)):
                raise err(f"each entry of 'times' must be [start_seg, end_seg] integers, got {t!r}")
            if not (0 <= min(t) and max(t) < 6):
                raise err(f"segment index out of 0..5 in {t!r}")
            s, e = sorted(t)
            if t[0] > t[1]:
                quirks.append("start_after_end")
            span, _ = parse_span([SEGMENT_SECONDS * s, SEGMENT_SECONDS * (e + 1)], dur, err)
            spans.append(span)
            raw.append(list(t))
        meta = {"times": raw, **({"quirks": sorted(set(quirks))} if quirks else {})}  # raw segment indices
        moments.append(Moment(str(ann_id), text, vid, tuple(spans), split, None, meta))
        video = Video(vid, dur, split, SEGMENT_SECONDS, (), {"dl_link": rec.get("dl_link", "")})
        if vid in videos and videos[vid].duration != dur:
            raise err(f"video {vid!r} has num_segments {nseg} here but {videos[vid].duration / 5:g} before")
        videos.setdefault(vid, video)
    try:
        return Corpus.from_parts(videos.values(), moments, name=f"didemo/{split}" if split else "didemo")
    except ValueError as e:
        raise AnnotationError(p, str(e)) from None
