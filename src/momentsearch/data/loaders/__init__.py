"""One loader per annotation format, a registry of them, and format detection.

``load_corpus(path)`` picks the loader from the file's name and content; ``format=`` forces one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from momentsearch.data.corpus import Corpus
from momentsearch.data.loaders._common import parse_json, read_json, require_file, text_lines
from momentsearch.data.loaders.activitynet import load_activitynet
from momentsearch.data.loaders.charades_sta import load_charades_sta
from momentsearch.data.loaders.didemo import load_didemo
from momentsearch.data.loaders.jsonl import iter_jsonl_corpus, load_jsonl_corpus, write_jsonl_corpus
from momentsearch.data.loaders.tacos import load_tacos
from momentsearch.data.loaders.tvr import load_tvr
from momentsearch.data.loaders.tvr_ranking import (
    TVRRanking,
    load_tvr_ranking,
    write_tvr_ranking,
)
from momentsearch.errors import AnnotationError

FORMATS: dict[str, Callable[..., Corpus]] = {
    "tvr": load_tvr,
    "charades-sta": load_charades_sta,
    "didemo": load_didemo,
    "activitynet": load_activitynet,
    "tacos": load_tacos,
    "jsonl": load_jsonl_corpus,
}

CORPUS_FILE_IN_DIR = "corpus.jsonl"  # a synthetic benchmark folder holds its corpus here


def detect_format(path: str | Path) -> str:
    """Guess the format from the file name and its first record."""
    p = Path(path)
    if p.is_dir():
        if (p / CORPUS_FILE_IN_DIR).exists():
            return "jsonl"
        raise AnnotationError(p, f"a folder, but it has no {CORPUS_FILE_IN_DIR}; name an annotation file")
    require_file(p)
    suffix = p.suffix.lower()
    if suffix == ".txt":
        return "charades-sta"
    if suffix == ".jsonl":
        lineno, first = next(((n, ln) for n, ln in text_lines(p) if ln.strip()), (1, ""))
        rec = parse_json(p, first, lineno) if first else {}
        if isinstance(rec, dict) and "record" in rec:
            return "jsonl"
        if isinstance(rec, dict) and ("desc_id" in rec or "vid_name" in rec):
            return "tvr"
        raise AnnotationError(p, "a .jsonl file that is neither momentsearch's corpus format nor TVR's", line=1)
    if suffix == ".json":
        data = read_json(p)
        if isinstance(data, list):
            if data and isinstance(data[0], dict) and "pair_id" in data[0] and "relevance" in data[0]:
                raise AnnotationError(p, "this is a TVR-Ranking file (graded query-moment pairs), not a corpus; "
                                         "score rankings against it with `evaluate --ranking` or "
                                         "`evaluate-predictions --ranking`")
            return "didemo"
        first = next(iter(data.values()), None) if isinstance(data, dict) else None
        if isinstance(first, dict):
            if "retrieval_pool" in first:
                return "mvmr"
            if "fps" in first or "num_frames" in first:
                return "tacos"
            if "timestamps" in first and "duration" in first:
                return "activitynet"
            if "test_public" in data or all(isinstance(v, list) for v in first.values()):
                raise AnnotationError(p, "this is TVR's video2dur file, not a query file; load the tvr_*_release.jsonl")
    raise AnnotationError(p, "cannot tell the format; pass --format tvr|charades-sta|didemo|activitynet|tacos|jsonl")


def load_corpus(path: str | Path, format: str | None = None, **kwargs: object) -> Corpus:
    """Load any supported annotation file (or a synthetic benchmark folder)."""
    p = Path(path)
    fmt = format or detect_format(p)
    if fmt == "mvmr":
        raise AnnotationError(p, "this is an MVMR pool file (retrieval pools over an annotation split), not a corpus; "
                                 "`momentsearch data info` reports it, `momentsearch.data.mvmr.load_mvmr_pools` loads it")
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; choose one of {sorted(FORMATS)}")
    if p.is_dir():
        p = p / CORPUS_FILE_IN_DIR
    return FORMATS[fmt](p, **kwargs)


__all__ = [
    "FORMATS",
    "detect_format",
    "load_corpus",
    "load_activitynet",
    "load_charades_sta",
    "load_didemo",
    "iter_jsonl_corpus",
    "load_jsonl_corpus",
    "load_tacos",
    "load_tvr",
    "load_tvr_ranking",
    "TVRRanking",
    "write_jsonl_corpus",
    "write_tvr_ranking",
]
