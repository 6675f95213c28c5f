"""How the ``scan`` stage runs its two loops: the approximate pass over every clip's codes and the exact
re-score of the best videos, both split over a pool of threads (the loops release the GIL).

* :class:`CompiledScan` (``_fastscan.c``, :mod:`momentsearch.search.fastscan`): the tables quantized to
  bytes, the codes in blocks of 64 clips, a batch of up to 64 queries per pass over the codes; the exact
  re-score of fp16 rows in C. What ``pip install .`` gives where a C compiler was found.
* :class:`NumbaScan`: the float tables and one query at a time (:mod:`momentsearch.search.kernels`): the
  fallback without the extension, and the reference the benchmark compares with.

Both return (B, V) approximate video scores: the mean over streams of each video's best clip.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import numpy as np

from momentsearch.search import fastscan
from momentsearch.search.first_stage.pools import best_k, exact_top
from momentsearch.search.kernels import packed, video_max
from momentsearch.search.stages import VectorSource


class ScanLoops(Protocol):
    name: str
    nbytes: int  # the codes as the loops read them
    tiers: list  # per tier (0: the codes, 1: the funnel's coarse codes), what the loops read

    def approximate(self, luts: np.ndarray) -> np.ndarray:
        """(B, S, m, 256) float32 tables -> (B, V) float32 approximate video scores."""
        ...

    def exact_top(self, source: VectorSource, q: np.ndarray, videos: np.ndarray, k: int
                  ) -> tuple[np.ndarray, np.ndarray]: ...


def scores_in_halves(pool: ThreadPoolExecutor | None, n: int, score: Callable[[np.ndarray], np.ndarray]
                     ) -> np.ndarray:
    """(n,) float32: ``score(part)`` of each half of ``range(n)`` on ``pool``'s threads (one part without a pool or
    below 64 items), as the re-scores split their videos."""
    out = np.empty(n, np.float32)
    parts = np.array_split(np.arange(n), 2 if pool is not None and n >= 64 else 1)

    def run(part: np.ndarray) -> None:
        out[part] = score(part)

    run_jobs(pool, run, [p for p in parts if len(p)])
    return out


def run_jobs(pool: ThreadPoolExecutor | None, fn, jobs: list) -> None:  # noqa: ANN001
    if pool is None or len(jobs) < 2:
        for job in jobs:
            fn(job)
    else:
        list(pool.map(fn, jobs))


class NumbaScan:
    """One query at a time, float tables, codes as 64-bit words."""

    name = "numba"

    def __init__(self, codes: list[np.ndarray], offsets: np.ndarray, ranges: list[tuple[int, int]],
                 pool: ThreadPoolExecutor | None):
        self._words = [packed(np.ascontiguousarray(c)) for c in codes]
        self.tiers = [self._words]
        self.offsets, self.ranges, self.pool = offsets, ranges, pool
        self.nbytes = int(sum(w.nbytes for w in self._words))

    def approximate(self, luts: np.ndarray) -> np.ndarray:
        b, s = luts.shape[:2]
        per_stream = np.empty((b, s, len(self.offsets) - 1), np.float32)
        for i in range(b):
            def run(job: tuple[int, int, int], i: int = i) -> None:
                st, lo, hi = job
                video_max(self._words[st], luts[i, st], self.offsets, lo, hi, per_stream[i, st])

            run_jobs(self.pool, run, [(st, lo, hi) for st in range(s) for lo, hi in self.ranges])
        return per_stream.mean(1)

    def exact_top(self, source: VectorSource, q: np.ndarray, videos: np.ndarray, k: int
                  ) -> tuple[np.ndarray, np.ndarray]:
        return exact_top(source, q, videos, k)


class CompiledScan:
    """Byte tables, codes in blocks of 64 clips read once per batch of up to 64 queries; the exact re-score
    in C where the index holds fp16 rows. ``coarse``: a second, smaller set of codes (the funnel's first
    pass, :meth:`approximate` with ``tier=1``); :meth:`approximate_videos` scores listed videos only."""

    name = "compiled"

    def __init__(self, codes: list[np.ndarray], offsets: np.ndarray, ranges: list[tuple[int, int]],
                 pool: ThreadPoolExecutor | None, coarse: list[np.ndarray] | None = None,
                 blocks: list[list[np.ndarray]] | None = None, bits: int = 8):
        """``blocks``: the tiers' codes already packed (a saved stage's ``blocks_s*.npy``), else packed here;
        ``bits``: 7 where every code is below 128 (the one-instruction look-up)."""
        self.bits = bits
        self.tiers = blocks if blocks is not None else [[fastscan.pack_blocks(c) for c in codes]] + (
            [[fastscan.pack_blocks(c) for c in coarse]] if coarse is not None else [])
        self.offsets, self.ranges, self.pool = offsets, ranges, pool
        self.empty = np.diff(offsets) == 0
        self.nbytes = int(sum(b.nbytes for tier in self.tiers for b in tier))

    def approximate(self, luts: np.ndarray, tier: int = 0) -> np.ndarray:
        b, s = luts.shape[:2]
        v = len(self.offsets) - 1
        out = np.zeros((b, v), np.float32)
        for a in range(0, b, fastscan.MAX_BATCH):
            chunk = luts[a: a + fastscan.MAX_BATCH]
            n = len(chunk)
            q8, scale, bias = _quantized(chunk)
            raw = np.empty((s, n, v), np.uint16)
            tables = [np.ascontiguousarray(q8[:, st]) for st in range(s)]

            def run(job: tuple[int, int, int]) -> None:
                st, lo, hi = job
                fastscan.video_max_u8(self.tiers[tier][st], tables[st], self.offsets, lo, hi, raw[st], self.bits)

            run_jobs(self.pool, run, [(st, lo, hi) for st in range(s) for lo, hi in self.ranges])
            for st in range(s):  # the mean over streams of scale * sum + bias
                out[a: a + n] += raw[st] * scale[:, st, None] + bias[:, st, None]
            out[a: a + n] /= s
        out[:, self.empty] = -np.inf
        return out

    def approximate_videos(self, luts: np.ndarray, videos: np.ndarray, tier: int = 0) -> np.ndarray:
        """One query's (S, m, 256) tables -> (len(videos),) approximate scores of those videos (sorted ids)."""
        s = len(luts)
        q8, scale, bias = _quantized(luts[None])
        raw = np.zeros((s, len(self.offsets) - 1), np.uint16)
        parts = np.array_split(videos, 2 if self.pool is not None and len(videos) >= 256 else 1)

        def run(job: tuple[int, np.ndarray]) -> None:
            st, part = job
            fastscan.video_max_u8_videos(self.tiers[tier][st], q8[0, st], self.offsets, part, raw[st], self.bits)

        run_jobs(self.pool, run, [(st, p) for st in range(s) for p in parts if len(p)])
        score = (raw[:, videos] * scale[0, :, None] + bias[0, :, None]).mean(0)
        return np.where(self.empty[videos], -np.inf, score).astype(np.float32)

    def exact_top(self, source: VectorSource, q: np.ndarray, videos: np.ndarray, k: int
                  ) -> tuple[np.ndarray, np.ndarray]:
        rows = source.index.array(source.array)
        if rows.dtype != np.float16 or rows.ndim != 3 or not rows.flags.c_contiguous:
            return exact_top(source, q, videos, k)
        scores = scores_in_halves(self.pool, len(videos),
                                  lambda part: fastscan.rescore_f16(rows, q, self.offsets, videos[part], source.cosine))
        return best_k(videos, scores, k)


def _quantized(luts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(n, S, m, 256) float tables -> byte tables (n, S, m, 256) and (n, S) scales and biases."""
    n, s = luts.shape[:2]
    q8, scale, bias = fastscan.quantize_luts(luts.reshape(n * s, *luts.shape[2:]))
    return q8.reshape(luts.shape), scale.reshape(n, s), bias.reshape(n, s)


def compiled(loops: str) -> bool:
    """Whether ``loops`` (``compiled``, ``numba`` or ``auto``) runs the compiled loops."""
    return loops != "numba" and (loops != "auto" or fastscan.available())


def scan_loops(codes: list[np.ndarray], offsets: np.ndarray, ranges: list[tuple[int, int]],
               pool: ThreadPoolExecutor | None, loops: str = "auto", coarse: list[np.ndarray] | None = None,
               blocks: list[list[np.ndarray]] | None = None, bits: int = 8) -> ScanLoops:
    """``loops``: ``compiled``, ``numba`` or ``auto`` (compiled where the extension was built); ``coarse``: the
    funnel's smaller codes (the compiled loops only: the numba ones scan ``codes``); ``blocks``: each tier's
    codes as the compiled loops read them, when a saved stage has them (not packed again); ``bits``: 8, or 7 for
    codes below 128 (the numba loops read either alike)."""
    if not compiled(loops):
        return NumbaScan(codes, offsets, ranges, pool)
    fastscan.require()  # loops="compiled" without the extension: the ImportError that says how to build it
    return CompiledScan(codes, offsets, ranges, pool, coarse, blocks, bits)
