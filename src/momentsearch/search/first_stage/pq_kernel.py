"""The scan's one compiled loop: each video's best clip under a product-quantized inner product.

``video_max(codes, lut, offsets, lo, hi, out)``: for videos ``lo..hi-1`` laid out by ``offsets``
(V+1,), ``out[v] = max over the video's clips n of sum_j lut[j, codes[n, j]]`` (codes (N, m) uint8,
lut (m, 256) float32). Compiled by numba on first use (cached on disk where the package folder is
writable), without the GIL, so callers split the videos over their own threads: numba's own
threading layers are not safe to enter from several threads at once, a service's threads are.
A NumPy twin (:func:`video_max_numpy`) is the reference the tests hold it to.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from momentsearch.errors import FirstStageError

_KERNEL: Any = None


def _compile() -> Any:
    try:
        from numba import njit
    except ImportError:
        raise FirstStageError("the scan first stage needs numba: pip install 'momentsearch[service]' (or numba), "
                              "or use --first-stage exact") from None

    @njit(nogil=True, fastmath=False, cache=True, boundscheck=False)
    def video_max(codes, lut, offsets, lo, hi, out):  # pragma: no cover - compiled
        m = codes.shape[1]
        for v in range(lo, hi):
            best = -np.inf
            for n in range(offsets[v], offsets[v + 1]):
                s = np.float32(0.0)
                for j in range(m):
                    s += lut[j, codes[n, j]]
                if s > best:
                    best = s
            out[v] = best

    return video_max


def video_max(codes: np.ndarray, lut: np.ndarray, offsets: np.ndarray, lo: int, hi: int, out: np.ndarray) -> None:
    global _KERNEL
    if _KERNEL is None:
        _KERNEL = _compile()
    _KERNEL(codes, lut, offsets, lo, hi, out)


def video_max_numpy(codes: np.ndarray, lut: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The same maxima for every video, by NumPy (slow: for tests)."""
    per_clip = lut[np.arange(codes.shape[1])[None, :], codes.astype(np.int64)].sum(1, dtype=np.float32)
    return np.maximum.reduceat(per_clip, offsets[:-1])
