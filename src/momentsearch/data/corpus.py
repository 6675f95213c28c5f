"""The corpus model: videos, annotated moments (query + span), and a corpus with splits.

Times are seconds throughout. A :class:`Moment` is one text query with its ground-truth
span(s) in one video; DiDeMo keeps every annotator's span, the other datasets have one.
A query with no ground truth (TVR's public test set) has ``video_id=None`` and no spans.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from momentsearch.errors import CorpusError

Span = tuple[float, float]


@dataclass(frozen=True)
class Subtitle:
    """One subtitle line shown from ``start`` to ``end`` seconds."""

    start: float
    end: float
    text: str


@dataclass(frozen=True)
class Video:
    """An untrimmed video. ``clip_length`` is the feature stride in seconds, when known."""

    video_id: str
    duration: float
    split: str | None = None
    clip_length: float | None = None
    subtitles: tuple[Subtitle, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict, compare=True, hash=False)

    def __post_init__(self) -> None:
        if not self.video_id:
            raise CorpusError("a video needs a non-empty video_id")
        if not (math.isfinite(self.duration) and self.duration >= 0):
            raise CorpusError(f"video {self.video_id!r}: duration must be a finite number >= 0, got {self.duration!r}")

    @property
    def n_clips(self) -> int | None:
        if self.clip_length is None:
            return None
        return max(1, math.ceil(self.duration / self.clip_length - 1e-9))


@dataclass(frozen=True)
class Moment:
    """A text query annotated with one or more (start, end) spans in one video."""

    query_id: str
    text: str
    video_id: str | None
    spans: tuple[Span, ...] = ()
    split: str | None = None
    query_type: str | None = None  # TVR's desc type: "v", "t" or "vt"
    meta: dict[str, Any] = field(default_factory=dict, compare=True, hash=False)

    def __post_init__(self) -> None:
        if not str(self.query_id):
            raise CorpusError("a moment needs a non-empty query_id")
        for st, ed in self.spans:
            if not (math.isfinite(st) and math.isfinite(ed)):
                raise CorpusError(f"query {self.query_id}: span ({st}, {ed}) is not finite")
            if st > ed:
                raise CorpusError(f"query {self.query_id}: span start {st} > end {ed}")
        if self.spans and self.video_id is None:
            raise CorpusError(f"query {self.query_id}: spans without a video_id")

    @property
    def span(self) -> Span:
        """The single span (the first annotator's, for multi-annotator datasets)."""
        if not self.spans:
            raise CorpusError(f"query {self.query_id} has no ground-truth span")
        return self.spans[0]

    @property
    def has_ground_truth(self) -> bool:
        return self.video_id is not None and bool(self.spans)


def clean_span(start: float, end: float, duration: float | None) -> tuple[Span, bool]:
    """Order a span and clamp it to [0, duration]. Returns the span and whether it changed."""
    st, ed = (start, end) if start <= end else (end, start)
    hi = math.inf if duration is None else max(0.0, duration)
    st, ed = min(max(st, 0.0), hi), min(max(ed, 0.0), hi)  # monotone, so st <= ed still
    return (st, ed), (st, ed) != (start, end)


@dataclass
class Corpus:
    """Videos and annotated moments. Splits are attributes of both; :meth:`split` selects one."""

    videos: dict[str, Video]
    moments: list[Moment]
    name: str = "corpus"

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for m in self.moments:
            if m.query_id in seen:
                raise CorpusError(f"{self.name}: duplicate query_id {m.query_id!r}")
            seen.add(m.query_id)
            if m.video_id is not None and m.video_id not in self.videos:
                raise CorpusError(f"{self.name}: query {m.query_id!r} refers to unknown video {m.video_id!r}")

    # ---- construction -----------------------------------------------------------------
    @classmethod
    def from_parts(cls, videos: Iterable[Video], moments: Iterable[Moment], name: str = "corpus") -> Corpus:
        vids: dict[str, Video] = {}
        for v in videos:
            if v.video_id in vids and vids[v.video_id] != v:
                raise CorpusError(f"{name}: video {v.video_id!r} given twice with different attributes")
            vids[v.video_id] = v
        return cls(videos=vids, moments=list(moments), name=name)

    # ---- access -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.moments)

    def __iter__(self) -> Iterator[Moment]:
        return iter(self.moments)

    @property
    def splits(self) -> list[str]:
        names = {v.split for v in self.videos.values()} | {m.split for m in self.moments}
        return sorted(s for s in names if s is not None)

    def split(self, name: str) -> Corpus:
        """The videos and moments of one split (a video without a split is kept if a moment uses it)."""
        moments = [m for m in self.moments if m.split == name]
        used = {m.video_id for m in moments if m.video_id is not None}
        videos = {k: v for k, v in self.videos.items() if v.split == name or k in used}
        if not moments and not videos:
            raise KeyError(f"{self.name}: no split {name!r}; splits are {self.splits}")
        return Corpus(videos=videos, moments=moments, name=f"{self.name}/{name}")

    def video_ids(self) -> list[str]:
        return list(self.videos)

    def moments_by_video(self) -> dict[str, list[Moment]]:
        out: dict[str, list[Moment]] = {}
        for m in self.moments:
            if m.video_id is not None:
                out.setdefault(m.video_id, []).append(m)
        return out

    def iter_videos(self) -> Iterator[tuple[Video, list[Moment]]]:
        """Each video with its moments (none: an empty list), in the corpus's order."""
        by_video = self.moments_by_video()
        for v in self.videos.values():
            yield v, by_video.get(v.video_id, [])

    def with_moments(self, moments: Sequence[Moment]) -> Corpus:
        return replace(self, moments=list(moments))

    # ---- statistics -----------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Counts and distributions that ``momentsearch data info`` prints."""
        durations = [v.duration for v in self.videos.values()]
        spans = [s for m in self.moments for s in m.spans]
        lengths = [ed - st for st, ed in spans]
        rel = []
        for m in self.moments:
            if m.has_ground_truth:
                dur = self.videos[m.video_id].duration  # type: ignore[index]
                if dur > 0:
                    rel.extend((ed - st) / dur for st, ed in m.spans)
        annotated = [m for m in self.moments if m.has_ground_truth]
        quirks = Counter(q for m in self.moments for q in m.meta.get("quirks", ()))
        return {
            "name": self.name,
            "n_queries": len(self.moments),
            "n_queries_with_ground_truth": len(annotated),
            "n_videos": len(self.videos),
            "n_videos_with_queries": len({m.video_id for m in annotated}),
            "n_spans": len(spans),
            "n_unique_moments": len({(m.video_id, s) for m in annotated for s in m.spans}),
            "spans_per_query": _hist(len(m.spans) for m in annotated),
            "splits": {
                s: {
                    "n_queries": sum(m.split == s for m in self.moments),
                    "n_videos": sum(v.split == s for v in self.videos.values()),
                }
                for s in self.splits
            },
            "video_duration_s": summarize(durations),
            "span_length_s": summarize(lengths),
            "span_relative_length": summarize(rel),
            "span_start_relative": summarize(
                [st / self.videos[m.video_id].duration for m in annotated for st, _ in m.spans
                 if self.videos[m.video_id].duration > 0]  # type: ignore[index]
            ),
            "n_videos_with_subtitles": sum(bool(v.subtitles) for v in self.videos.values()),
            "query_types": dict(Counter(m.query_type for m in self.moments if m.query_type)),
            "quirks": dict(quirks),
        }


def summarize(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    vals = sorted(values)
    n = len(vals)
    return {
        "min": round(vals[0], 4),
        "median": round(vals[n // 2] if n % 2 else 0.5 * (vals[n // 2 - 1] + vals[n // 2]), 4),
        "mean": round(sum(vals) / n, 4),
        "max": round(vals[-1], 4),
    }


def _hist(values: Iterable[int]) -> dict[str, int]:
    return {str(k): v for k, v in sorted(Counter(values).items())}
