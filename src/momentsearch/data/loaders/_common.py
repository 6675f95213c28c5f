"""Helpers shared by the loaders: JSON reading and field checks that name file and line."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from momentsearch.data.corpus import Span, clean_span
from momentsearch.errors import AnnotationError, CorpusError, annotation_error
from momentsearch.readers import decode_text, is_finite_number, parse_json_text

SPLIT_WORDS = ("test_public", "test_challenge", "train", "val", "test")


F = TypeVar("F", bound=Callable[..., Any])


def names_its_file(load: F) -> F:
    """A loader whose corpus-model errors (an empty id, a negative duration, ...) are re-raised as
    :class:`AnnotationError` naming the file it was given (its first argument)."""
    @functools.wraps(load)
    def wrapper(path: str | Path, *args: Any, **kwargs: Any) -> Any:
        try:
            return load(path, *args, **kwargs)
        except CorpusError as e:
            raise AnnotationError(path, str(e)) from None

    return wrapper  # type: ignore[return-value]


def infer_split(path: Path) -> str | None:
    """'charades_sta_train.txt' -> 'train', 'tvr_test_public_release.jsonl' -> 'test_public'."""
    stem = path.name.lower()
    for word in SPLIT_WORDS:
        if re.search(rf"(^|[^a-z]){word}([^a-z]|$)", stem):
            return word
    return None


def require_file(path: str | Path) -> Path:
    p = Path(path)
    if not p.exists():
        raise AnnotationError(p, "file not found")
    if p.is_dir():
        raise AnnotationError(p, "is a directory, expected an annotation file")
    if not p.is_file():
        raise AnnotationError(p, "not a regular file (a pipe or a device?); name an annotation file")
    return p


def read_text(path: Path) -> str:
    """The file as UTF-8 text, a leading byte-order mark dropped; invalid UTF-8 names its line
    (:func:`momentsearch.readers.decode_text`)."""
    return decode_text(path, path.read_bytes(), annotation_error(path))


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line without its line ending) for every line of a UTF-8 file."""
    for lineno, line in enumerate(read_text(path).split("\n"), start=1):
        yield lineno, line.removesuffix("\r")


class _DuplicateKey(Exception):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        raise _DuplicateKey(next(k for k, _ in pairs if k in seen or seen.add(k)))  # type: ignore[func-returns-value]
    return out


def parse_json(path: Path, text: str, line: int | None = None) -> Any:
    """``json.loads`` whose failures (syntax, nesting too deep, a key given twice in one object: one
    video's queries would silently replace the other's) name the file and the line."""
    try:
        return parse_json_text(text, str(path), annotation_error(path, line), object_pairs_hook=_no_duplicates)
    except _DuplicateKey as e:
        key = str(e.args[0])
        if line is None:  # the line of the key's second appearance
            first = text.find(json.dumps(key))
            second = text.find(json.dumps(key), first + 1)
            line = text.count("\n", 0, second) + 1 if second >= 0 else None
        raise AnnotationError(path, f"the key {key[:80]!r} appears twice in one object; every key (video id, "
                                    "field) must be unique", line=line) from None


def read_json(path: Path) -> Any:
    return parse_json(path, read_text(path))


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield (line number, record) for every non-blank line; a bad line names its number."""
    return _records(path, text_lines(path))


def stream_jsonl(path: Path, skip_prefix: bytes | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """:func:`iter_jsonl` read line by line instead of whole (a file larger than memory); a line that
    begins with ``skip_prefix`` is passed over unparsed. Errors are the same, naming the line."""
    return _records(path, _streamed_lines(path, skip_prefix))


def _records(path: Path, lines: Iterator[tuple[int, str]]) -> Iterator[tuple[int, dict[str, Any]]]:
    for lineno, line in lines:
        if not line.strip():
            continue
        rec = parse_json(path, line, lineno)
        if not isinstance(rec, dict):
            raise AnnotationError(path, f"expected a JSON object, got {type(rec).__name__}", line=lineno)
        yield lineno, rec


def _streamed_lines(path: Path, skip_prefix: bytes | None) -> Iterator[tuple[int, str]]:
    try:
        fh = path.open("rb")
    except OSError as e:
        raise AnnotationError(path, f"cannot read: {e.strerror or e}") from None
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            if skip_prefix is not None and raw.startswith(skip_prefix):
                continue
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise AnnotationError(path, f"not valid UTF-8: byte {raw[e.start]:#04x} at column {e.start + 1}; "
                                            "save the file as UTF-8", line=lineno) from None
            yield lineno, line.removeprefix("\ufeff") if lineno == 1 else line


def line_of_key(path: Path, key: str) -> int | None:
    """The line where a top-level JSON key first appears (for errors in dict-shaped files)."""
    try:
        text = read_text(path)
    except (OSError, AnnotationError):
        return None
    pos = text.find(json.dumps(key))
    return None if pos < 0 else text.count("\n", 0, pos) + 1


def get_field(rec: dict[str, Any], key: str, kind: type | tuple[type, ...], err: Any) -> Any:
    """``rec[key]`` checked against ``kind``; ``err(msg)`` builds the error to raise."""
    if key not in rec:
        raise err(f"missing field {key!r}")
    val = rec[key]
    if kind in (float, (int, float)):
        if not is_finite_number(val):
            raise err(f"field {key!r} must be a finite number, got {val!r}")
        return float(val)
    if not isinstance(val, kind) or isinstance(val, bool) and kind is int:
        raise err(f"field {key!r} must be {getattr(kind, '__name__', kind)}, got {type(val).__name__} {val!r}")
    return val


def optional_field(rec: dict[str, Any], key: str, kind: type | tuple[type, ...], err: Any) -> Any:
    """``rec[key]`` checked like :func:`get_field`, or None when the key is missing or null."""
    if rec.get(key) is None:
        return None
    return get_field(rec, key, kind, err)


def parse_span(raw: Any, duration: float | None, err: Any) -> tuple[Span, list[str]]:
    """A [start, end] pair -> cleaned span plus the names of quirks that were corrected."""
    if (
        not isinstance(raw, (list, tuple))
        or len(raw) != 2
        or not all(is_finite_number(x) for x in raw)
    ):
        raise err(f"span must be [start, end] with two finite numbers, got {raw!r}")
    st, ed = float(raw[0]), float(raw[1])
    span, _ = clean_span(st, ed, duration)
    return span, span_quirks(st, ed, duration, span)


def span_quirks(st: float, ed: float, duration: float | None, span: Span) -> list[str]:
    """The names of what cleaning the annotated (st, ed) into ``span`` corrected or met."""
    quirks = []
    if st > ed:
        quirks.append("start_after_end")
    if duration is not None and max(st, ed) > duration + 1e-9:
        quirks.append("end_after_duration")
    if min(st, ed) < 0:
        quirks.append("negative_start")
    if span[1] <= span[0]:
        quirks.append("zero_length_span")  # kept (it can match nothing at tIoU > 0), and counted
    return quirks


def moment_meta(raw_spans: list[list[float]], quirks: list[str], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Meta of a loaded moment: the raw annotated spans are kept when cleaning changed them."""
    meta: dict[str, Any] = dict(extra or {})
    if quirks:
        meta["quirks"] = sorted(set(quirks))
        meta["raw_spans"] = raw_spans
    return meta


ErrorFactory = Callable[[str], AnnotationError]


def iter_video_records(path: Path, fields: str) -> Iterator[tuple[str, dict[str, Any], ErrorFactory]]:
    """For files shaped {video_id: {...}} (ActivityNet Captions, TACoS): yield (video id, record,
    a factory of errors that name the file, the line of the key and the video)."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise AnnotationError(path, f"expected {{video_id: {{{fields}}}}}")
    for vid, rec in data.items():
        def err(msg: str, _vid: str = vid) -> AnnotationError:
            return AnnotationError(path, msg, line=line_of_key(path, _vid), record=_vid)

        if not isinstance(rec, dict):
            raise err(f"expected an object with {fields}")
        yield vid, rec, err


def paired_sentences(rec: dict[str, Any], err: ErrorFactory) -> list[tuple[Any, str]]:
    """The (timestamp, sentence) pairs of a record, checked: equal lengths, non-empty sentences."""
    stamps = get_field(rec, "timestamps", list, err)
    sents = get_field(rec, "sentences", list, err)
    if len(stamps) != len(sents):
        raise err(f"{len(stamps)} timestamps but {len(sents)} sentences")
    for i, sent in enumerate(sents):
        if not isinstance(sent, str) or not sent.strip():
            raise err(f"sentence {i} is empty or not a string")
    return [(ts, sent.strip()) for ts, sent in zip(stamps, sents, strict=True)]
