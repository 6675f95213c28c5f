"""An indexed video's file, checked, and a moment of it kept as a file (:mod:`momentsearch.video.export`):
what ``momentsearch export``, ``search --export`` and ``GET /v1/clips/{id}`` share.

Files are found by video id through the corpus manifest, never from a path a caller gives. A file that is no
longer the one ingested (size or modification time differ) is refused ( :class:`~momentsearch.errors.VideoChangedError`): its times would not match what the index holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from momentsearch.data.corpus_folder import CorpusFolder
from momentsearch.errors import (
    CorpusFolderError,
    MomentSearchError,
    QueryError,
    SearchIndexError,
    VideoChangedError,
    VideoFileError,
)
from momentsearch.fileio import atomic_open, atomic_path
from momentsearch.video.export import ExportedClip, check_span, clip_name, export_moment, moment_cues, stream_moment


def file_changed(video_id: str, entry: dict[str, Any], path: Path) -> str | None:
    """Why ``path`` is no longer the file ``video_id`` was ingested from (size or time differ), else None."""
    try:
        st = path.stat()
    except OSError as err:
        return f"video {video_id!r}: its file cannot be read ({err.strerror or err})"
    if "size" in entry and (st.st_size, st.st_mtime_ns) != (entry.get("size"), entry.get("mtime_ns", st.st_mtime_ns)):
        return (f"video {video_id!r} changed on disk since it was ingested ({entry['size']} -> {st.st_size} bytes); "
                "run momentsearch ingest and index again")
    return None


def index_corpus(path: str | Path) -> CorpusFolder:
    """The corpus an index folder (or a sharded index) was built from, found without loading the model."""
    from momentsearch.serving.indexing import find_corpus, is_index_folder, read_index_info
    from momentsearch.serving.shards import ShardManifest, is_sharded

    root = Path(path)
    if is_sharded(root):
        manifest = ShardManifest.read(root)
        root = manifest.folder_of(root, manifest.shards[0])
    if not is_index_folder(root):
        raise SearchIndexError(f"{path}: not an index folder (momentsearch index) or a sharded index")
    corpus = find_corpus(root, read_index_info(root))
    if corpus is None:
        raise VideoFileError(f"{path}: the corpus it was built from is gone (moved or deleted), so it has no video "
                             "files to cut")
    return corpus


@dataclass(frozen=True)
class VideoSource:
    """A video's file as ingest recorded it: the path, its recorded duration, and its cues."""

    video_id: str
    path: Path
    duration: float | None
    corpus: CorpusFolder

    @classmethod
    def of(cls, corpus: CorpusFolder | None, video_id: str) -> VideoSource:
        """The checked file of ``video_id``: a :class:`QueryError` for an unknown id, a :class:`VideoFileError`
        for no file, a :class:`VideoChangedError` for a file changed since ingest."""
        if corpus is None:
            raise VideoFileError(f"video {video_id!r}: the index has no corpus beside it, so no video files")
        try:
            entry = corpus.entry(video_id)
        except CorpusFolderError:
            raise QueryError(f"no video {video_id[:200]!r} in this index") from None
        path = corpus.video_path(video_id)
        if path is None:
            raise VideoFileError(f"video {video_id!r} has no video file (its corpus holds features only, or the file "
                                 "moved since ingest)")
        why = file_changed(video_id, entry, path)
        if why:
            raise VideoChangedError(why)
        dur = entry.get("duration")
        return cls(video_id, path, float(dur) if isinstance(dur, (int, float)) else None, corpus)

    def span(self, start: Any, end: Any, max_seconds: float | None = None) -> tuple[float, float]:
        return check_span(start, end, self.duration, max_seconds)

    def cues(self, start: float, end: float, fmt: str = "srt") -> str:
        """What is said during the moment, shifted to its start (empty: nothing said, or no cues stored)."""
        try:
            cues = self.corpus.transcript(self.video_id)
        except (MomentSearchError, OSError):
            cues = []
        return moment_cues(cues, start, end, fmt)

    def stream(self, start: float, end: float, max_seconds: float | None = None) -> Iterator[bytes]:
        """The moment as a fragmented MP4, in chunks (:func:`~momentsearch.video.export.stream_moment`)."""
        s, e = self.span(start, end, max_seconds)
        return stream_moment(self.path, s, e, duration=self.duration)


@dataclass(frozen=True)
class ExportedFile:
    path: Path
    cues: Path | None  # the SRT beside it (None: nothing said during the moment)
    clip: ExportedClip


def export_clip(corpus: CorpusFolder | None, video_id: str, start: Any, end: Any, out: str | Path,
                max_seconds: float | None = None, overwrite: bool = False) -> ExportedFile:
    """The moment into ``out``: a file path ending in ``.mp4``, or a folder (the file is then named
    :func:`~momentsearch.video.export.clip_name`). Written to a temporary name, then renamed; what is said during
    it goes beside it as ``NAME.srt``. An existing file is kept unless ``overwrite``."""
    src = VideoSource.of(corpus, video_id)
    s, e = src.span(start, end, max_seconds)
    out = Path(out)
    target = out if out.suffix.lower() == ".mp4" else out / clip_name(video_id, s, e)
    if target.exists() and not overwrite:
        raise QueryError(f"{target} exists; give another --out or remove it")
    with atomic_path(target) as tmp:
        clip = export_moment(src.path, s, e, tmp, duration=src.duration)
    text = src.cues(s, e)
    cues = None
    if text:
        cues = target.with_suffix(".srt")
        with atomic_open(cues) as fh:
            fh.write(text)
    return ExportedFile(target, cues, clip)


__all__ = ["ExportedFile", "VideoSource", "export_clip", "file_changed", "index_corpus"]
