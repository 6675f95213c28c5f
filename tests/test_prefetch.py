"""``search.prefetch.will_need``: the listed videos' rows of a memory-mapped array are read in before they are touched
(checked with mincore after the file's pages were dropped from the page cache), the others are not. ``populate``: a
mapped array's every page is read in and mapped, so that reading it takes no page fault (getrusage), by
MADV_POPULATE_READ and by the page-by-page read it falls back to; ``serve`` does it for rows that fit."""

from __future__ import annotations

import ctypes
import mmap
import os
import resource
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from momentsearch.search.prefetch import populate, populate_in_background, will_need

libc = ctypes.CDLL(None, use_errno=True)


def resident(a: np.ndarray, first: int, last: int) -> float:
    """The fraction of the pages holding rows first..last-1 that are in memory (mincore)."""
    page, row = mmap.PAGESIZE, a.strides[0]
    lo = (a.ctypes.data + first * row) & ~(page - 1)
    n = -(-(a.ctypes.data + last * row - lo) // page)
    vec = (ctypes.c_ubyte * n)()
    assert libc.mincore(ctypes.c_void_p(lo), ctypes.c_size_t(n * page), vec) == 0, ctypes.get_errno()
    return sum(v & 1 for v in vec) / n


def test_the_listed_videos_rows_are_read_in_and_no_others(tmp_path: Path):
    offsets = np.arange(0, 401 * 64, 64, dtype=np.int64)  # 400 videos of 64 rows of 256 bytes: 4 pages a video
    np.save(tmp_path / "rows.npy", np.ones((int(offsets[-1]), 128), np.float16))
    fd = os.open(tmp_path / "rows.npy", os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # the file's pages out of the page cache
    os.close(fd)
    a = np.load(tmp_path / "rows.npy", mmap_mode="r")
    assert resident(a, 0, len(a)) < 0.05
    assert will_need(a, offsets, np.array([10, 11, 12, 300, 12])) == 2  # 10-12 touch: one range, and 300
    deadline = time.monotonic() + 5
    while resident(a, 64 * 10, 64 * 13) < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert resident(a, 64 * 10, 64 * 13) == 1 and resident(a, 64 * 300, 64 * 301) == 1
    assert resident(a, 64 * 100, 64 * 200) < 0.05  # nobody asked for these
    assert will_need(np.ones((10, 4)), offsets, np.array([1])) == 0  # not memory-mapped: nothing to ask
    assert will_need(a, offsets, np.array([], np.int64)) == 0


def test_an_index_advised_random_asks_for_a_lists_rows_before_padding_them(tmp_path: Path, monkeypatch):
    import momentsearch.search.index as index_module
    from momentsearch.search.index import VideoIndex

    offsets = np.array([0, 3, 3, 8, 10], np.int64)
    np.save(tmp_path / "h2.npy", np.arange(10 * 4, dtype=np.float16).reshape(10, 4))
    index = VideoIndex([f"v{i}" for i in range(4)], np.full(4, 10.0), np.ones(4), offsets,
                       {"h2": np.load(tmp_path / "h2.npy", mmap_mode="r")})
    asked = []
    monkeypatch.setattr(index_module, "will_need", lambda a, o, v: asked.append(v.tolist()) or len(v))
    x, mask = index.padded("h2", np.array([3, 0]))
    assert asked == []  # rows read around (they fit in memory): nothing asked
    index.advise_random()
    y, mask2 = index.padded("h2", np.array([3, 0]))
    assert asked == [[3, 0]] and torch.equal(x, y) and torch.equal(mask, mask2)
    assert y[0, :2, 0].tolist() == [32.0, 36.0] and mask2.tolist() == [[True, True, False], [True, True, True]]


def dropped(path: Path) -> np.ndarray:
    """``path``'s array memory-mapped, its pages out of the page cache first."""
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    return np.load(path, mmap_mode="r")


def faults_reading(a: np.ndarray) -> int:
    """The page faults (minor and major) this process takes to read every page of ``a``."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    flat = np.ndarray((a.nbytes,), np.uint8, buffer=a)
    int(flat[:: mmap.PAGESIZE].max()) + int(flat[-1])
    after = resource.getrusage(resource.RUSAGE_SELF)
    return after.ru_minflt - before.ru_minflt + after.ru_majflt - before.ru_majflt


@pytest.mark.parametrize("advice", [True, False])
def test_populate_maps_every_page_so_reading_takes_no_fault(tmp_path: Path, advice: bool):
    np.save(tmp_path / "rows.npy", np.ones((8192, 128), np.float16))  # 2 MB: 512 pages
    cold = dropped(tmp_path / "rows.npy")
    assert resident(cold, 0, len(cold)) < 0.05 and faults_reading(cold) > 0  # (a fault maps 16 pages or a large folio)
    a = dropped(tmp_path / "rows.npy")  # a new mapping of the same file, out of the page cache again
    assert populate(a, advice=advice)
    assert resident(a, 0, len(a)) == 1 and faults_reading(a) == 0
    assert not populate(np.ones((10, 4)))  # not memory-mapped: nothing to map


def test_serve_maps_rows_that_fit_in_the_background(tmp_path: Path):
    np.save(tmp_path / "rows.npy", np.ones((4096, 128), np.float16))  # 1 MB
    a = dropped(tmp_path / "rows.npy")
    assert populate_in_background([a, np.ones(3)], limit_bytes=a.nbytes - 1) == 0  # over the limit: left alone
    assert resident(a, 0, len(a)) < 0.05
    assert populate_in_background([a, np.ones(3)], limit_bytes=a.nbytes) == a.nbytes
    for t in threading.enumerate():
        if t.name == "momentsearch-rows":
            t.join(10)
    assert resident(a, 0, len(a)) == 1 and faults_reading(a) == 0
