"""A corpus encoded once: named per-clip (and per-video) arrays of every video, on disk beside a manifest.

A model family chooses what it stores: XML stores ``h1`` (retrieval) and ``h2`` (localization)
states, a two-network model its retriever's vectors and the raw clip features its localizer
reads, a proposal-map model its maps. Per-clip arrays concatenate all videos' clips without
padding: video v's rows are ``offsets[v]:offsets[v+1]``. Per-video arrays have one row per video.

Each video keeps its own time grid (clip count and seconds per clip), and
:func:`clips_to_seconds` is the one place where clip indices become seconds.

``save`` writes the folder as a set (a temporary folder renamed over the old one), so a killed
save leaves the old index or the new one, never a mix; ``load`` memory-maps the arrays and checks
that the index was built by the model that reads it.
"""

from __future__ import annotations

import mmap as _mmap
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from momentsearch.errors import SearchIndexError
from momentsearch.fileio import atomic_dir, write_json
from momentsearch.readers import check_array, read_json_object, read_npy
from momentsearch.search.prefetch import mapping, will_need

INDEX_VERSION = 2


@dataclass
class VideoIndex:
    video_ids: list[str]
    durations: np.ndarray  # (V,) seconds
    clip_lengths: np.ndarray  # (V,) seconds per clip, each video's own grid
    offsets: np.ndarray  # (V+1,) int64 into the per-clip arrays
    arrays: dict[str, np.ndarray]  # name -> (N_clips, ...) per-clip rows, e.g. fp16 states
    video_arrays: dict[str, np.ndarray] = field(default_factory=dict)  # name -> (V, ...)
    meta: dict[str, Any] = field(default_factory=dict)  # family, family_version, model fingerprint
    random_reads: bool = field(default=False, compare=False)  # advised random: padded() asks for its rows first

    def __post_init__(self) -> None:
        v = len(self.video_ids)
        if len(self.durations) != v or len(self.clip_lengths) != v or len(self.offsets) != v + 1:
            raise SearchIndexError(f"index: {v} videos but {len(self.durations)} durations, "
                                   f"{len(self.clip_lengths)} clip lengths, {len(self.offsets)} offsets")
        for name, a in self.arrays.items():
            if len(a) != int(self.offsets[-1]):
                raise SearchIndexError(f"index array {name!r}: {len(a)} rows for {int(self.offsets[-1])} clips")
        for name, a in self.video_arrays.items():
            if len(a) != v:
                raise SearchIndexError(f"index video array {name!r}: {len(a)} rows for {v} videos")

    def advise_random(self) -> int:
        """Tell the kernel that the memory-mapped arrays are read at random (a re-score's few thousand videos, the
        localizer's top ones): a page fault then reads its own page, not the 128 KB or more around it. Where the
        rows do not all fit in memory (a million videos' 33 GB on a 24 GB machine) the read-around filled the page
        cache with neighbours no query asked for: a served query at 1M took 1.4-1.8 s at p50, 0.25-0.31 s with this. Call
        it once the rows are no longer read in order (a first stage built), and only where they exceed memory
        (:func:`exceeds_memory`): rows that fit are better read around (at 100k videos, 3.5 GB, a cold start's first 25
        queries faulted 2,100-2,600 pages each advised and 28 not; p50 70-487 against 46-69 ms). Returns the number of
        arrays advised."""
        self.random_reads = True
        return advise("MADV_RANDOM", *self.arrays.values(), *self.video_arrays.values())

    def __len__(self) -> int:
        return len(self.video_ids)

    @property
    def n_clips(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def nbytes(self) -> int:
        arrays = [*self.arrays.values(), *self.video_arrays.values(), self.offsets, self.durations, self.clip_lengths]
        return int(sum(a.nbytes for a in arrays))

    def array(self, name: str) -> np.ndarray:
        if name not in self.arrays:
            raise SearchIndexError(f"the index holds no per-clip array {name!r}; it has {sorted(self.arrays)} "
                                   f"(built by {self.meta.get('family', 'an unknown family')})")
        return self.arrays[name]

    def ask_for(self, name: str, videos: np.ndarray) -> int:
        """Where the rows are advised random (:meth:`advise_random`: they exceed memory), ask the kernel for the rows
        of ``videos`` in ``name`` all at once (``search.prefetch.will_need``) before they are read; returns the
        ranges asked for (0 where the rows are read around)."""
        return will_need(self.array(name), self.offsets, videos) if self.random_reads else 0

    def padded(self, name: str, videos: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Rows of ``videos`` padded to the longest: ((K, T, ...) float32, mask (K, T) bool). Rows advised random
        (:meth:`advise_random`) are asked for first, all at once (``search.prefetch.will_need``)."""
        src = self.array(name)
        self.ask_for(name, videos)
        n = self.n_clips[videos]
        t = int(n.max()) if len(n) else 1
        out = np.zeros((len(videos), t, *src.shape[1:]), np.float32)
        for i, v in enumerate(videos):
            out[i, : n[i]] = src[self.offsets[v]: self.offsets[v + 1]]
        mask = np.arange(t)[None, :] < n[:, None]
        return torch.from_numpy(out), torch.from_numpy(mask)

    def check_built_by(self, family: str, fingerprint: str | None = None) -> None:
        """Raise unless this index was encoded by ``family`` (and by the model ``fingerprint``)."""
        got = self.meta.get("family")
        if got != family:
            raise SearchIndexError(f"this index was built by model family {got!r}, not {family!r}; rebuild it")
        if fingerprint is not None and self.meta.get("fingerprint") != fingerprint:
            raise SearchIndexError("this index was built by other weights (another or a newer checkpoint); rebuild it")

    def save(self, folder: str | Path) -> Path:
        f = Path(folder)
        with atomic_dir(f) as tmp:
            for kind, group in (("clip", self.arrays), ("video", self.video_arrays)):
                for name, a in group.items():
                    np.save(tmp / f"{kind}.{name}.npy", np.ascontiguousarray(a))
            _write_grid_and_manifest(tmp, self.video_ids, self.durations, self.clip_lengths, self.offsets,
                                     self.arrays, self.video_arrays, self.meta)
        return f

    @classmethod
    def load(cls, folder: str | Path, mmap: bool = True) -> VideoIndex:
        """The index in ``folder``, every file checked against the manifest (names, lengths, shapes and
        dtypes): a missing, short or foreign array is refused, never read short."""
        f = Path(folder)
        if not (f / "manifest.json").is_file():
            raise SearchIndexError(f"{f}: no index here (manifest.json missing)")
        man = ArraysManifest.read(f)
        ids, v, n, groups, dtypes = man.video_ids, man.n_videos, man.n_clips, man.groups, man.dtypes

        def read(name: str, rows: int, shape: list[int], kinds: str, big: bool) -> np.ndarray:
            path = f / f"{name}.npy"
            a = check_array(read_npy(path, _error, mmap=mmap and big), str(path), _error, ndim=1 + len(shape),
                            kinds=kinds, length=rows, finite=not big)
            if list(a.shape[1:]) != shape:
                raise SearchIndexError(f"{path}: rows of shape {list(a.shape[1:])}, the manifest says {shape}")
            if name in dtypes and str(a.dtype) != dtypes[name]:
                raise SearchIndexError(f"{path}: dtype {a.dtype}, the manifest says {dtypes[name]}")
            return a

        durations = read("durations", v, [], "fi", False)
        clip_lengths = read("clip_lengths", v, [], "fi", False)
        offsets = read("offsets", v + 1, [], "iu", False)
        _need(bool((durations > 0).all() and (clip_lengths > 0).all()), f, "durations and clip lengths must be > 0")
        _need(offsets[0] == 0 and offsets[-1] == n and bool((np.diff(offsets) >= 1).all()), f,
              "offsets must start at 0, grow by at least one clip per video and end at n_clips")
        arrays = {k: read(f"clip.{k}", n, sh, "fiub", True) for k, sh in groups["arrays"].items()}
        video_arrays = {k: read(f"video.{k}", v, sh, "fiub", True) for k, sh in groups["video_arrays"].items()}
        return cls(ids, durations.astype(np.float64), clip_lengths.astype(np.float64), offsets.astype(np.int64),
                   arrays, video_arrays, man.meta)


def _write_grid_and_manifest(folder: Path, video_ids: list[str], durations: np.ndarray, clip_lengths: np.ndarray,
                             offsets: np.ndarray, arrays: dict[str, np.ndarray], video_arrays: dict[str, np.ndarray],
                             meta: dict[str, Any]) -> None:
    for name, a in (("offsets", offsets), ("durations", durations), ("clip_lengths", clip_lengths)):
        np.save(folder / f"{name}.npy", a)
    ArraysManifest(list(video_ids), len(video_ids), int(offsets[-1]),
                   {k: list(a.shape[1:]) for k, a in arrays.items()},
                   {k: list(a.shape[1:]) for k, a in video_arrays.items()}, meta,
                   {**{f"clip.{k}": str(a.dtype) for k, a in arrays.items()},
                    **{f"video.{k}": str(a.dtype) for k, a in video_arrays.items()}}).write(folder)


@dataclass(frozen=True)
class ArraysManifest:
    """``arrays/manifest.json``, an index's arrays described: one typed record, one reader, one writer.

        {"version": 2, "video_ids": [...], "n_videos": V, "n_clips": N, "arrays": {name: row shape},
         "video_arrays": {name: row shape}, "meta": {...}, "dtypes": {"clip.NAME": "float16", ...}}"""

    video_ids: list[str]
    n_videos: int
    n_clips: int
    arrays: dict[str, list[int]]  # per-clip arrays: name -> row shape
    video_arrays: dict[str, list[int]]  # per-video arrays: name -> row shape
    meta: dict[str, Any]
    dtypes: dict[str, str]  # file name (clip.NAME, video.NAME) -> dtype

    @property
    def groups(self) -> dict[str, dict[str, list[int]]]:
        return {"arrays": self.arrays, "video_arrays": self.video_arrays}

    @classmethod
    def read(cls, folder: Path) -> ArraysManifest:
        """Checked field by field: a :class:`SearchIndexError` naming the file and the field."""
        f = folder
        man = read_json_object(f / "manifest.json", _error, "index manifest")
        if man.get("version") != INDEX_VERSION:
            raise SearchIndexError(f"{f}: index version {str(man.get('version'))[:40]}, this momentsearch reads "
                                   f"{INDEX_VERSION}; delete the folder to rebuild it")
        ids, v, n = man.get("video_ids"), man.get("n_videos"), man.get("n_clips")
        _need(isinstance(ids, list) and all(isinstance(i, str) and i for i in ids) and len(set(ids)) == len(ids),
              f, "video_ids must be a list of distinct, non-empty strings")
        _need(v == len(ids) and type(n) is int and n >= 0, f, "n_videos must equal len(video_ids); n_clips an integer >= 0")
        groups = {}
        for kind in ("arrays", "video_arrays"):
            g = man.get(kind)
            _need(isinstance(g, dict) and all(re.fullmatch(r"[A-Za-z0-9_]+", k) and isinstance(sh, list)
                                              and all(type(x) is int and x >= 0 for x in sh) for k, sh in g.items()),
                  f, f"{kind} must map array names to their row shapes (lists of integers)")
            groups[kind] = g
        dtypes = man.get("dtypes", {})
        _need(isinstance(dtypes, dict) and all(isinstance(d, str) for d in dtypes.values()), f,
              "dtypes must map file names to dtype strings")
        meta = man.get("meta", {})
        _need(isinstance(meta, dict), f, "meta must be an object")
        return cls(ids, v, n, groups["arrays"], groups["video_arrays"], meta, dtypes)

    def write(self, folder: Path) -> None:
        write_json(folder / "manifest.json", {
            "version": INDEX_VERSION, "video_ids": self.video_ids, "n_videos": self.n_videos, "n_clips": self.n_clips,
            "arrays": self.arrays, "video_arrays": self.video_arrays, "meta": self.meta, "dtypes": self.dtypes},
            indent=None)


class IndexWriter:
    """An index's arrays written part by part into memory-mapped ``.npy`` files, so an index larger than memory
    can be built: ``write`` each run of consecutive videos as it is encoded, then ``close``. ``folder`` is
    written in place: the caller makes the set atomic (``momentsearch index`` writes inside ``atomic_dir``)."""

    def __init__(self, folder: str | Path, video_ids: list[str], durations: np.ndarray, clip_lengths: np.ndarray,
                 n_clips: np.ndarray):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.video_ids = list(video_ids)
        self.durations = np.asarray(durations, np.float64)
        self.clip_lengths = np.asarray(clip_lengths, np.float64)
        self.n_clips = np.asarray(n_clips, np.int64)
        self.offsets = np.zeros(len(self.video_ids) + 1, np.int64)
        self.offsets[1:] = np.cumsum(self.n_clips)
        self._files: dict[tuple[str, str], np.ndarray] = {}
        self._done = np.zeros(len(self.video_ids), bool)
        self._resumed = 0  # videos an interrupted build had written (:meth:`resume`)

    def resume(self, videos: int) -> None:
        """The first ``videos`` videos were written by an interrupted build into this folder: its files are opened
        again in place (a file missing or of another length is an error: start the build afresh)."""
        self._resumed = videos
        self._done[:videos] = True

    def flush(self) -> None:
        """Everything written so far on disk (before a resumable build records its progress)."""
        for f in self._files.values():
            f.flush()

    def write(self, first: int, part: VideoIndex) -> None:
        """``part`` holds the videos ``video_ids[first: first + len(part)]``, in that order."""
        v = len(part)
        if part.video_ids != self.video_ids[first: first + v]:
            raise SearchIndexError(f"index part at video {first}: other videos than the index lists there")
        if not np.array_equal(part.n_clips, self.n_clips[first: first + v]):
            bad = int(np.flatnonzero(part.n_clips != self.n_clips[first: first + v])[0])
            raise SearchIndexError(f"video {part.video_ids[bad]!r}: encoded into {int(part.n_clips[bad])} clip rows, "
                                   f"its corpus entry says {int(self.n_clips[first + bad])} clips")
        a, b = int(self.offsets[first]), int(self.offsets[first + v])
        for name, arr in part.arrays.items():
            self._file("clip", name, arr, int(self.offsets[-1]))[a:b] = arr
        for name, arr in part.video_arrays.items():
            self._file("video", name, arr, len(self.video_ids))[first: first + v] = arr
        self._done[first: first + v] = True

    def _file(self, kind: str, name: str, arr: np.ndarray, rows: int) -> np.ndarray:
        key = (kind, name)
        if key not in self._files:
            if self._files and kind == "clip" and self._done[self._resumed:].any():
                raise SearchIndexError(f"index part: array {name!r} appeared after the first part")
            path = self.folder / f"{kind}.{name}.npy"
            if self._resumed:
                f = read_npy(path, SearchIndexError, mmap=True)
                if f.shape != (rows, *arr.shape[1:]) or f.dtype != arr.dtype:
                    raise SearchIndexError(f"{path}: of {f.dtype} {f.shape}, not the interrupted build's "
                                           f"{arr.dtype} {(rows, *arr.shape[1:])}")
                self._files[key] = np.lib.format.open_memmap(path, mode="r+")
            else:
                self._files[key] = np.lib.format.open_memmap(path, mode="w+", dtype=arr.dtype,
                                                             shape=(rows, *arr.shape[1:]))
        f = self._files[key]
        if f.dtype != arr.dtype or f.shape[1:] != arr.shape[1:]:
            raise SearchIndexError(f"index part: array {name!r} of {arr.dtype} {arr.shape[1:]}, earlier parts "
                                   f"{f.dtype} {f.shape[1:]}")
        return f

    def close(self, meta: dict[str, Any]) -> VideoIndex:
        """Flush the arrays, write the time grids and the manifest; the index, memory-mapped."""
        if not self._done.all():
            raise SearchIndexError(f"index: {int((~self._done).sum())} video(s) were never written")
        for f in self._files.values():
            f.flush()
        arrays = {n: a for (k, n), a in self._files.items() if k == "clip"}
        video_arrays = {n: a for (k, n), a in self._files.items() if k == "video"}
        _write_grid_and_manifest(self.folder, self.video_ids, self.durations, self.clip_lengths, self.offsets,
                                 arrays, video_arrays, meta)
        self._files.clear()
        return VideoIndex.load(self.folder, mmap=True)


def _error(message: str) -> SearchIndexError:
    return SearchIndexError(f"{message}; delete the index folder to rebuild it")


def _need(ok: bool, folder: Path, what: str) -> None:
    if not ok:
        raise SearchIndexError(f"{folder / 'manifest.json'}: {what}; delete the folder to rebuild it")


def clips_to_seconds(index: VideoIndex, videos: np.ndarray, st_clip: np.ndarray, ed_clip: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Clip indices (inclusive) on each video's own grid -> [start, end) seconds, end cut at the duration."""
    dt = index.clip_lengths[videos]
    return st_clip * dt, np.minimum((ed_clip + 1) * dt, index.durations[videos])


def clip_rows(offsets: np.ndarray, videos: np.ndarray) -> np.ndarray:
    """The per-clip row numbers of ``videos``, each video's rows in turn (offsets: (V+1,) int64)."""
    n = offsets[videos + 1] - offsets[videos]
    return np.repeat(offsets[videos] - (np.cumsum(n) - n), n) + np.arange(int(n.sum()))


def paired_clip_dots(index: VideoIndex, name: str, q: torch.Tensor, videos: np.ndarray
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """For each query i and each of its videos ``videos[i, j]``: the dot product of ``q[i]`` (S, d) with every
    clip's (S, d) row of array ``name``, summed over S and d -> (sim (B*K, T) float32, mask (B*K, T) bool),
    T the longest video's clips, 0 past each video's end. What ``einsum("nsd,nstd->nt")`` over
    :meth:`VideoIndex.padded` rows gives, without padding every (query, video) pair: each distinct video's rows
    are converted to float32 once, and one matrix product scores every query against every distinct clip;
    each pair's row of clips is then picked out of it."""
    from momentsearch.search.kernels import half_to_float32

    b, k = videos.shape
    flat = videos.reshape(-1)
    uniq, inv = np.unique(flat, return_inverse=True)
    off = np.asarray(index.offsets, np.int64)
    n_u = off[uniq + 1] - off[uniq]
    start_u = np.concatenate([[0], np.cumsum(n_u)[:-1]])
    r_u = int(n_u.sum())
    h = torch.from_numpy(half_to_float32(np.take(index.array(name), clip_rows(off, uniq), axis=0))).reshape(r_u, -1)
    n_pair = n_u[inv]
    t = int(n_pair.max())
    mask = np.arange(t)[None, :] < n_pair[:, None]
    gather = torch.from_numpy(np.where(mask, start_u[inv][:, None] + np.arange(t)[None, :], 0))  # (B*K, T)
    qf = q.reshape(b, -1).float()
    rows = torch.arange(b).repeat_interleave(k)[:, None]
    # every query with every distinct clip: one matrix product, cheaper than gathering each pair's clips
    # (memory traffic) even when the queries share no video; in chunks of queries past 2^25 products
    step = max(1, (1 << 25) // r_u)
    sim = torch.empty(b * k, t)
    for a in range(0, b, step):
        every = qf[a: a + step] @ h.T  # (chunk, R_u)
        sel = slice(a * k, min(b, a + step) * k)
        sim[sel] = every[rows[sel] - a, gather[sel]]
    mask_t = torch.from_numpy(mask)
    return sim.masked_fill_(~mask_t, 0.0), mask_t  # past a video's end: 0, as the padded rows give


def concat_ragged(parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-video (n_i, ...) arrays -> (their concatenation, offsets (V+1,))."""
    offsets = np.zeros(len(parts) + 1, np.int64)
    offsets[1:] = np.cumsum([len(p) for p in parts])
    return np.concatenate(parts), offsets


def memory_bytes() -> int:
    """This machine's memory (0 where the system does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def exceeds_memory(nbytes: int) -> bool:
    """Whether ``nbytes`` of mapped rows are more than this machine's memory (False where it does not say)."""
    mem = memory_bytes()
    return bool(mem) and nbytes > mem


def advise(advice: str, *arrays: Any) -> int:
    """``madvise`` the memory-mapped ones of ``arrays`` (``advice``: "MADV_RANDOM", "MADV_WILLNEED", ...; nothing
    where the system lacks it); returns how many were advised."""
    flag, n = getattr(_mmap, advice, None), 0
    for a in arrays:
        m = mapping(a)
        if m is not None and flag is not None:
            m.madvise(flag)
            n += 1
    return n
