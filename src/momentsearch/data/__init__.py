"""Corpus model, annotation loaders, feature stores, graded relevance tables, synthetic benchmark.

The loaders (``FORMATS``, ``detect_format``, ``load_corpus``) are imported on first use: a search over an
index folder reads no annotation format."""

from typing import Any

from momentsearch.data.corpus import Corpus, Moment, Subtitle, Video

_LOADERS = ("FORMATS", "detect_format", "load_corpus")


def __getattr__(name: str) -> Any:
    if name in _LOADERS:
        from momentsearch.data import loaders

        return getattr(loaders, name)
    raise AttributeError(f"module 'momentsearch.data' has no attribute {name!r}")


__all__ = ["Corpus", "Moment", "Subtitle", "Video", *_LOADERS]
