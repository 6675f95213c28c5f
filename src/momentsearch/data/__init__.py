"""Corpus model, annotation loaders, feature stores, graded relevance tables, synthetic benchmark."""

from momentsearch.data.corpus import Corpus, Moment, Subtitle, Video
from momentsearch.data.loaders import FORMATS, detect_format, load_corpus

__all__ = ["Corpus", "Moment", "Subtitle", "Video", "FORMATS", "detect_format", "load_corpus"]
