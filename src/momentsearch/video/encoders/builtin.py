"""``builtin``: a visual encoder that needs no weights — colour, texture and motion statistics per clip.

Frames are scaled to ``size`` x ``size`` (default 64) and read as RGB in [0, 1]. Per frame:

* colour layout: mean R, G, B in each cell of a 4 x 4 grid (48);
* colour distribution: a 12-bin hue histogram weighted by saturation x value, and a 4-bin value
  histogram, each a share of the frame's pixels (16);
* texture: an 8-bin histogram of gradient orientation (mod 180 degrees) weighted by gradient
  magnitude, the mean gradient magnitude and the mean |Laplacian| in each cell of a 2 x 2 grid (16);
* motion: the mean |luma difference| to the previous sampled frame in each cell of a 4 x 4 grid,
  times 4 (16); the first frame of a video has no previous one and counts no motion.

A clip's vector is the mean over its frames (96 numbers). Deterministic and float32; about a
millisecond per 64 x 64 frame on one core. It separates what the rendered synthetic videos vary
(shape and colour of objects, motion, texture, the scene's background) and is the encoder that
lets the whole path run offline, in CI and here; for real footage use ``open_clip`` or ``torchvision``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from momentsearch.video.encoders.base import VisualEncoder, register_encoder

GRID, TEX_GRID, HUE_BINS, VAL_BINS, ORI_BINS = 4, 2, 12, 4, 8


def _cells(x: np.ndarray, g: int) -> np.ndarray:
    """(n, H, W[, C]) -> (n, g, g[, C]) cell means (H and W cut to multiples of g)."""
    n, h, w = x.shape[:3]
    h2, w2 = h - h % g, w - w % g
    x = x[:, :h2, :w2]
    return x.reshape(n, g, h2 // g, g, w2 // g, *x.shape[3:]).mean(axis=(2, 4))


def _hist(values: np.ndarray, weights: np.ndarray, bins: int) -> np.ndarray:
    """(n, P) values in [0, 1) -> (n, bins) weighted shares of the P pixels."""
    n, p = values.shape
    idx = np.minimum((values * bins).astype(np.int64), bins - 1) + np.arange(n)[:, None] * bins
    return np.bincount(idx.ravel(), weights.ravel(), minlength=n * bins).reshape(n, bins) / p


def frame_stats(rgb: np.ndarray, previous: np.ndarray | None) -> np.ndarray:
    """(n, H, W, 3) uint8 frames -> (n, 96) per-frame statistics; ``previous`` (H, W, 3) or None."""
    x = rgb.astype(np.float32) / 255.0
    n = len(x)
    colour = _cells(x, GRID).reshape(n, -1)
    mx, mn = x.max(-1), x.min(-1)
    chroma = mx - mn
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    safe = np.where(chroma > 1e-6, chroma, 1.0)
    hue = np.where(mx == r, ((g - b) / safe) % 6, np.where(mx == g, (b - r) / safe + 2, (r - g) / safe + 4)) / 6
    sat = np.where(mx > 1e-6, chroma / np.maximum(mx, 1e-6), 0.0)
    hue_h = _hist(hue.reshape(n, -1) % 1.0, (sat * mx).reshape(n, -1), HUE_BINS)
    val_h = _hist(mx.reshape(n, -1), np.ones_like(mx).reshape(n, -1), VAL_BINS)
    luma = 0.299 * r + 0.587 * g + 0.114 * b
    gx = np.zeros_like(luma)
    gy = np.zeros_like(luma)
    gx[:, :, 1:-1] = (luma[:, :, 2:] - luma[:, :, :-2]) / 2
    gy[:, 1:-1] = (luma[:, 2:] - luma[:, :-2]) / 2
    mag = np.sqrt(gx ** 2 + gy ** 2)
    ori = (np.arctan2(gy, gx) % np.pi) / np.pi
    ori_h = _hist(ori.reshape(n, -1), mag.reshape(n, -1), ORI_BINS) * 4
    lap = np.zeros_like(luma)
    lap[:, 1:-1, 1:-1] = np.abs(4 * luma[:, 1:-1, 1:-1] - luma[:, :-2, 1:-1] - luma[:, 2:, 1:-1]
                                - luma[:, 1:-1, :-2] - luma[:, 1:-1, 2:])
    texture = np.concatenate([ori_h, _cells(mag, TEX_GRID).reshape(n, -1) * 4,
                              _cells(lap, TEX_GRID).reshape(n, -1)], axis=1)
    if previous is not None:
        p = previous.astype(np.float32) / 255.0
        prev_luma = np.concatenate([(0.299 * p[..., 0] + 0.587 * p[..., 1] + 0.114 * p[..., 2])[None], luma[:-1]])
        motion = _cells(np.abs(luma - prev_luma), GRID).reshape(n, -1) * 4
    else:
        motion = np.zeros((n, GRID * GRID), np.float32)
        if n > 1:
            motion[1:] = _cells(np.abs(luma[1:] - luma[:-1]), GRID).reshape(n - 1, -1) * 4
    return np.concatenate([colour, hue_h, val_h, texture, motion], axis=1).astype(np.float32)


@register_encoder
class BuiltinEncoder(VisualEncoder):
    kind = "builtin"
    version = 1
    needs_previous_frame = True

    def __init__(self, arch: str = "", size: int = 64, **options: Any):
        if arch:
            raise ValueError(f"the builtin encoder takes no architecture, got {arch!r}")
        if not 8 <= int(size) <= 1024:
            raise ValueError(f"builtin encoder: size must be 8..1024 pixels, got {size}")
        super().__init__("", **options)
        self.size = int(size)

    @property
    def dim(self) -> int:
        return GRID * GRID * 3 + HUE_BINS + VAL_BINS + ORI_BINS + 2 * TEX_GRID * TEX_GRID + GRID * GRID

    @property
    def frame_size(self) -> tuple[int, int]:
        return self.size, self.size

    def config(self) -> dict[str, Any]:
        return {"size": self.size}

    def encode(self, clips: Sequence[np.ndarray], previous: np.ndarray | None = None) -> np.ndarray:
        out = np.empty((len(clips), self.dim), np.float32)
        for i, frames in enumerate(clips):
            out[i] = frame_stats(frames, previous).mean(axis=0)
            previous = frames[-1]
        return out
