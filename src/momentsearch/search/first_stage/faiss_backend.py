"""FAISS in process: an index-factory string over inner product, saved beside the index folder's arrays.

Build-time parameters: ``efConstruction`` (HNSW; 80 by default, twice FAISS's: these clip vectors
come in runs of near-duplicates, on which a sparser graph loses recall), ``train_size`` (rows sampled
to train IVF/PQ quantizers; default max(100,000, 64 x nlist)). Every other parameter is a
search-time one that FAISS's ParameterSpace sets (``nprobe``, ``efSearch``, ...). Defaults where the
spec names none: ``nprobe=32`` for IVF; for HNSW ``efSearch`` is at least the number of rows asked
for (128 or more), as a beam narrower than k cannot return k good rows (measured in
``benchmarks/first_stage_scale.py``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import numpy as np

from momentsearch.console import say
from momentsearch.errors import FirstStageError
from momentsearch.search.first_stage.base import VectorBackend, register_backend

BUILD_PARAMS = ("efConstruction", "train_size")


def _faiss() -> Any:
    try:
        import faiss
    except ImportError:
        raise FirstStageError("the faiss first stage needs FAISS: pip install 'momentsearch[service]' "
                              "(or faiss-cpu)") from None
    return faiss


@register_backend
class FaissBackend(VectorBackend):
    kind = "faiss"
    unbuilt_params = ("nprobe", "efSearch", "k_factor", "max_codes", "quantizer_efSearch", "ht", "polysemous_ht")

    def __init__(self, arg: str = "", **params: Any):
        super().__init__(arg or "Flat", **params)
        self.index: Any = None
        self.path: Path | None = None

    def _search_params(self) -> str:
        p = {k: v for k, v in self.params.items() if k not in BUILD_PARAMS}
        if "IVF" in self.arg and "nprobe" not in p:
            p["nprobe"] = "32"
        if "HNSW" in self.arg and "efSearch" not in p:
            p["efSearch"] = "128"  # raised to k per search
        return ",".join(f"{k}={v}" for k, v in p.items())

    def _configure(self) -> None:
        params = self._search_params()
        if params:
            try:
                self._faiss().ParameterSpace().set_index_parameters(self.index, params)
            except RuntimeError as e:
                raise FirstStageError(f"faiss:{self.arg}: cannot set {params!r}: {str(e).strip()[:300]}") from None

    @staticmethod
    def _faiss() -> Any:
        return _faiss()

    def build(self, rows: np.ndarray, folder: Path, name: str, progress: bool = False) -> None:
        faiss = self._faiss()
        n, d = rows.shape
        try:
            index = faiss.index_factory(d, self.arg, faiss.METRIC_INNER_PRODUCT)
        except RuntimeError as e:
            raise FirstStageError(f"faiss:{self.arg}: not an index-factory string FAISS can build for dim {d} "
                                  f"({str(e).strip().splitlines()[-1][:200]})") from None
        if isinstance(index, faiss.IndexHNSW):
            index.hnsw.efConstruction = int(self.params.get("efConstruction", 80))
        if not index.is_trained:
            m = re.search(r"IVF(\d+)", self.arg)
            nlist = int(m.group(1)) if m else 256
            if n < nlist:
                raise FirstStageError(f"faiss:{self.arg}: {nlist} lists need at least {nlist} vectors to train, "
                                      f"the index has {n}; take fewer lists (e.g. IVF{max(1, int(n ** 0.5))},Flat)")
            size = min(n, int(self.params.get("train_size", max(100_000, 64 * nlist))))
            sample = rows[np.sort(np.random.default_rng(0).choice(n, size, replace=False))] if size < n else rows
            index.train(np.ascontiguousarray(sample, np.float32))
        step = 200_000
        for s in range(0, n, step):
            index.add(np.ascontiguousarray(rows[s: s + step], np.float32))
            if progress:
                say(f"  faiss:{self.arg} {name}: {min(s + step, n):,}/{n:,} vectors")
        self.index = index
        self._configure()
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{name}.faiss.tmp"
        faiss.write_index(index, str(tmp))
        os.replace(tmp, folder / f"{name}.faiss")
        self.path = folder / f"{name}.faiss"

    def load(self, folder: Path, name: str, n_rows: int) -> bool:
        path = folder / f"{name}.faiss"
        if not path.is_file():
            return False
        try:
            index = self._faiss().read_index(str(path))
        except RuntimeError:
            return False  # damaged: built again
        if index.ntotal != n_rows:
            return False
        self.index, self.path = index, path
        self._configure()
        return True

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(self.index, self._faiss().IndexHNSW) and "efSearch" not in self.params \
                and self.index.hnsw.efSearch < k:
            self.index.hnsw.efSearch = int(k)
        d, i = self.index.search(np.ascontiguousarray(queries, np.float32), int(k))
        return d, i.astype(np.int64)

    @property
    def nbytes(self) -> int:
        return self.path.stat().st_size if self.path is not None and self.path.is_file() else 0
