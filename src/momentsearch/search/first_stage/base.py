"""Vector backends of the approximate first stage, behind one registry, chosen by a spec string.

A backend stores the rows of one vector array and returns each query's top ``k`` rows by inner
product (the families' vectors are unit vectors where they score by cosine). Like a visual
encoder, a backend is a small registered class chosen by name:

* ``exact``: no vector index: the family's own retriever scores every video (the reference);
* ``scan``: each clip's centroid code scanned, the best videos re-scored exactly (:mod:`.scan`, not
  a backend of this registry: it reduces clips to videos itself);
* ``faiss:FACTORY`` (``faiss`` = ``faiss:Flat``): FAISS in process, the index described by an
  index-factory string (``Flat``, ``IVF4096,Flat``, ``HNSW32``, ``IVF4096,PQ32``, ...); search
  parameters as FAISS's ParameterSpace writes them (``nprobe=32``, ``efSearch=128``);
* ``milvus[:URI]``: Milvus through pymilvus's client; no URI: milvus-lite embedded in a file inside
  the index folder; ``milvus:http://host:19530`` (and a ``token=`` parameter): a Milvus server or
  cluster. Parameters: ``index_type`` (FLAT, IVF_FLAT, HNSW, ...) and its build and search params.

Outside packages add backends through the ``momentsearch.first_stages`` entry-point group.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from momentsearch.errors import FirstStageError
from momentsearch.plugins import Registry

_REGISTRY: Registry = Registry("kind", "momentsearch.first_stages", (
    "momentsearch.search.first_stage.faiss_backend", "momentsearch.search.first_stage.milvus_backend"))
BACKENDS: dict[str, type[VectorBackend]] = _REGISTRY.classes


class VectorBackend(ABC):
    """Rows in with :meth:`build` (or :meth:`load` from a folder it saved), top rows out with :meth:`search`."""

    kind: ClassVar[str]
    version: ClassVar[int] = 1  # bump when a saved index of the same spec is no longer readable
    unbuilt_params: ClassVar[tuple[str, ...]] = ()  # search-time and client parameters: not in the built index

    def __init__(self, arg: str = "", **params: Any):
        self.arg = arg
        self.params = {k: str(v) for k, v in params.items()}

    @property
    def spec(self) -> str:
        return f"{self.kind}:{self.arg}" if self.arg else self.kind

    def key(self, data_key: str) -> str:
        """Names the built index: this backend's spec and parameters over these rows."""
        built = sorted((k, v) for k, v in self.params.items() if k not in self.unbuilt_params)
        blob = json.dumps([self.kind, self.version, self.arg, built, data_key])
        return hashlib.sha1(blob.encode()).hexdigest()[:16]

    @abstractmethod
    def build(self, rows: np.ndarray, folder: Path, name: str, progress: bool = False) -> None:
        """Index ``rows`` (N, d) float32 (row ids 0..N-1); ``folder``/``name``: where it may keep files."""

    @abstractmethod
    def load(self, folder: Path, name: str, n_rows: int) -> bool:
        """Open what :meth:`build` saved (True), or False when it is not there or not whole."""

    @abstractmethod
    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(B, d) float32 -> (scores (B, k) float32, row ids (B, k) int64), best first; id -1 pads."""

    @property
    def max_k(self) -> int:
        return 1 << 30

    @property
    def nbytes(self) -> int:
        """Bytes the built index occupies (memory or files)."""
        return 0

    def close(self) -> None:
        pass


def register_backend(cls: type[VectorBackend]) -> type[VectorBackend]:
    return _REGISTRY.register(cls)


def backend_names() -> list[str]:
    """Every first stage a spec can name: ``exact``, ``scan`` (a compressed scan, :mod:`.scan`) and the backends."""
    return ["exact", "scan", *_REGISTRY.names()]


def parse_params(items: list[str] | None) -> dict[str, str]:
    """``["nprobe=32", "index_type=HNSW"]`` -> a dict; a clear error for an item without ``=``."""
    out = {}
    for item in items or []:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise FirstStageError(f"first-stage parameter {item!r} is not KEY=VALUE (e.g. nprobe=32, efSearch=128)")
        out[key.strip()] = value.strip()
    return out


def create_backend(spec: str, **params: Any) -> VectorBackend:
    """``faiss``, ``faiss:HNSW32``, ``milvus``, ``milvus:http://host:19530``; ``params`` go to the backend."""
    _REGISTRY.load()
    kind, _, arg = spec.partition(":")
    if kind in ("exact", "scan"):
        raise FirstStageError(f"{kind!r} is not a vector backend: build it with build_first_stage")
    if kind not in BACKENDS:
        raise FirstStageError(f"unknown first stage {spec!r}; known: {backend_names()} "
                              "(e.g. exact, faiss:Flat, faiss:HNSW32, faiss:IVF1024,Flat, milvus)")
    return BACKENDS[kind](arg, **params)
