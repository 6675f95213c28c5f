"""What the neural encoders share: frames -> normalised tensors -> a network, batched; a clip's
vector is the mean of its frames' embeddings (L2-normalised where the encoder asks, as CLIP's)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from momentsearch.errors import EncoderError
from momentsearch.video.encoders.base import VisualEncoder


def file_sha1(*paths: str | Path) -> str:
    """The weights' identity: a content hash of the file(s), in order (a renamed or copied file is the same)."""
    h = hashlib.sha1()
    for path in paths:
        p = Path(path)
        if not p.is_file():
            raise EncoderError(f"{p}: weights file not found")
        with open(p, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
    return h.hexdigest()[:16]


class TorchFrameEncoder(VisualEncoder):
    """Subclasses set ``self.net`` (frames (N, 3, H, W) normalised -> (N, D)), ``self.mean``, ``self.std``
    and ``self.size`` (the square input side) in ``__init__``."""

    normalize_output = False

    def __init__(self, arch: str = "", weights: str = "", device: str = "cpu", batch_size: int = 64, **options: Any):
        super().__init__(arch, **options)
        if not arch:
            raise EncoderError(f"encoder {self.kind!r} needs an architecture: {self.kind}:NAME")
        import torch

        self.torch = torch
        self.weights = weights
        self.device = torch.device(device)
        self.batch_size = int(batch_size)
        self.net: Any = None
        self.size = 224
        self.mean = (0.485, 0.456, 0.406)
        self.std = (0.229, 0.224, 0.225)
        self._dim: int | None = None

    @property
    def frame_size(self) -> tuple[int, int]:
        return self.size, self.size

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self._forward(np.zeros((1, self.size, self.size, 3), np.uint8)).shape[1])
        return self._dim

    def _forward(self, frames: np.ndarray) -> np.ndarray:
        torch = self.torch
        x = torch.from_numpy(frames).to(self.device).permute(0, 3, 1, 2).float() / 255.0
        mean = torch.tensor(self.mean, device=self.device).view(1, 3, 1, 1)
        std = torch.tensor(self.std, device=self.device).view(1, 3, 1, 1)
        with torch.inference_mode():
            y = self.net((x - mean) / std).float()
            if self.normalize_output:
                y = torch.nn.functional.normalize(y, dim=-1)
        return y.cpu().numpy()

    def encode(self, clips: Sequence[np.ndarray], previous: np.ndarray | None = None) -> np.ndarray:
        frames = np.concatenate(list(clips))
        emb = np.concatenate([self._forward(frames[s: s + self.batch_size])
                              for s in range(0, len(frames), self.batch_size)])
        bounds = np.cumsum([0] + [len(c) for c in clips])
        out = np.stack([emb[bounds[i]: bounds[i + 1]].mean(0) for i in range(len(clips))]).astype(np.float32)
        if self.normalize_output:
            out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out
