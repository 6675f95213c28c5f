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

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from momentsearch.errors import SearchIndexError
from momentsearch.fileio import atomic_dir, write_json

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

    def padded(self, name: str, videos: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """Rows of ``videos`` padded to the longest: ((K, T, ...) float32, mask (K, T) bool)."""
        src = self.array(name)
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
            for name in ("offsets", "durations", "clip_lengths"):
                np.save(tmp / f"{name}.npy", getattr(self, name))
            write_json(tmp / "manifest.json", {
                "version": INDEX_VERSION, "video_ids": self.video_ids, "n_videos": len(self),
                "n_clips": int(self.offsets[-1]), "arrays": {k: list(a.shape[1:]) for k, a in self.arrays.items()},
                "video_arrays": {k: list(a.shape[1:]) for k, a in self.video_arrays.items()}, "meta": self.meta,
            }, indent=None)
        return f

    @classmethod
    def load(cls, folder: str | Path, mmap: bool = True) -> VideoIndex:
        f = Path(folder)
        if not (f / "manifest.json").is_file():
            raise SearchIndexError(f"{f}: no index here (manifest.json missing)")
        try:
            man = json.loads((f / "manifest.json").read_text())
        except (OSError, ValueError) as e:
            raise SearchIndexError(f"{f / 'manifest.json'}: unreadable ({e}); delete the folder to rebuild") from None
        if man.get("version") != INDEX_VERSION:
            raise SearchIndexError(f"{f}: index version {man.get('version')}, this momentsearch reads "
                                   f"{INDEX_VERSION}; delete the folder to rebuild it")
        mode = "r" if mmap else None
        try:
            arrays = {k: np.load(f / f"clip.{k}.npy", mmap_mode=mode) for k in man["arrays"]}
            video_arrays = {k: np.load(f / f"video.{k}.npy", mmap_mode=mode) for k in man["video_arrays"]}
            base = [np.load(f / f"{k}.npy") for k in ("durations", "clip_lengths", "offsets")]
        except (OSError, ValueError) as e:
            raise SearchIndexError(f"{f}: a file of the index is missing or corrupt ({e}); delete the folder "
                                   "to rebuild it") from None
        return cls(man["video_ids"], *base, arrays, video_arrays, man.get("meta", {}))


def clips_to_seconds(index: VideoIndex, videos: np.ndarray, st_clip: np.ndarray, ed_clip: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Clip indices (inclusive) on each video's own grid -> [start, end) seconds, end cut at the duration."""
    dt = index.clip_lengths[videos]
    return st_clip * dt, np.minimum((ed_clip + 1) * dt, index.durations[videos])


def concat_ragged(parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per-video (n_i, ...) arrays -> (their concatenation, offsets (V+1,))."""
    offsets = np.zeros(len(parts) + 1, np.int64)
    offsets[1:] = np.cumsum([len(p) for p in parts])
    return np.concatenate(parts), offsets
