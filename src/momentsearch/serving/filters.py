"""Which videos a search may answer from: ids, a path prefix, a duration range and an ingest-date range —
what a corpus records of each video. One :class:`VideoFilter` for the Python API, the CLI and the service.

* ``videos``: these ids only (an id the index does not hold is an error naming it);
* ``path_prefix``: the video's path relative to the folder it was ingested from (``holiday/2024/``);
  ``/`` separates folders on every system, and the match is on whole characters (``a/b`` matches ``a/bc.mp4``);
* ``min_duration`` / ``max_duration``: seconds, inclusive;
* ``ingested_after`` / ``ingested_before``: when ``ingest`` encoded the video (UTC; ISO 8601 text such as
  ``2026-11-01`` or ``2026-11-01T12:00:00Z``, or a :class:`datetime`), after inclusive, before exclusive.
  Corpora ingested before momentsearch recorded the date (and corpora made from a dataset) hold no dates:
  filtering them by date is an error saying so, and a video without a date never matches a date filter.
* ``modified_after`` / ``modified_before``: the file's own date (its modification time when it was ingested),
  the same way: the day a phone recorded it, or a camera's card was copied.

The conditions combine with AND. A filter that matches no video gives no moments, not an error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cached_property
from typing import Any

import numpy as np

from momentsearch.errors import QueryError
from momentsearch.readers import is_finite_number


def parse_utc(value: str | datetime, what: str = "date") -> datetime:
    """ISO 8601 text or a datetime -> an aware UTC datetime (a date or a time without zone is taken as UTC)."""
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        text = value.strip()
        try:
            dt = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
        except ValueError:
            raise QueryError(f"{what} must be an ISO 8601 date or time such as 2026-11-01 or "
                             f"2026-11-01T12:00:00Z, got {value[:60]!r}") from None
    else:
        raise QueryError(f"{what} must be ISO 8601 text or a datetime, got {type(value).__name__}")
    return dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)


@dataclass(frozen=True)
class VideoFilter:
    videos: tuple[str, ...] | None = None
    path_prefix: str | None = None
    min_duration: float | None = None
    max_duration: float | None = None
    ingested_after: datetime | None = None
    ingested_before: datetime | None = None
    modified_after: datetime | None = None
    modified_before: datetime | None = None

    @classmethod
    def of(cls, videos: Any = None, path_prefix: str | None = None, min_duration: float | None = None,
           max_duration: float | None = None, ingested_after: str | datetime | None = None,
           ingested_before: str | datetime | None = None, modified_after: str | datetime | None = None,
           modified_before: str | datetime | None = None) -> VideoFilter:
        """Checked and normalised: a :class:`QueryError` a user can act on for each bad field."""
        if videos is not None:
            if isinstance(videos, str) or not videos or not all(isinstance(v, str) for v in videos):
                raise QueryError("videos must be a non-empty list of video ids")
            videos = tuple(videos)
        if path_prefix is not None and (not isinstance(path_prefix, str) or not path_prefix.strip("/")):
            raise QueryError("path_prefix must be a non-empty folder or file name prefix, e.g. 'holiday/2024/'")
        for name, d in (("min_duration", min_duration), ("max_duration", max_duration)):
            if d is not None and (not is_finite_number(d) or d < 0):
                raise QueryError(f"{name} must be a finite number of seconds >= 0, got {str(d)[:40]}")
        if min_duration is not None and max_duration is not None and min_duration > max_duration:
            raise QueryError(f"min_duration {min_duration} is over max_duration {max_duration}")
        after, before = _range(ingested_after, ingested_before, "ingested")
        m_after, m_before = _range(modified_after, modified_before, "modified")
        return cls(videos, None if path_prefix is None else path_prefix.lstrip("/"),
                   None if min_duration is None else float(min_duration),
                   None if max_duration is None else float(max_duration), after, before, m_after, m_before)

    @property
    def is_empty(self) -> bool:
        return all(v is None for v in vars(self).values())

    @property
    def key(self) -> tuple:
        """Hashable and equal for equal filters: requests are batched by it."""
        return tuple(vars(self).values())


def _range(after: str | datetime | None, before: str | datetime | None, what: str
           ) -> tuple[datetime | None, datetime | None]:
    a = None if after is None else parse_utc(after, f"{what}_after")
    b = None if before is None else parse_utc(before, f"{what}_before")
    if a is not None and b is not None and a >= b:
        raise QueryError(f"{what}_after ({a.isoformat()}) must be before {what}_before ({b.isoformat()})")
    return a, b


@dataclass
class VideoTable:
    """What filters read, one row per index video: duration, path (None: not known), ingest time and file time
    (NaN: none)."""
    durations: np.ndarray
    paths: list[str | None]
    ingested: np.ndarray  # seconds since the epoch, UTC
    modified: np.ndarray | None = None  # the file's modification time when ingested, seconds since the epoch

    @classmethod
    def of_entries(cls, video_ids: list[str], durations: np.ndarray, entries: dict[str, dict[str, Any]] | None
                   ) -> VideoTable:
        """``entries``: a corpus manifest's video entries by id (None: a dataset split, no paths or dates)."""
        paths: list[str | None] = []
        ingested = np.full(len(video_ids), np.nan)
        modified = np.full(len(video_ids), np.nan)
        for i, v in enumerate(video_ids):
            e = (entries or {}).get(v, {})
            paths.append(e.get("path") if isinstance(e.get("path"), str) else None)
            if type(e.get("mtime_ns")) is int:
                modified[i] = e["mtime_ns"] / 1e9
            if isinstance(e.get("ingested_at"), str):
                try:
                    ingested[i] = parse_utc(e["ingested_at"]).timestamp()
                except QueryError:
                    pass  # an unreadable date: the video matches no date filter
        return cls(np.asarray(durations, np.float64), paths, ingested, modified)

    @cached_property
    def has_paths(self) -> bool:
        return any(p is not None for p in self.paths)

    @cached_property
    def has_dates(self) -> bool:
        return not bool(np.isnan(self.ingested).all())

    @cached_property
    def has_file_dates(self) -> bool:
        return self.modified is not None and not bool(np.isnan(self.modified).all())

    def check(self, f: VideoFilter) -> None:
        """A :class:`QueryError` when ``f`` asks for what this index's corpus does not record."""
        if f.path_prefix is not None and not self.has_paths:
            raise QueryError("this index's videos have no paths (its corpus was made from a dataset, not "
                             "ingested from files): path_prefix cannot select among them")
        if (f.ingested_after is not None or f.ingested_before is not None) and not self.has_dates:
            raise QueryError("this index's corpus records no ingest dates (it was ingested before momentsearch "
                             "recorded them, or made from a dataset): ingest it again into a new folder to "
                             "filter by date")
        if (f.modified_after is not None or f.modified_before is not None) and not self.has_file_dates:
            raise QueryError("this index's videos have no file dates (its corpus was made from a dataset, not "
                             "ingested from files): modified_after/modified_before cannot select among them")

    def rows(self, f: VideoFilter, base: np.ndarray | None = None) -> np.ndarray:
        """Index rows (sorted) passing ``f``; ``base``: rows already chosen by id (None: all)."""
        self.check(f)
        keep = np.ones(len(self.durations), bool) if base is None else np.isin(np.arange(len(self.durations)), base)
        if f.min_duration is not None:
            keep &= self.durations >= f.min_duration
        if f.max_duration is not None:
            keep &= self.durations <= f.max_duration
        if f.path_prefix is not None:
            keep &= np.array([p is not None and p.startswith(f.path_prefix) for p in self.paths], bool)
        if any(x is not None for x in (f.ingested_after, f.ingested_before, f.modified_after, f.modified_before)):
            with np.errstate(invalid="ignore"):
                if f.ingested_after is not None:
                    keep &= self.ingested >= f.ingested_after.timestamp()
                if f.ingested_before is not None:
                    keep &= self.ingested < f.ingested_before.timestamp()
                if f.modified_after is not None:
                    keep &= self.modified >= f.modified_after.timestamp()  # type: ignore[operator]
                if f.modified_before is not None:
                    keep &= self.modified < f.modified_before.timestamp()  # type: ignore[operator]
        return np.flatnonzero(keep)


FETCH_ARRANGED = 1000  # moments a search ranks before a time range or a grouping picks from them


def check_arrange(time_from: float | None = None, time_to: float | None = None, per_video: int | None = None) -> None:
    """A :class:`QueryError` a user can act on for a bad time range or per-video count."""
    for name, v in (("time_from", time_from), ("time_to", time_to)):
        if v is not None and not (is_finite_number(v) and v >= 0):
            raise QueryError(f"{name} must be a number of seconds >= 0, got {v!r}")
    if time_from is not None and time_to is not None and time_to <= time_from:
        raise QueryError(f"time_to ({time_to}) must be after time_from ({time_from})")
    if per_video is not None and not (isinstance(per_video, int) and 1 <= per_video <= 100):
        raise QueryError(f"per_video must be an integer from 1 to 100, got {per_video!r}")


def arrange(hits: Sequence[Any], time_from: float | None = None, time_to: float | None = None,
            per_video: int | None = None) -> list[Any]:
    """Ranked moments (best first) -> those overlapping [``time_from``, ``time_to``) seconds of their video (either
    end open when None), and with ``per_video``, grouped by video: the videos in the order of their best moment,
    each with its best ``per_video`` moments together, best first."""
    lo = -math.inf if time_from is None else time_from
    hi = math.inf if time_to is None else time_to
    kept = [h for h in hits if h.end > lo and h.start < hi]
    if per_video is None:
        return kept
    groups: dict[str, list[Any]] = {}
    for h in kept:
        g = groups.setdefault(h.video_id, [])
        if len(g) < per_video:
            g.append(h)
    return [h for g in groups.values() for h in g]
