"""Feature stores: video id -> float array (n_clips, dim), read lazily.

Two on-disk layouts are read:

* HDF5, one dataset per video id at the file's root (TVR's released feature files use this
  layout, so they open unchanged). momentsearch writes fp16 datasets and records ``dim`` and
  ``clip_length`` as file attributes.
* A folder of per-video ``<video_id>.npy`` files (memory-mapped on read).

A :class:`FeatureStore` pairs a visual stream with an optional second (subtitle) stream.
Every read is checked: a missing id, a wrong shape or dim, NaN/inf and unreadable files raise
errors naming the file and the video. Writes go to a temp file that is renamed into place only
when the whole write succeeded, so a failed write never touches what is already stored.
"""

from __future__ import annotations

import difflib
import json
import shutil
import zlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import h5py
import numpy as np

from momentsearch.errors import FeatureError, MissingFeatureError
from momentsearch.fileio import atomic_path, write_json


def _h5_key(video_id: str) -> str:
    """HDF5 names cannot hold '/' (a group separator) or be '.'; escape them reversibly."""
    return video_id.replace("%", "%25").replace("/", "%2F") if video_id not in (".",) else "%2E"


def _h5_unkey(key: str) -> str:
    return "." if key == "%2E" else key.replace("%2F", "/").replace("%25", "%")


CHECKSUM_ATTR = "crc32"  # per video: CRC-32 of the array's bytes as stored (C order), checked on every read
CHECKSUMS_FILE = "checksums.json"  # a .npy folder's {video_id: crc32}


def checksum(arr: np.ndarray) -> int:
    """CRC-32 of an array's bytes in C order (about 1 GB/s: negligible beside reading them)."""
    return zlib.crc32(np.ascontiguousarray(arr).tobytes()) & 0xFFFFFFFF


def _check_array(arr: np.ndarray, dim: int | None, where: str) -> np.ndarray:
    if arr.ndim != 2:
        raise FeatureError(f"{where}: expected a 2-D array (clips, dim), got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise FeatureError(f"{where}: has zero clips")
    if dim is not None and arr.shape[1] != dim:
        raise FeatureError(f"{where}: dim {arr.shape[1]} does not match the store's dim {dim}")
    if not np.isfinite(arr).all():
        bad = int((~np.isfinite(arr)).any(axis=1).argmax())
        raise FeatureError(f"{where}: contains NaN or inf (first at clip {bad})")
    return arr


def _missing(video_id: str, source: str, keys: Iterable[str]) -> MissingFeatureError:
    close = difflib.get_close_matches(video_id, list(keys), n=3)
    hint = f"; close ids: {close}" if close else ""
    return MissingFeatureError(f"{source}: no features for video {video_id!r}{hint}")


class FeatureSource(Protocol):
    path: Path

    @property
    def dim(self) -> int: ...
    def __contains__(self, video_id: object) -> bool: ...
    def __getitem__(self, video_id: str) -> np.ndarray: ...
    def keys(self) -> list[str]: ...
    def __len__(self) -> int: ...
    def close(self) -> None: ...


class HDF5Features:
    """Root-level datasets keyed by video id. The file is opened once, on first use."""

    def __init__(self, path: str | Path, dim: int | None = None, verify: bool = True):
        self.path = Path(path)
        if not self.path.is_file():
            raise FeatureError(f"{self.path}: feature file not found")
        self._file: h5py.File | None = None
        self._dim = dim
        self._keys: list[str] | None = None
        self.verify = verify  # check each video's stored checksum (files written by momentsearch carry them)

    def _h5(self) -> h5py.File:
        if self._file is None:
            try:
                self._file = h5py.File(self.path, "r")
            except OSError as e:
                raise FeatureError(f"{self.path}: cannot open as HDF5 ({e})") from None
        return self._file

    @property
    def dim(self) -> int:
        if self._dim is None:
            f = self._h5()
            if "dim" in f.attrs:
                self._dim = int(f.attrs["dim"])
            else:
                first = next(iter(f.keys()), None)
                if first is None:
                    raise FeatureError(f"{self.path}: the file holds no datasets")
                self._dim = int(f[first].shape[-1])
        return self._dim

    @property
    def attrs(self) -> dict[str, Any]:
        return dict(self._h5().attrs)

    def keys(self) -> list[str]:
        if self._keys is None:
            self._keys = [_h5_unkey(k) for k in self._h5().keys()]
        return self._keys

    def __len__(self) -> int:
        return len(self._h5())

    def __contains__(self, video_id: object) -> bool:
        return isinstance(video_id, str) and _h5_key(video_id) in self._h5()

    def __getitem__(self, video_id: str) -> np.ndarray:
        f = self._h5()
        key = _h5_key(video_id)
        if key not in f:
            raise _missing(video_id, str(self.path), self.keys())
        where = f"{self.path} [{video_id}]"
        try:
            ds = f[key]
            raw = ds[()]
            expected = ds.attrs.get(CHECKSUM_ATTR)
        except (OSError, ValueError, TypeError, KeyError) as e:
            raise FeatureError(f"{where}: cannot read ({e})") from None
        if self.verify and expected is not None and checksum(raw) != int(expected):
            raise FeatureError(f"{where}: checksum mismatch: the stored features are corrupt; write the file again")
        return _check_array(np.asarray(raw, dtype=np.float32), self.dim, where)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def reopen(self) -> None:
        """Forget the open handle without closing it (a forked worker's copy of its parent's)."""
        self._file = None


class NpyDirFeatures:
    """A folder of ``<video_id>.npy`` files, each (clips, dim)."""

    def __init__(self, path: str | Path, dim: int | None = None, verify: bool = True,
                 checksums: Mapping[str, int] | None = None):
        self.path = Path(path)
        if not self.path.is_dir():
            raise FeatureError(f"{self.path}: feature folder not found")
        self._dim = dim
        self._keys: list[str] | None = None
        # per-video CRC-32s: given (a corpus folder's manifest holds them), or checksums.json in the folder
        self._sums: dict[str, int] | None = dict(checksums) if checksums is not None else None
        self.verify = verify  # check each video against its checksum where there is one

    def _file(self, video_id: str) -> Path:
        return self.path / f"{_h5_key(video_id)}.npy"  # '/' and '%' escaped, as in HDF5 names

    def keys(self) -> list[str]:
        if self._keys is None:
            self._keys = sorted(_h5_unkey(p.stem) for p in self.path.glob("*.npy"))
        return self._keys

    def __len__(self) -> int:
        return len(self.keys())

    @property
    def dim(self) -> int:
        if self._dim is None:
            keys = self.keys()
            if not keys:
                raise FeatureError(f"{self.path}: no .npy files")
            self._dim = int(self._load(keys[0]).shape[-1])
        return self._dim

    def __contains__(self, video_id: object) -> bool:
        return isinstance(video_id, str) and self._file(video_id).is_file()

    def _load(self, video_id: str) -> np.ndarray:
        f = self._file(video_id)
        if not f.is_file():
            raise _missing(video_id, str(self.path), self.keys())
        try:
            return np.load(f, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as e:
            raise FeatureError(f"{f}: corrupt or not a .npy file ({e})") from None

    def _checksums(self) -> dict[str, int]:
        if self._sums is None:
            f = self.path / CHECKSUMS_FILE
            try:
                self._sums = {str(k): int(v) for k, v in json.loads(f.read_text()).items()} if f.is_file() else {}
            except (OSError, ValueError, TypeError, AttributeError) as e:
                raise FeatureError(f"{f}: unreadable checksums ({e})") from None
        return self._sums

    def __getitem__(self, video_id: str) -> np.ndarray:
        raw = self._load(video_id)
        expected = self._checksums().get(video_id) if self.verify else None
        if expected is not None and checksum(raw) != expected:
            raise FeatureError(f"{self._file(video_id)}: checksum mismatch: the stored features are corrupt; "
                               "write them again")
        arr = np.asarray(raw, dtype=np.float32)
        return _check_array(arr, self._dim if self._dim is not None else None, str(self._file(video_id)))

    def close(self) -> None:
        pass

    def reopen(self) -> None:
        pass


def open_features(path: str | Path, dim: int | None = None) -> HDF5Features | NpyDirFeatures:
    """A folder opens as per-video .npy files, a file as HDF5."""
    p = Path(path)
    if p.is_dir():
        return NpyDirFeatures(p, dim)
    return HDF5Features(p, dim)


class FeatureStore:
    """A visual stream and an optional subtitle stream, both keyed by video id."""

    def __init__(self, visual: str | Path | FeatureSource, subtitle: str | Path | FeatureSource | None = None):
        self.visual: FeatureSource = open_features(visual) if isinstance(visual, (str, Path)) else visual
        self.subtitle: FeatureSource | None = (
            open_features(subtitle) if isinstance(subtitle, (str, Path)) else subtitle
        )

    @property
    def has_subtitle(self) -> bool:
        return self.subtitle is not None

    def __contains__(self, video_id: object) -> bool:
        return video_id in self.visual

    def __getitem__(self, video_id: str) -> np.ndarray:
        return self.visual[video_id]

    def get(self, video_id: str) -> tuple[np.ndarray, np.ndarray | None]:
        """(visual (clips, d_v), subtitle (clips, d_s) or None)."""
        vis = self.visual[video_id]
        sub = self.subtitle[video_id] if self.subtitle is not None else None
        return vis, sub

    def check_covers(self, video_ids: Iterable[str]) -> None:
        """Raise if any of ``video_ids`` lacks features in either stream (lists up to five)."""
        for stream in [self.visual] + ([self.subtitle] if self.subtitle is not None else []):
            missing = [v for v in video_ids if v not in stream]
            if missing:
                raise MissingFeatureError(
                    f"{stream.path}: {len(missing)} video(s) have no features, e.g. {missing[:5]}"
                )

    def close(self) -> None:
        self.visual.close()
        if self.subtitle is not None:
            self.subtitle.close()

    def reopen(self) -> None:
        """In a DataLoader worker: open the files anew rather than share the parent's handles."""
        for s in (self.visual, self.subtitle):
            if s is not None and hasattr(s, "reopen"):
                s.reopen()

    def __enter__(self) -> FeatureStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
        _check_array(arr, self.dim, where)
        with np.errstate(over="ignore"):
            stored = arr.astype(self.dtype)
        if not np.isfinite(stored).all():
            raise FeatureError(f"{where}: values overflow {self.dtype} (largest |x| = {np.abs(arr).max():g})")
        if self.dim is None:
            self.dim = int(arr.shape[1])
        key = _h5_key(video_id)
        if key in self._h5:
            if not self.overwrite_ids:
                raise FeatureError(f"{where}: video id already stored (pass overwrite_ids=True to replace)")
            del self._h5[key]
        self._h5.create_dataset(key, data=stored)
        self._h5[key].attrs[CHECKSUM_ATTR] = checksum(stored)
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
        sums = json.loads(sums_file.read_text()) if sums_file.is_file() else {}
    except ValueError:
        sums = {}  # rewritten below for what is written now
    for vid in features:  # no stale checksum beside a new file, even if killed half-way
        sums.pop(vid, None)
    write_json(sums_file, sums, indent=None)
    new = {}
    for vid, arr in features.items():
        arr = _check_array(np.asarray(arr), None, f"{folder / vid}.npy (being written)")
        stored = arr.astype(dtype)
        with atomic_path(folder / f"{_h5_key(vid)}.npy") as tmp, open(tmp, "wb") as fh:
            np.save(fh, stored)
        new[vid] = checksum(stored)
    write_json(sums_file, {**sums, **new}, indent=None)
    return len(features)
