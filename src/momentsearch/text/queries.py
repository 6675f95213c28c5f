"""Where a model's query token features come from: one interface, three sources.

* :class:`CachedTextFeatures`: all-MiniLM-L6-v2 token states, computed once per text and cached in
  an HDF5 file (training and evaluation over a dataset's captions);
* :class:`PrecomputedQueryFeatures`: an HDF5 file keyed by query id, as TVR's released RoBERTa
  query features are (``tvr_query_pretrained_w_query.h5``); free text cannot be encoded;
* :class:`InMemoryTextFeatures`: MiniLM in memory with an LRU cache and a lock, for the Python API
  and servers: nothing is written per query, so concurrent callers are safe. Features are rounded
  through fp16 as the HDF5 cache stores them, so a query scores the same by either path.

:func:`annotated_moments` reads one of them for a split's annotated moments: what every family's training
batches start from.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from momentsearch.data.corpus import Corpus, Moment
from momentsearch.data.features import FeatureStore, HDF5Features
from momentsearch.errors import DatasetError, MissingFeatureError, QueryError
from momentsearch.text.encoders import MINILM_DIM, MiniLMTokenEncoder, QueryFeatureCache
from momentsearch.text.query_encoders import check_text


class QueryFeatures(Protocol):
    dim: int

    def ensure(self, moments: Sequence[Moment], progress: bool = True) -> None: ...
    def get(self, query_id: str, text: str) -> np.ndarray: ...


def _check_text(text: str) -> str:
    if not isinstance(text, str) or not text.strip():
        raise QueryError("the query is empty: type a few words, e.g. \"a person opens the fridge\"")
    return check_text(text)


class TextQueries(Protocol):
    """Free text -> each query's token features, many at once: what a searcher encodes its queries with."""

    def encode_many(self, texts: Sequence[str], progress: bool = False) -> list[np.ndarray]: ...


class CachedTextFeatures:
    """MiniLM token features by text, cached on disk."""

    dim = MINILM_DIM

    def __init__(self, path: str | Path, encoder: Any = None):
        self.cache = QueryFeatureCache(path, encoder)
        self.dim = self.cache.encoder.dim

    def ensure(self, moments: Sequence[Moment], progress: bool = True) -> None:
        self.cache.ensure([m.text for m in moments], progress=progress)

    def get(self, query_id: str, text: str) -> np.ndarray:
        return self.cache.get(_check_text(text))

    def close(self) -> None:
        self.cache.close()


class PrecomputedQueryFeatures:
    """Token features stored per query id (one HDF5 dataset per id, e.g. TVR's RoBERTa release)."""

    def __init__(self, path: str | Path):
        self.src = HDF5Features(path)
        self.dim = self.src.dim

    def ensure(self, moments: Sequence[Moment], progress: bool = True) -> None:
        missing = [m.query_id for m in moments if m.query_id not in self.src]
        if missing:
            raise MissingFeatureError(f"{self.src.path}: no features for {len(missing)} query id(s), "
                                      f"e.g. {missing[:5]}")

    def get(self, query_id: str, text: str) -> np.ndarray:
        if query_id not in self.src:
            raise self._no_free_text(repr(query_id))
        return self.src[query_id]

    def encode_many(self, texts: Sequence[str], progress: bool = False) -> list[np.ndarray]:
        """Free text has no query id: always an error that says why."""
        raise self._no_free_text(f"the free text {texts[0][:60]!r}" if texts else "free text")

    def _no_free_text(self, what: str) -> QueryError:
        return QueryError(f"{self.src.path}: the model reads precomputed query features by query id, and "
                          f"there are none for {what}: free-text search needs a model trained on "
                          "MiniLM features (leave dataset.query_features empty)")

    def close(self) -> None:
        self.src.close()


class InMemoryTextFeatures:
    """MiniLM in memory; the last ``maxsize`` texts are kept (LRU). Thread-safe."""

    dim = MINILM_DIM

    def __init__(self, maxsize: int = 4096, encoder: MiniLMTokenEncoder | None = None):
        self.encoder = encoder or MiniLMTokenEncoder()
        self.maxsize = maxsize
        self._lru: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def ensure(self, moments: Sequence[Moment], progress: bool = True) -> None:
        self.encode_many([m.text for m in moments], progress)

    def encode_many(self, texts: Sequence[str], progress: bool = False) -> list[np.ndarray]:
        keys = [_check_text(t).strip() for t in texts]
        with self._lock:
            missing = sorted({k for k in keys if k not in self._lru})
            if missing:  # rounded through fp16, exactly as the HDF5 cache stores them
                for k, f in zip(missing, self.encoder.encode(missing, progress=progress), strict=True):
                    self._lru[k] = f.astype(np.float16).astype(np.float32)
            out = []
            for k in keys:
                self._lru.move_to_end(k)
                out.append(self._lru[k])
            while len(self._lru) > self.maxsize:
                self._lru.popitem(last=False)
        return out

    def get(self, query_id: str, text: str) -> np.ndarray:
        return self.encode_many([text])[0]


def dataset_query_features(query_features: str, query_cache: str, encoder: Any = None) -> QueryFeatures:
    """The source a dataset section names: precomputed by query id, else the cache of ``encoder`` (the family's
    query encoder, :meth:`~momentsearch.models.family.ModelFamily.query_encoder`; default MiniLM's tokens)."""
    if query_features:
        return PrecomputedQueryFeatures(query_features)
    return CachedTextFeatures(query_cache, encoder)


def annotated_moments(corpus: Corpus, store: FeatureStore, queries: QueryFeatures
                      ) -> tuple[list[Moment], list[np.ndarray], dict[str, int]]:
    """A split's moments with ground truth, their fp16 query token features, and the clip count of
    each of their videos: what every family's training batches start from."""
    moments = [m for m in corpus.moments if m.has_ground_truth]
    if not moments:
        raise DatasetError(f"{corpus.name}: no annotated moments to train on")
    queries.ensure(moments)
    tokens = [queries.get(m.query_id, m.text).astype(np.float16) for m in moments]
    n_clips = {v: len(store[v]) for v in {m.video_id for m in moments}}  # type: ignore[misc]
    return moments, tokens, n_clips  # type: ignore[return-value]
