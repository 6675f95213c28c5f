"""Asking the kernel for some rows of a memory-mapped array before they are read.

Where an index's rows do not fit in memory (a million videos' 33 GB on 24 GB) they are advised ``MADV_RANDOM``
(:meth:`VideoIndex.advise_random`), so each page fault reads one page and waits for it: the exact re-score of a
query's 200 videos then faults about 900 pages one after another (19 ms a query at 1M). :func:`will_need` advises
every listed row range ``MADV_WILLNEED`` first, which starts their reads at once (the kernel queues them all), so that
the re-score finds most pages read or on their way.
"""

from __future__ import annotations

import ctypes
import mmap
import sys
from typing import Any

import numpy as np

MADV_WILLNEED = getattr(mmap, "MADV_WILLNEED", None)
_libc = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def will_need(a: np.ndarray, offsets: np.ndarray, videos: np.ndarray) -> int:
    """``MADV_WILLNEED`` over the rows ``offsets[v]:offsets[v + 1]`` of each of ``videos`` in ``a`` when ``a`` is
    memory-mapped (nothing otherwise, or where the system lacks it); returns the number of ranges advised. Adjacent
    or overlapping ranges are advised as one."""
    if _libc is None or MADV_WILLNEED is None or mapping(a) is None or not len(videos) or a.ndim < 1:
        return 0
    videos = np.unique(np.asarray(videos, np.int64))
    lo, hi = offsets[videos].astype(np.int64), offsets[videos + 1].astype(np.int64)
    keep = hi > lo
    lo, hi = lo[keep], hi[keep]
    if not len(lo):
        return 0
    starts = np.flatnonzero(np.r_[True, lo[1:] > hi[:-1]])  # runs of touching ranges (videos in row order)
    ends = np.r_[starts[1:], len(lo)] - 1
    page, row, base, n = mmap.PAGESIZE, int(a.strides[0]), int(a.ctypes.data), 0
    for f, t in zip(lo[starts].tolist(), hi[ends].tolist(), strict=True):
        first = (base + f * row) & ~(page - 1)
        n += _libc.madvise(ctypes.c_void_p(first), ctypes.c_size_t(base + t * row - first), MADV_WILLNEED) == 0
    return n


def mapping(a: Any) -> Any:
    """The ``mmap`` under a memory-mapped array (or a view of one), else None."""
    while a is not None:
        if isinstance(a, mmap.mmap):
            return a
        if isinstance(a, np.memmap) and getattr(a, "_mmap", None) is not None:
            return a._mmap
        a = getattr(a, "base", None)
    return None
