"""The search's compiled loops (numba, compiled on first use, cached on disk where the package folder is
writable), each with a NumPy twin the tests hold it to:

* :func:`video_max`: each video's best clip under a product-quantized inner product (the ``scan``
  first stage): ``out[v] = max over the video's clips n of sum_j lut[j, codes[n, j]]`` for videos
  ``lo..hi-1`` laid out by ``offsets``. Without the GIL, so callers split the videos over their own
  threads (numba's own threading layers are not safe to enter from several threads at once, a
  service's threads are). With ``m`` a multiple of 8 the codes are read as 64-bit words (half the loads);
* :func:`half_to_float32`: IEEE binary16 -> binary32, exactly (subnormals, infinities and NaN
  included), about 4x faster than NumPy's or torch's scalar conversion here: the exact re-score
  reads fp16 clip rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from momentsearch.errors import FirstStageError

_KERNELS: dict[str, Any] | None = None


def _compile() -> dict[str, Any] | None:
    try:
        from numba import njit
    except ImportError:
        return None

    @njit(nogil=True, cache=True)
    def video_max_bytes(codes, lut, offsets, lo, hi, out):  # pragma: no cover - compiled
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

    @njit(nogil=True, cache=True)
    def video_max_words(words, flat, offsets, lo, hi, out):  # pragma: no cover - compiled
        w = words.shape[1]  # words (N, m/8) uint64: 8 codes each, low byte first; flat (m * 256,)
        for v in range(lo, hi):
            best = -np.inf
            for n in range(offsets[v], offsets[v + 1]):
                s = np.float32(0.0)
                for i in range(w):
                    x = words[n, i]
                    b = 2048 * i
                    s += flat[b + (x & 0xFF)]
                    s += flat[b + 256 + ((x >> 8) & 0xFF)]
                    s += flat[b + 512 + ((x >> 16) & 0xFF)]
                    s += flat[b + 768 + ((x >> 24) & 0xFF)]
                    s += flat[b + 1024 + ((x >> 32) & 0xFF)]
                    s += flat[b + 1280 + ((x >> 40) & 0xFF)]
                    s += flat[b + 1536 + ((x >> 48) & 0xFF)]
                    s += flat[b + 1792 + ((x >> 56) & 0xFF)]
                if s > best:
                    best = s
            out[v] = best

    @njit(nogil=True, cache=True)
    def half_bits(src, dst):  # pragma: no cover - compiled; uint16 -> uint32 bit patterns
        for i in range(src.shape[0]):
            h = np.uint32(src[i])
            sign = (h & np.uint32(0x8000)) << np.uint32(16)
            e = (h >> np.uint32(10)) & np.uint32(0x1F)
            m = h & np.uint32(0x3FF)
            if e == np.uint32(0x1F):
                bits = sign | np.uint32(0x7F800000) | (m << np.uint32(13))
            elif e != np.uint32(0):
                bits = sign | ((e + np.uint32(112)) << np.uint32(23)) | (m << np.uint32(13))
            elif m == np.uint32(0):
                bits = sign
            else:  # subnormal: normalise the mantissa
                k = np.uint32(0)
                while (m & np.uint32(0x400)) == np.uint32(0):
                    m = m << np.uint32(1)
                    k += np.uint32(1)
                bits = sign | ((np.uint32(113) - k) << np.uint32(23)) | ((m & np.uint32(0x3FF)) << np.uint32(13))
            dst[i] = bits

    return {"bytes": video_max_bytes, "words": video_max_words, "half": half_bits}


def _kernels() -> dict[str, Any] | None:
    global _KERNELS
    if _KERNELS is None:
        _KERNELS = _compile() or {}
    return _KERNELS or None


def packed(codes: np.ndarray) -> np.ndarray:
    """The codes as :func:`video_max` reads them fastest: (N, m/8) uint64 words when m % 8 == 0."""
    return codes.view(np.uint64) if codes.shape[1] % 8 == 0 and codes.flags.c_contiguous else codes


def video_max(codes: np.ndarray, lut: np.ndarray, offsets: np.ndarray, lo: int, hi: int, out: np.ndarray) -> None:
    """``codes``: (N, m) uint8, or :func:`packed` words; ``lut`` (m, 256) float32; ``out`` (V,) float32."""
    k = _kernels()
    if k is None:
        raise FirstStageError("the scan first stage needs numba: pip install 'momentsearch[service]' (or numba), "
                              "or use --first-stage exact")
    if codes.dtype == np.uint64:
        k["words"](codes, np.ascontiguousarray(lut).ravel(), offsets, lo, hi, out)
    else:
        k["bytes"](codes, lut, offsets, lo, hi, out)


def video_max_numpy(codes: np.ndarray, lut: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The same maxima for every video, by NumPy (slow: for tests)."""
    per_clip = lut[np.arange(codes.shape[1])[None, :], codes.astype(np.int64)].sum(1, dtype=np.float32)
    return np.maximum.reduceat(per_clip, offsets[:-1])


def half_to_float32(a: np.ndarray) -> np.ndarray:
    """A float16 array as float32 (exactly); other dtypes by NumPy's ``astype``."""
    k = _kernels()
    if a.dtype != np.float16 or k is None:
        return np.asarray(a, np.float32)
    src = np.ascontiguousarray(a).view(np.uint16).ravel()
    out = np.empty(src.shape, np.uint32)
    k["half"](src, out)
    return out.view(np.float32).reshape(a.shape)
