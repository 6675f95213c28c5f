"""Asking the kernel for some rows of a memory-mapped array before they are read.

Where an index's rows do not fit in memory (a million videos' 33 GB on 24 GB) they are advised ``MADV_RANDOM``
(:meth:`VideoIndex.advise_random`), so each page fault reads one page and waits for it: the exact re-score of a
query's 200 videos then faults about 900 pages one after another (19 ms a query at 1M). :func:`will_need` advises
every listed row range ``MADV_WILLNEED`` first, which starts their reads at once (the kernel queues them all), so that
the re-score finds most pages read or on their way.

Where the rows fit in memory, a served query still takes page faults the first time it reads a page of them: at
100k videos about 100 a query (1.5 ms of a 30 ms query) until every page has been read once. :func:`populate`
maps an array's every page into the process at once (``MADV_POPULATE_READ``, reading what the page cache lacks),
and ``serve`` does it in the background at start (:func:`populate_in_background`).
"""

from __future__ import annotations

import ctypes
import mmap
import sys
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

MADV_WILLNEED = getattr(mmap, "MADV_WILLNEED", None)
MADV_POPULATE_READ = getattr(mmap, "MADV_POPULATE_READ", 22 if sys.platform.startswith("linux") else None)  # Linux 5.14
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


def populate(a: np.ndarray, advice: bool = True) -> bool:
    """Map every page of memory-mapped array ``a`` into this process, reading into the page cache what it lacks, so
    that reading ``a`` later takes no page fault: ``MADV_POPULATE_READ`` (one call; ``advice`` False, or a kernel
    older than 5.14: one byte read a page). False where ``a`` is not memory-mapped."""
    if mapping(a) is None or a.nbytes == 0:
        return False
    if advice and _libc is not None and MADV_POPULATE_READ is not None:
        page, base = mmap.PAGESIZE, int(a.ctypes.data)
        first = base & ~(page - 1)
        if _libc.madvise(ctypes.c_void_p(first), ctypes.c_size_t(base + a.nbytes - first), MADV_POPULATE_READ) == 0:
            return True
    flat = np.ndarray((a.nbytes,), np.uint8, buffer=a) if a.flags.c_contiguous else None
    if flat is None:
        return False
    int(flat[:: mmap.PAGESIZE].max()) + int(flat[-1])  # a read of each page (the last one too: rows start mid-page)
    return True


def populate_in_background(arrays: Sequence[np.ndarray], limit_bytes: int) -> int:
    """:func:`populate` the memory-mapped ones of ``arrays`` in a daemon thread when together they hold at most
    ``limit_bytes`` (rows that do not fit are read at random instead: ``VideoIndex.advise_random``). Returns the
    bytes it maps (0: none mapped, or more than the limit)."""
    mapped = [a for a in arrays if mapping(a) is not None]
    total = sum(int(a.nbytes) for a in mapped)
    if not mapped or total > limit_bytes:
        return 0

    def run() -> None:
        for a in mapped:
            try:
                populate(a)
            except (OSError, ValueError):  # the mapping closed since (an index swapped out): nothing to map
                pass

    threading.Thread(target=run, name="momentsearch-rows", daemon=True).start()
    return total
