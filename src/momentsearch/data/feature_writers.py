"""Writing feature stores: HDF5 files and folders of ``.npy`` files, each written atomically.

Arrays are checked before anything is written (2-D, the store's dim, finite, finite after the cast
to the stored dtype), and each video's CRC-32 is stored beside it so that every read can check it.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import h5py
import numpy as np

from momentsearch.data.features import CHECKSUM_ATTR, CHECKSUMS_FILE, check_clip_array, checksum, h5_key
from momentsearch.errors import FeatureError
from momentsearch.fileio import atomic_path, write_json
from momentsearch.readers import read_json


class HDF5FeatureWriter:
    """Write (or extend) an HDF5 feature file atomically.

    Arrays are validated (2-D, the file's dim, finite, finite after the cast to fp16) before they
    are written. The target is replaced only when the ``with`` block exits without an error; with
    ``append=True`` the existing file is copied first and its datasets are kept.
    """

    def __init__(
        self,
        path: str | Path,
        dim: int | None = None,
        dtype: Any = np.float16,
        append: bool = False,
        attrs: Mapping[str, Any] | None = None,
        overwrite_ids: bool = False,
    ):
        self.path = Path(path)
        self.dim = dim
        self.dtype = np.dtype(dtype)
        self.append = append
        self.attrs = dict(attrs or {})
        self.overwrite_ids = overwrite_ids
        self._ctx: Any = None
        self._h5: h5py.File | None = None
        self.n_written = 0

    def __enter__(self) -> HDF5FeatureWriter:
        self._ctx = atomic_path(self.path)
        tmp = self._ctx.__enter__()
        if self.append and self.path.exists():
            shutil.copyfile(self.path, tmp)
            self._h5 = h5py.File(tmp, "a")
            if "dim" in self._h5.attrs:
                old = int(self._h5.attrs["dim"])
                if self.dim is not None and self.dim != old:
                    raise FeatureError(f"{self.path}: holds dim {old}, cannot append dim {self.dim}")
                self.dim = old
        else:
            self._h5 = h5py.File(tmp, "w")
        return self

    def add(self, video_id: str, features: np.ndarray) -> None:
        assert self._h5 is not None, "use HDF5FeatureWriter inside a with-block"
        arr = np.asarray(features)
        where = f"{self.path} [{video_id}] (being written)"
        if not np.issubdtype(arr.dtype, np.floating) and not np.issubdtype(arr.dtype, np.integer):
            raise FeatureError(f"{where}: features must be numbers, got dtype {arr.dtype}")
        check_clip_array(arr, self.dim, where)
        with np.errstate(over="ignore"):
            stored = arr.astype(self.dtype)
        if not np.isfinite(stored).all():
            raise FeatureError(f"{where}: values overflow {self.dtype} (largest |x| = {np.abs(arr).max():g})")
        if self.dim is None:
            self.dim = int(arr.shape[1])
        key = h5_key(video_id)
        if key in self._h5:
            if not self.overwrite_ids:
                raise FeatureError(f"{where}: video id already stored (pass overwrite_ids=True to replace)")
            del self._h5[key]
        self._h5.create_dataset(key, data=stored).attrs[CHECKSUM_ATTR] = checksum(stored)
        self.n_written += 1

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._h5 is not None and self._ctx is not None
        try:
            if exc_type is None:
                if self.dim is not None:
                    self._h5.attrs["dim"] = self.dim
                for k, v in self.attrs.items():
                    self._h5.attrs[k] = v
                self._h5.attrs["format"] = "momentsearch-features"
        finally:
            self._h5.close()
        self._ctx.__exit__(exc_type, exc, tb)


def write_features(
    path: str | Path,
    features: Mapping[str, np.ndarray] | Iterable[tuple[str, np.ndarray]],
    dim: int | None = None,
    dtype: Any = np.float16,
    append: bool = False,
    attrs: Mapping[str, Any] | None = None,
) -> int:
    """Write {video_id: (clips, dim)} to an HDF5 file atomically; returns the number written."""
    items: Iterator[tuple[str, np.ndarray]] = iter(features.items() if isinstance(features, Mapping) else features)
    with HDF5FeatureWriter(path, dim=dim, dtype=dtype, append=append, attrs=attrs) as w:
        for vid, arr in items:
            w.add(vid, arr)
    return w.n_written


def write_npy_features(folder: str | Path, features: Mapping[str, np.ndarray], dtype: Any = np.float32) -> int:
    """Write one ``<video_id>.npy`` per video, each atomically."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    sums_file = folder / CHECKSUMS_FILE
    try:
        sums = read_json(sums_file, FeatureError, "checksums file") if sums_file.is_file() else {}
    except FeatureError:
        sums = {}  # unreadable: rewritten below for what is written now
    if not isinstance(sums, dict):
        sums = {}
    for vid in features:  # no stale checksum beside a new file, even if killed half-way
        sums.pop(vid, None)
    write_json(sums_file, sums, indent=None)
    new = {}
    for vid, arr in features.items():
        arr = check_clip_array(np.asarray(arr), None, f"{folder / vid}.npy (being written)")
        stored = arr.astype(dtype)
        with atomic_path(folder / f"{h5_key(vid)}.npy") as tmp, open(tmp, "wb") as fh:
            np.save(fh, stored)
        new[vid] = checksum(stored)
    write_json(sums_file, {**sums, **new}, indent=None)
    return len(features)
