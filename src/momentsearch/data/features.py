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
import zlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

import h5py
import numpy as np

from momentsearch.data.corpus import Subtitle
from momentsearch.errors import FeatureError, MissingFeatureError
from momentsearch.readers import check_array, is_file, read_json, read_npy


def h5_key(video_id: str) -> str:
    """HDF5 names cannot hold '/' (a group separator) or be '.'; escape them reversibly."""
    return video_id.replace("%", "%25").replace("/", "%2F") if video_id not in (".",) else "%2E"


def _h5_unkey(key: str) -> str:
    return "." if key == "%2E" else key.replace("%2F", "/").replace("%25", "%")


CHECKSUM_ATTR = "crc32"  # per video: CRC-32 of the array's bytes as stored (C order), checked on every read
CHECKSUMS_FILE = "checksums.json"  # a .npy folder's {video_id: crc32}


def checksum(arr: np.ndarray) -> int:
    """CRC-32 of an array's bytes in C order (about 1 GB/s: negligible beside reading them)."""
    return zlib.crc32(np.ascontiguousarray(arr).tobytes()) & 0xFFFFFFFF


MAX_VIDEO_BYTES = 2**31  # one video's features; a header claiming more is corrupt, not a video


def check_clip_array(arr: Any, dim: int | None, where: str) -> np.ndarray:
    """A (clips, dim) array of numbers, finite; any other kind, shape or value is a FeatureError."""
    arr = _check_shape(arr, where)
    if arr.shape[0] == 0:
        raise FeatureError(f"{where}: has zero clips")
    if arr.shape[1] == 0 or dim is not None and arr.shape[1] != dim:
        raise FeatureError(f"{where}: dim {arr.shape[1]} does not match the store's dim {dim}")
    if not np.isfinite(arr).all():
        bad = int((~np.isfinite(arr)).any(axis=1).argmax())
        raise FeatureError(f"{where}: contains NaN or inf (first at clip {bad})")
    return arr


def _check_shape(arr: Any, where: str) -> np.ndarray:
    """A stored array before its values are read: numbers, 2-D."""
    if isinstance(arr, np.ndarray) and arr.ndim != 2:
        raise FeatureError(f"{where}: expected a 2-D array (clips, dim), got shape {arr.shape}")
    return check_array(arr, where, FeatureError)


def _int_attr(value: Any, where: str, name: str, low: int, high: int) -> int:
    """An HDF5 attribute (or JSON value) that must be one integer in [low, high]."""
    v = value.item() if isinstance(value, np.ndarray) and value.size == 1 else value
    v = v.item() if isinstance(v, np.generic) else v
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        raise FeatureError(f"{where}: attribute {name!r} must be an integer in [{low}, {high}], got {str(value)[:80]}")
    return v


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
            except Exception as e:  # noqa: BLE001 - h5py raises OSError, and others for odd files
                raise FeatureError(f"{self.path}: cannot open as HDF5 ({type(e).__name__}: {str(e)[:200]})") from None
        return self._file

    @property
    def dim(self) -> int:
        if self._dim is None:
            f = self._h5()
            dim = self._attr(f.attrs, "dim", str(self.path))
            if dim is not None:
                self._dim = _int_attr(dim, str(self.path), "dim", 1, 2**31)
            else:
                first = next(iter(self.keys()), None)
                if first is None:
                    raise FeatureError(f"{self.path}: the file holds no datasets")
                ds = self._dataset(first)
                if ds.ndim != 2 or ds.shape[1] < 1:
                    raise FeatureError(f"{self.path} [{first}]: expected a 2-D dataset (clips, dim), got shape "
                                       f"{ds.shape}; the file has no 'dim' attribute to go by")
                self._dim = int(ds.shape[1])
        return self._dim

    def _attr(self, attrs: Any, name: str, where: str) -> Any:
        try:
            return attrs.get(name)
        except Exception as e:  # noqa: BLE001 - an attribute of a type h5py cannot read
            raise FeatureError(f"{where}: attribute {name!r} unreadable ({type(e).__name__}: {str(e)[:120]})") from None

    def _dataset(self, video_id: str) -> h5py.Dataset:
        """The dataset of ``video_id``: a dangling or external link, a group or a datatype is a FeatureError."""
        where = f"{self.path} [{video_id}]"
        try:
            ds = self._h5()[h5_key(video_id)]
        except Exception as e:  # noqa: BLE001 - KeyError for a dangling link, OSError for a broken external one
            raise FeatureError(f"{where}: cannot open ({type(e).__name__}: {str(e)[:200]})") from None
        if not isinstance(ds, h5py.Dataset):
            raise FeatureError(f"{where}: is a {type(ds).__name__}, not a dataset of features")
        if ds.shape is None or ds.dtype.kind not in "fiub" or ds.dtype.fields is not None:
            raise FeatureError(f"{where}: holds {ds.dtype} values of shape {ds.shape}, expected numbers (clips, dim)")
        if ds.size * ds.dtype.itemsize > MAX_VIDEO_BYTES:
            raise FeatureError(f"{where}: shape {ds.shape} is larger than one video's features can be: corrupt")
        return ds

    @property
    def attrs(self) -> dict[str, Any]:
        return dict(self._h5().attrs)

    def keys(self) -> list[str]:
        if self._keys is None:
            try:
                self._keys = [_h5_unkey(k) for k in self._h5().keys()]
            except Exception as e:  # noqa: BLE001 - a corrupt group index
                raise FeatureError(f"{self.path}: cannot list its datasets ({type(e).__name__}: {str(e)[:200]})"
                                   ) from None
        return self._keys

    def __len__(self) -> int:
        return len(self.keys())

    def __contains__(self, video_id: object) -> bool:
        if not isinstance(video_id, str):
            return False
        try:
            return h5_key(video_id) in self._h5()
        except (KeyError, ValueError, UnicodeError):  # a name HDF5 cannot hold
            return False

    def __getitem__(self, video_id: str) -> np.ndarray:
        if video_id not in self:
            raise _missing(video_id, str(self.path), self.keys())
        where = f"{self.path} [{video_id}]"
        ds = self._dataset(video_id)
        expected = self._attr(ds.attrs, CHECKSUM_ATTR, where)
        if expected is not None:
            expected = _int_attr(expected, where, CHECKSUM_ATTR, 0, 2**32 - 1)
        try:
            raw = ds[()]
        except Exception as e:  # noqa: BLE001 - h5py raises OSError, ValueError, TypeError... for corrupt data
            raise FeatureError(f"{where}: cannot read ({type(e).__name__}: {str(e)[:200]})") from None
        raw = _check_shape(raw, where)
        if self.verify and expected is not None and checksum(raw) != expected:
            raise FeatureError(f"{where}: checksum mismatch: the stored features are corrupt; write the file again")
        with np.errstate(over="ignore"):  # float64 beyond float32's range becomes inf, refused below
            arr = np.asarray(raw, dtype=np.float32)
        return check_clip_array(arr, self.dim, where)

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
        return self.path / f"{h5_key(video_id)}.npy"  # '/' and '%' escaped, as in HDF5 names

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
            self._dim = int(self._load(keys[0]).shape[1])
        return self._dim

    def __contains__(self, video_id: object) -> bool:
        return isinstance(video_id, str) and is_file(self._file(video_id))

    def _load(self, video_id: str) -> np.ndarray:
        f = self._file(video_id)
        if not is_file(f):
            raise _missing(video_id, str(self.path), self.keys())
        return _check_shape(read_npy(f, FeatureError, mmap=True), str(f))

    def _checksums(self) -> dict[str, int]:
        if self._sums is None:
            f = self.path / CHECKSUMS_FILE
            sums = read_json(f, FeatureError, "checksums file") if f.is_file() else {}
            if not isinstance(sums, dict):
                raise FeatureError(f"{f}: expected a JSON object {{video id: CRC-32}}, got {type(sums).__name__}")
            self._sums = {str(k): _int_attr(v, f"{f} [{k}]", "crc32", 0, 2**32 - 1) for k, v in sums.items()}
        return self._sums

    def __getitem__(self, video_id: str) -> np.ndarray:
        raw = self._load(video_id)
        expected = self._checksums().get(video_id) if self.verify else None
        if expected is not None and checksum(raw) != expected:
            raise FeatureError(f"{self._file(video_id)}: checksum mismatch: the stored features are corrupt; "
                               "write them again")
        with np.errstate(over="ignore"):
            arr = np.asarray(raw, dtype=np.float32)
        return check_clip_array(arr, self._dim if self._dim is not None else None, str(self._file(video_id)))

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
    """A visual stream and an optional subtitle stream, both keyed by video id; an ingested corpus may also
    have a ``written`` stream (MiniLM of the text read on screen) and its cues."""

    def __init__(self, visual: str | Path | FeatureSource, subtitle: str | Path | FeatureSource | None = None,
                 transcripts: Callable[[str], list[Subtitle]] | None = None, written: FeatureSource | None = None,
                 written_cues: Callable[[str], list[Subtitle]] | None = None):
        self.visual: FeatureSource = open_features(visual) if isinstance(visual, (str, Path)) else visual
        self.subtitle: FeatureSource | None = (
            open_features(subtitle) if isinstance(subtitle, (str, Path)) else subtitle
        )
        self.transcripts = transcripts  # video id -> its cues (a corpus folder's stored transcripts), if known
        self.written, self.written_cues = written, written_cues
        self._memo: dict[str, tuple[np.ndarray, np.ndarray | None]] | None = None
        self._memo_left = 0

    def keep_in_memory(self, max_bytes: int) -> None:
        """From now on :meth:`get` keeps what it reads (read-only arrays) until ``max_bytes`` are held, so that
        training, which reads every video each epoch, reads each file once (0 turns this off). A video that
        does not fit is read from the file every time, as before."""
        self._memo, self._memo_left = ({}, max_bytes) if max_bytes > 0 else (None, 0)

    @property
    def has_subtitle(self) -> bool:
        return self.subtitle is not None

    def __contains__(self, video_id: object) -> bool:
        return video_id in self.visual

    def __getitem__(self, video_id: str) -> np.ndarray:
        return self.visual[video_id]

    def get(self, video_id: str) -> tuple[np.ndarray, np.ndarray | None]:
        """(visual (clips, d_v), subtitle (clips, d_s) or None)."""
        if self._memo is not None and video_id in self._memo:
            return self._memo[video_id]
        vis = self.visual[video_id]
        sub = self.subtitle[video_id] if self.subtitle is not None else None
        size = vis.nbytes + (sub.nbytes if sub is not None else 0)
        if self._memo is not None and size <= self._memo_left:
            for a in (vis, sub):
                if a is not None:
                    a.flags.writeable = False
            self._memo[video_id] = (vis, sub)
            self._memo_left -= size
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
        for s in (self.subtitle, self.written):
            if s is not None:
                s.close()

    def reopen(self) -> None:
        """In a DataLoader worker: open the files anew rather than share the parent's handles."""
        for s in (self.visual, self.subtitle, self.written):
            if s is not None and hasattr(s, "reopen"):
                s.reopen()

    def __enter__(self) -> FeatureStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["FeatureStore", "HDF5Features", "NpyDirFeatures", "checksum", "open_features"]  # writers: data.feature_writers
