"""A corpus encoded once: per-clip hidden states of every video, on disk next to a manifest.

Clips of all videos are concatenated (no padding): ``h1[offsets[v]:offsets[v+1]]`` are video v's
(clips, S, d) retrieval states and ``h2`` the localization states, fp16. ``save`` writes
``h1.npy``, ``h2.npy``, ``offsets.npy``, ``durations.npy`` and ``manifest.json``, each atomically;
``load`` memory-maps the arrays.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from momentsearch.data.corpus import Video
from momentsearch.data.batching import load_video_batch
from momentsearch.data.features import FeatureStore
from momentsearch.fileio import atomic_path, write_json

INDEX_VERSION = 1


@dataclass
class VideoIndex:
    video_ids: list[str]
    durations: np.ndarray  # (V,) seconds
    clip_length: float
    offsets: np.ndarray  # (V+1,) int64
    h1: np.ndarray  # (N_clips, S, d) float16
    h2: np.ndarray  # (N_clips, S, d) float16

    def __len__(self) -> int:
        return len(self.video_ids)

    @property
    def n_clips(self) -> np.ndarray:
        return np.diff(self.offsets)

    @property
    def nbytes(self) -> int:
        return int(self.h1.nbytes + self.h2.nbytes + self.offsets.nbytes + self.durations.nbytes)

    def padded(self, which: str, videos: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        """States of ``videos`` padded to their longest: ((K, S, T, d) float32, mask (K, T))."""
        src = self.h1 if which == "h1" else self.h2
        n = self.n_clips[videos]
        t = int(n.max()) if len(n) else 1
        s, d = src.shape[1], src.shape[2]
        out = np.zeros((len(videos), t, s, d), np.float32)
        for i, v in enumerate(videos):
            out[i, : n[i]] = src[self.offsets[v]: self.offsets[v + 1]]
        mask = np.arange(t)[None, :] < n[:, None]
        return torch.from_numpy(out).permute(0, 2, 1, 3), torch.from_numpy(mask)

    def save(self, folder: str | Path) -> Path:
        f = Path(folder)
        f.mkdir(parents=True, exist_ok=True)
        for name in ("h1", "h2", "offsets", "durations"):
            with atomic_path(f / f"{name}.npy") as tmp, open(tmp, "wb") as fh:
                np.save(fh, getattr(self, name))
        write_json(f / "manifest.json", {
            "version": INDEX_VERSION, "video_ids": self.video_ids, "clip_length": self.clip_length,
            "n_videos": len(self), "n_clips": int(self.offsets[-1]), "streams": int(self.h1.shape[1]),
            "hidden": int(self.h1.shape[2]),
        }, indent=None)
        return f

    @classmethod
    def load(cls, folder: str | Path, mmap: bool = True) -> VideoIndex:
        f = Path(folder)
        if not (f / "manifest.json").is_file():
            raise FileNotFoundError(f"{f}: no index here (manifest.json missing)")
        man = json.loads((f / "manifest.json").read_text())
        if man.get("version") != INDEX_VERSION:
            raise ValueError(f"{f}: index version {man.get('version')}, expected {INDEX_VERSION}")
        mode = "r" if mmap else None
        return cls(man["video_ids"], np.load(f / "durations.npy"), float(man["clip_length"]),
                   np.load(f / "offsets.npy"), np.load(f / "h1.npy", mmap_mode=mode),
                   np.load(f / "h2.npy", mmap_mode=mode))


@torch.no_grad()
def build_index(
    model: torch.nn.Module, store: FeatureStore, videos: Sequence[Video], clip_length: float,
    batch_size: int = 64, progress: bool = True,
) -> VideoIndex:
    """Encode every video once with ``model.encode_videos`` (an eval-mode XML-style model)."""
    was_training = model.training
    model.eval()
    cfg = model.cfg
    h1s, h2s, counts = [], [], []
    for s in tqdm(range(0, len(videos), batch_size), desc="indexing videos", unit="batch", disable=not progress):
        chunk = videos[s: s + batch_size]
        streams, mask = load_video_batch(store, [v.video_id for v in chunk], cfg.max_clips, cfg.n_streams == 2)
        h1, h2 = model.encode_videos(streams, mask)
        for i in range(len(chunk)):
            n = int(mask[i].sum())
            h1s.append(h1[i, :, :n].permute(1, 0, 2).half().numpy())
            h2s.append(h2[i, :, :n].permute(1, 0, 2).half().numpy())
            counts.append(n)
    model.train(was_training)
    offsets = np.zeros(len(counts) + 1, np.int64)
    offsets[1:] = np.cumsum(counts)
    return VideoIndex([v.video_id for v in videos], np.array([v.duration for v in videos]), clip_length, offsets,
                      np.concatenate(h1s), np.concatenate(h2s))
