"""What the service shows beside a moment: the video file, a thumbnail, and the annotation text.

Files are found by video id through the corpus manifest, never from a path a client sends, so the
service opens only the index's and corpus's files and the video files the corpus recorded.
Annotation text: the corpus's annotated captions (a dataset corpus) that best overlap the moment,
else the subtitle lines said during it. Beside it, what was said and what was written on screen during the
moment, each from its own stream, so that a reader sees which of them the words were found in.
"""

from __future__ import annotations

import io
import logging
import threading
from collections import OrderedDict
from functools import cached_property
from pathlib import Path
from typing import Any

from momentsearch.data.corpus_folder import CorpusFolder
from momentsearch.errors import CorpusFolderError
from momentsearch.serving.clips import file_changed

_log = logging.getLogger(__name__)

MEDIA_TYPES = {".mp4": "video/mp4", ".m4v": "video/mp4", ".mov": "video/quicktime", ".webm": "video/webm",
               ".mkv": "video/x-matroska", ".avi": "video/x-msvideo", ".ogv": "video/ogg"}
MAX_TEXT = 300


class Media:
    def __init__(self, corpus: CorpusFolder | None, video_ids: list[str], thumbnail_width: int = 320,
                 cache_size: int = 512):
        self.corpus = corpus
        self.ids = set(video_ids)
        self.width = thumbnail_width
        self._thumbs: OrderedDict[tuple[str, float], bytes] = OrderedDict()
        self._subs: dict[str, list[Any]] = {}
        self._cache_size = cache_size
        self._lock = threading.Lock()

    def entry(self, video_id: str) -> dict[str, Any] | None:
        """The corpus's record of an indexed video (None: unknown id, or no corpus beside the index)."""
        if video_id not in self.ids or self.corpus is None:
            return None
        try:
            return self.corpus.entry(video_id)
        except CorpusFolderError:  # the corpus changed since indexing
            return None

    def video_path(self, video_id: str) -> Path | None:
        """The recorded video file of ``video_id`` when it is still there (None: unknown id or no file)."""
        return None if self.entry(video_id) is None else self.corpus.video_path(video_id)  # type: ignore[union-attr]

    @cached_property
    def n_files(self) -> int:
        """Indexed videos with a playable file (counted once)."""
        return sum(self.video_path(v) is not None for v in self.ids)

    def media_type(self, path: Path) -> str:
        return MEDIA_TYPES.get(path.suffix.lower(), "application/octet-stream")

    def thumbnail(self, video_id: str, seconds: float) -> bytes | None:
        """A JPEG of the frame at ``seconds`` (None when the video has no file); recent ones are cached."""
        path = self.video_path(video_id)
        if path is None:
            return None
        key = (video_id, round(seconds, 1))
        with self._lock:
            if key in self._thumbs:
                self._thumbs.move_to_end(key)
                return self._thumbs[key]
        from PIL import Image

        from momentsearch.video.decode import frame_at

        buf = io.BytesIO()
        Image.fromarray(frame_at(path, key[1], self.width)).save(buf, format="JPEG", quality=80)
        data = buf.getvalue()
        with self._lock:
            self._thumbs[key] = data
            while len(self._thumbs) > self._cache_size:
                self._thumbs.popitem(last=False)
        return data

    def changed(self, video_id: str, path: Path) -> str | None:
        """Why ``path`` is no longer the file ``video_id`` was ingested from (size or time differ), else None."""
        return file_changed(video_id, self.entry(video_id) or {}, path)

    def annotation(self, video_id: str, start: float, end: float) -> str | None:
        if self.entry(video_id) is None:
            return None
        try:
            notes = self.corpus.annotations(video_id)  # type: ignore[union-attr]
        except CorpusFolderError as e:  # a damaged captions file costs the label, never the search
            _log.warning("no annotation for %s: %s", video_id, e)
            notes = []
        best, best_iou = None, 0.0
        for a in notes:
            s, e, text = float(a[0]), float(a[1]), str(a[2])
            inter = min(end, e) - max(start, s)
            if inter > 0:
                iou = inter / (max(end, e) - min(start, s))
                if iou > best_iou:
                    best, best_iou = text, iou
        if best is not None:
            return best[:MAX_TEXT]
        return self.said(video_id, start, end)

    def said(self, video_id: str, start: float, end: float) -> str | None:
        """The lines said during the moment (subtitles, a transcript or recognised speech), joined."""
        return self._during("transcript", video_id, start, end)

    def written(self, video_id: str, start: float, end: float) -> str | None:
        """The text read on screen during the moment (``ingest --read-text``), joined."""
        return self._during("written", video_id, start, end)

    def _during(self, kind: str, video_id: str, start: float, end: float) -> str | None:
        lines = [x.text for x in self._cues(kind, video_id) if min(end, x.end) > max(start, x.start)]
        return " / ".join(dict.fromkeys(lines))[:MAX_TEXT] or None

    def _cues(self, kind: str, video_id: str) -> list[Any]:
        key = f"{kind}:{video_id}"
        if key not in self._subs:
            from momentsearch.errors import MomentSearchError

            try:
                subs = getattr(self.corpus, kind)(video_id) if self.entry(video_id) else []
            except (MomentSearchError, OSError):
                subs = []  # changed or gone since ingest: no text, the moment still shows
            self._subs[key] = subs
        return self._subs[key]
