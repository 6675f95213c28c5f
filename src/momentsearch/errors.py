"""Errors a user can act on: each names the file (and line or record) that is wrong."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

MAX_MESSAGE = 1000  # characters of an error message; a huge field echoed in full would flood the terminal


class MomentSearchError(Exception):
    """Base class of every error momentsearch raises on purpose. Its message is cut to a readable
    length (a 1,000,000-character field must not become a 1 MB error line)."""

    def __str__(self) -> str:
        text = super().__str__()
        if len(text) <= MAX_MESSAGE:
            return text
        return f"{text[:MAX_MESSAGE]}... [{len(text) - MAX_MESSAGE} more characters cut]"


class AnnotationError(MomentSearchError, ValueError):
    """A malformed annotation file: names the file and the line (or the record) at fault."""

    def __init__(self, path: str | Path, message: str, line: int | None = None, record: str | None = None):
        self.path = str(path)
        self.line = line
        self.record = record
        where = self.path
        if line is not None:
            where += f":{line}"
        if record is not None:
            where += f" (record {record})"
        super().__init__(f"{where}: {message}")


def annotation_error(path: str | Path, line: int | None = None, cls: type[AnnotationError] | None = None
                     ) -> Callable[[str], AnnotationError]:
    """The ``error`` callback for :mod:`momentsearch.readers`: its "PATH[:LINE]: what" as an :class:`AnnotationError`
    (or ``cls``, e.g. :class:`SubtitleError`) naming the file and the line; ``line``: the line to name instead
    (a JSONL record's)."""
    import re

    kind = cls or AnnotationError

    def error(message: str) -> AnnotationError:
        m = re.match(rf"{re.escape(str(path))}(?::(\d+))?: (.*)", message, re.S)
        if m is None:
            return kind(path, message, line=line)
        return kind(path, m.group(2), line=line if line is not None else (int(m.group(1)) if m.group(1) else None))
    return error


class CorpusError(MomentSearchError, ValueError):
    """A corpus that breaks the corpus model's rules (empty ids, negative durations, unknown videos);
    loaders re-raise it as an :class:`AnnotationError` naming their file."""


class FeatureError(MomentSearchError, ValueError):
    """A missing, corrupt or inconsistent feature file or feature array."""


class MissingFeatureError(FeatureError, KeyError):
    """A video id that the feature store does not hold."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class PredictionError(MomentSearchError, ValueError):
    """A prediction (submission) file that cannot be evaluated as it is."""


class ConfigError(MomentSearchError, ValueError):
    """A configuration file with unknown keys or values of the wrong type."""


class DatasetError(MomentSearchError, ValueError):
    """A dataset section that names missing files, or files that do not fit together."""


class RelevanceTableError(MomentSearchError, ValueError):
    """A relevance table file (``.npz``) that is not one, or whose arrays disagree with each other."""


class CheckpointError(MomentSearchError, ValueError):
    """A checkpoint that is missing, unreadable, of an unknown family or of another format version."""


class SearchIndexError(MomentSearchError, ValueError):
    """A search index that is missing, of another version, or built by another model."""


class QueryError(MomentSearchError, ValueError):
    """A query that cannot be searched: empty, or free text for a model trained on precomputed features."""


class VideoDecodeError(MomentSearchError, ValueError):
    """A file that cannot be decoded as a video: not media, no video stream, empty, corrupt or truncated."""


class AudioDecodeError(VideoDecodeError):
    """An audio stream that cannot be decoded, or runs past the decoding budget (the video is kept without it)."""


class SpeechError(MomentSearchError, ValueError):
    """A speech recogniser that is unknown, cannot be loaded, or returned something that is not timed words."""


class EncoderError(MomentSearchError, ValueError):
    """A visual encoder that is unknown, cannot be loaded (weights, package), or does not fit a corpus."""


class CorpusFolderError(MomentSearchError, ValueError):
    """A corpus folder that is missing, malformed, or made by another encoder than the one asked for."""


class SubtitleError(AnnotationError):
    """A malformed SRT or WebVTT file: names the file and the line."""


class FirstStageError(MomentSearchError, ValueError):
    """A first-stage backend that is unknown, not installed or unreachable, a spec it cannot build, or a
    model family whose retriever cannot be served by vectors."""


class ShardError(SearchIndexError):
    """A sharded index whose manifest (``shards.json``) or one of whose shard folders is damaged, missing, or
    built by another model than the others: names the shard."""


class ShardUnavailableError(MomentSearchError):
    """A shard that answered no search (every replica dead or restarting): the service's 503, never a partial
    answer; names the shards."""


class VideoFileError(MomentSearchError, ValueError):
    """An indexed video whose file cannot be served: there is none (a corpus of features, or the file moved since
    ingest; the service's 404)."""


class VideoChangedError(VideoFileError):
    """An indexed video whose file changed on disk since ingest: its times no longer match the index (a 409)."""
