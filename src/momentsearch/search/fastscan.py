"""The ``scan`` first stage's compiled loops (``_fastscan.c``, built by ``pip install .``) and their NumPy twins.

* :func:`video_max_u8`: for a batch of queries, each video's best clip under a product-quantized inner
  product whose tables are quantized to bytes (:func:`quantize_luts`), over codes laid out in blocks of 64
  clips (:func:`pack_blocks`). With AVX-512 VBMI a sub-quantizer's 256-entry table sits in four registers
  and 64 clips' look-ups are three instructions (7-bit codes: two registers and one instruction); each block
  of codes is read once for the whole batch.
  A clip's score is an exact integer sum, so the SIMD and the scalar paths agree bit for bit.
* :func:`rescore_f16`: the exact scores of some videos from fp16 clip rows (F16C conversion in registers,
  fp32 arithmetic), as :meth:`ClipMaxRetriever.exact_scores` computes them up to fp32 rounding.

Both release the GIL: the caller splits the work over its threads. :func:`available` says whether the
extension was built (``pip install .`` builds it where a C compiler is found, and goes on without it).

``MOMENTSEARCH_SIMD`` chooses the paths for a whole process (a server, a benchmark): ``all`` (the default: what this
CPU has), ``no-amx`` (the int8 pass on AVX-512 VNNI, as on a CPU without AMX) or ``none`` (the portable C loops).
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np

BLOCK = 64
MAX_BATCH = 64

try:  # the compiled module this one wraps (its only user)
    _ext: Any = importlib.import_module("momentsearch.search._fastscan")
except ImportError:  # pragma: no cover - a build without a C compiler
    _ext = None


SIMD_CHOICES = {"all": (True, True), "no-amx": (True, False), "none": (False, False)}


def available() -> bool:
    return _ext is not None


def set_simd(on: bool, amx: bool = True) -> dict[str, bool]:
    """Use the SIMD paths where this CPU has them (True, the default) or the portable C loops; returns
    which paths are on (``vbmi``: the scan, ``avx512``: the re-score, ``amx`` or else ``vnni``: the int8 pass).
    ``amx=False`` keeps the int8 pass on AVX-512 VNNI (Linux grants AMX's tile state to the process on first use)."""
    return dict(require().set_simd(on, amx))


def simd_paths() -> dict[str, bool]:
    """Which SIMD paths are on now (as :func:`set_simd` last set them), without changing them."""
    return dict(require().simd_paths())


def simd_from_environment() -> dict[str, bool] | None:
    """Apply ``MOMENTSEARCH_SIMD`` (see the module's docstring); None where it is unset. An unknown value is a
    :class:`~momentsearch.errors.ConfigError` naming the choices."""
    import os

    want = os.environ.get("MOMENTSEARCH_SIMD", "").strip().lower()
    if not want or _ext is None:
        return None
    if want not in SIMD_CHOICES:
        from momentsearch.errors import ConfigError

        raise ConfigError(f"MOMENTSEARCH_SIMD={want!r}: choose one of {', '.join(SIMD_CHOICES)}")
    return set_simd(*SIMD_CHOICES[want])


def require() -> Any:
    """The compiled module, or the ImportError that says how to build it."""
    if _ext is None:
        raise ImportError("momentsearch's compiled scan loops were not built (no C compiler at install time): "
                          "pip install --force-reinstall --no-deps . with gcc or clang present")
    return _ext


def block_order() -> np.ndarray:
    """Byte ``p`` of a block's 64 codes holds clip ``block_order()[p]``: clip i at 2i (i < 32) or 2(i-32)+1."""
    p = np.arange(BLOCK)
    return np.where(p % 2 == 0, p // 2, 32 + p // 2)


def pack_blocks(codes: np.ndarray) -> np.ndarray:
    """(N, m) uint8 codes -> (ceil(N/64), m, 64) uint8 blocks, as :func:`video_max_u8` reads them (zero padded)."""
    n, m = codes.shape
    nb = -(-n // BLOCK)
    out = np.zeros((nb, m, BLOCK), np.uint8)
    full = n // BLOCK
    order = block_order()
    step = 16_384  # blocks per pass: a bounded temporary
    for a in range(0, full, step):
        b = min(full, a + step)
        out[a:b] = codes[a * BLOCK: b * BLOCK].reshape(b - a, BLOCK, m)[:, order].transpose(0, 2, 1)
    if full < nb:
        tail = np.zeros((BLOCK, m), np.uint8)
        tail[: n - full * BLOCK] = codes[full * BLOCK:]
        out[full] = tail[order].T
    return out


def quantize_luts(luts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(B, m, 256) float tables -> (B, m, 256) uint8, and per query ``scale`` and ``bias`` such that a clip's
    score is about ``scale * sum_j lut_u8[j, code_j] + bias`` (each table shifted to its minimum, one scale per
    query so that the sums stay comparable; the error is at most m * scale / 2)."""
    luts = np.asarray(luts, np.float32)
    low = luts.min(-1, keepdims=True)  # (B, m, 1)
    span = (luts.max(-1, keepdims=True) - low).max(1, keepdims=True)  # (B, 1, 1)
    scale = np.where(span > 0, span / 255.0, 1.0).astype(np.float32)
    q = np.clip(np.rint((luts - low) / scale), 0, 255).astype(np.uint8)
    return q, scale.reshape(-1), low.sum((1, 2)).astype(np.float32)


def video_max_u8(blocks: np.ndarray, luts_u8: np.ndarray, offsets: np.ndarray, lo: int, hi: int,
                 out: np.ndarray, bits: int = 8) -> None:
    """``out[q, v]`` (uint16, (B, V)) for videos ``lo..hi-1``: the best clip's sum of ``luts_u8[q]`` (B, m, 256)
    over its codes in ``blocks`` (:func:`pack_blocks`); 0 for a video without clips. B <= 64. ``bits`` 7: codes
    below 128 (a code's top bit is ignored), one look-up instruction for 64 clips instead of three."""
    b, m, _ = luts_u8.shape
    require().video_max_u8(blocks, m, np.ascontiguousarray(luts_u8, np.uint8), b, offsets, lo, hi, out,
                           len(offsets) - 1, bits)


def video_max_u8_videos(blocks: np.ndarray, lut_u8: np.ndarray, offsets: np.ndarray, videos: np.ndarray,
                        out: np.ndarray, bits: int = 8) -> None:
    """As :func:`video_max_u8` for one query's (m, 256) table, over the listed ``videos`` only (``out`` (V,)
    uint16: only their entries are written): the blocks holding their clips, nothing else read."""
    require().video_max_u8_list(blocks, lut_u8.shape[0], np.ascontiguousarray(lut_u8, np.uint8), offsets,
                                np.ascontiguousarray(videos, np.int64), out, len(offsets) - 1, bits)


def video_max_u8_numpy(codes: np.ndarray, luts_u8: np.ndarray, offsets: np.ndarray, bits: int = 8) -> np.ndarray:
    """The twin of :func:`video_max_u8` over unpacked (N, m) codes, every video (for tests)."""
    j = np.arange(codes.shape[1])[None, :]
    codes = codes & np.uint8(0xFF if bits >= 8 else (1 << bits) - 1)
    out = np.zeros((len(luts_u8), len(offsets) - 1), np.uint16)
    n = np.diff(offsets)
    for q, lut in enumerate(luts_u8):
        per_clip = lut.astype(np.int64)[j, codes.astype(np.int64)].sum(1)
        if len(per_clip):
            mx = np.maximum.reduceat(per_clip, np.minimum(offsets[:-1], len(per_clip) - 1))
            out[q] = np.where(n > 0, mx, 0)
    return out


def rescore_f16(rows: np.ndarray, q: np.ndarray, offsets: np.ndarray, videos: np.ndarray, cosine: bool
                ) -> np.ndarray:
    """(U,) exact scores of ``videos`` from (N, S, d) fp16 ``rows``: the mean over streams of each video's best
    clip by inner product with ``q`` (S, d) (divided by the clip's norm when ``cosine``)."""
    n, s, d = rows.shape
    q = np.ascontiguousarray(q, np.float32)
    videos = np.ascontiguousarray(videos, np.int64)
    out = np.empty(len(videos), np.float32)
    if len(videos):
        require().rescore_f16(rows, n, s, d, len(offsets) - 1, q, offsets, videos, cosine, out)
    return out


def rescore_i8(rows: np.ndarray, mult: np.ndarray, q: np.ndarray, offsets: np.ndarray, videos: np.ndarray
               ) -> np.ndarray:
    """(U,) scores of ``videos`` from (N, S, d) int8 ``rows``: the mean over streams of each video's best clip by
    ``mult[c, s] * <rows[c, s], q[s]>`` (``mult`` (N, S) float32: the row's scale, over its norm for cosine)."""
    n, s, d = rows.shape
    q = np.ascontiguousarray(q, np.float32)
    videos = np.ascontiguousarray(videos, np.int64)
    out = np.empty(len(videos), np.float32)
    if len(videos):
        require().rescore_i8(rows, mult, n, s, d, len(offsets) - 1, q, offsets, videos, out)
    return out


def rescore_i8_numpy(rows: np.ndarray, mult: np.ndarray, q: np.ndarray, offsets: np.ndarray, videos: np.ndarray
                     ) -> np.ndarray:
    """The twin of :func:`rescore_i8` in NumPy (for tests)."""
    out = np.empty(len(videos), np.float32)
    for u, v in enumerate(videos):
        a, b = int(offsets[v]), int(offsets[v + 1])
        per = np.einsum("csd,sd->cs", rows[a:b].astype(np.float32), q) * mult[a:b]
        out[u] = per.max(0).mean() if b > a else -np.inf
    return out


LANES = 16  # queries a pass of scan_i8 scores at once


def to_int8(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Float vectors (..., d) -> int8 round(x / s) with s = max|x| / 127 per vector (1 for a zero vector), and s and
    max|x| (...): the int8 tier's rows and the int8 pass's queries are both quantized so."""
    x = np.asarray(x, np.float32)
    amax = np.abs(x).max(-1)
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    return np.clip(np.rint(x / scale[..., None]), -127, 127).astype(np.int8), scale, amax


def quantize_queries(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(B, S, d) float queries, B <= 16 -> the (S, d/4, 16, 4) uint8 ``qpack`` :func:`scan_i8` reads (qi + 128, qi
    = round(q / scale) in int8, one scale per query and stream) and the (S, 16) float32 scales (1 in unused lanes)."""
    b, s, d = np.shape(q)
    qi, scale, _ = to_int8(q)  # (B, S, d), (B, S)
    qi = qi.astype(np.int16)
    pack = np.full((s, d // 4, LANES, 4), 128, np.uint8)
    pack[:, :, :b] = (qi + 128).astype(np.uint8).transpose(1, 0, 2).reshape(s, b, d // 4, 4).transpose(0, 2, 1, 3)
    scales = np.ones((s, LANES), np.float32)
    scales[:, :b] = scale.T
    return pack, scales


def row_sums(rows: np.ndarray) -> np.ndarray:
    """(N, S) int32: each int8 row's sum, which :func:`scan_i8` subtracts 128 times from its unsigned products."""
    return rows.sum(-1, dtype=np.int32)


def scan_i8(rows: np.ndarray, mult: np.ndarray, rowsum: np.ndarray, qpack: np.ndarray, qscale: np.ndarray, nq: int,
            offsets: np.ndarray, lo: int, hi: int, out: np.ndarray) -> None:
    """``out[b, v]`` ((nq, V) float32) for videos ``lo..hi-1``: the mean over streams of each video's best clip by
    ``mult[c, s] * qscale[s, b] * <qi[b, s], rows[c, s]>`` (queries from :func:`quantize_queries`, nq <= 16);
    -inf for a video without clips. Every row is read once for the ``nq`` queries."""
    n, s, d = rows.shape
    require().scan_i8(rows, mult, rowsum, n, s, d, qpack, qscale, nq, offsets, lo, hi, len(offsets) - 1, out)


def scan_i8_numpy(rows: np.ndarray, mult: np.ndarray, qpack: np.ndarray, qscale: np.ndarray, nq: int,
                  offsets: np.ndarray) -> np.ndarray:
    """The twin of :func:`scan_i8` in NumPy, every video (for tests)."""
    s, g = qpack.shape[:2]
    qi = (qpack.astype(np.int32) - 128).transpose(2, 0, 1, 3).reshape(LANES, s, 4 * g)[:nq]  # (nq, S, d)
    dots = np.einsum("csd,bsd->bcs", rows.astype(np.int32), qi)  # exact integers
    per = dots.astype(np.float32) * mult[None]  # (nq, N, S)
    n = np.diff(offsets)
    per = np.concatenate([per, np.full((nq, 1, s), -np.inf, np.float32)], 1)  # a last row: every start is inside
    best = np.where((n > 0)[None, :, None], np.maximum.reduceat(per, offsets[:-1], axis=1), -np.inf)
    total = np.zeros((nq, len(n)), np.float32)
    for k in range(s):
        total = total + best[:, :, k] * qscale[k, :nq, None]
    return total / np.float32(s)


simd_from_environment()
