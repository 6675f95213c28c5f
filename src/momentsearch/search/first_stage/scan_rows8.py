"""The ``scan`` stage's middle tier (``--param rows=int8``): every clip row again in int8, so that the many videos the
codes hand on are re-scored from half the bytes, and only the best few from the index's fp16 rows.

Where an index's fp16 rows do not fit in memory (a million videos: 17 GB of the rows the re-score reads, on a 24 GB
machine), each query's re-score of 2,000-2,500 videos faulted thousands of pages in from disk. The int8 rows (8.7 GB
at a million videos, 8,900 bytes a video of 34 clips and 2 streams of 128 dimensions) stay in the page cache beside
the codes; the fp16 rows are read for the final ``exact`` videos only (default 2 k: at 1M, k = 100, recall@100
against exact search is 0.998 with 200 and 0.983 with 100), so the scores returned stay exact. :func:`default_rows`
adds the tier where the index's rows exceed the machine's memory.

Each (clip, stream) row x is stored as round(x / s) with s = max|x| / 127 (int8, ``rows.npy`` (N, S, d)), and one
factor ``mult`` (N, S) float32: s, divided by the fp16 row's norm for a cosine retriever, so that
``mult * <q, rows>`` approximates the exact score with an error of about 0.4 % of the row's largest entry a
dimension. The tier is memory-mapped, advised random, and read into memory at load (``MADV_WILLNEED``) when it
takes less than half of the machine's memory. Folder ``rows8_<key>/`` beside the stage's, written as a set: ``manifest.json``, ``rows.npy``,
``mult.npy``, ``rowsum.npy`` ((N, S) int32: each row's sum, which the batched pass needs). A grown index carries the
tier over (:func:`grow_rows8`): each row is quantized on its own, so the kept videos' rows are copied and only the new
ones quantized, and the grown tier equals one built anew byte for byte.

**A batch's pass** (:meth:`Rows8.candidates`): for a batch of at least :func:`default_batch` queries the int8 rows of
every clip are scored instead of the codes, 16 queries at a time (``fastscan.scan_i8``: AMX tile products of 16 clips
by 16 queries, or AVX-512 VNNI), each row read once for the batch; the best ``exact`` videos of those scores go to the
fp16 rows. The codes' pass costs each query its look-ups; this pass costs the batch the bytes of the rows.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from momentsearch.console import say
from momentsearch.errors import FirstStageError
from momentsearch.fileio import atomic_dir, write_json
from momentsearch.readers import check_array, read_json_object, read_npy
from momentsearch.search import fastscan
from momentsearch.search.first_stage.scan import layout_key, top_indices
from momentsearch.search.first_stage.scan_loops import run_jobs, scores_in_halves
from momentsearch.search.index import VideoIndex, advise, exceeds_memory, memory_bytes
from momentsearch.search.stages import VectorSource

ROWS8_VERSION = 2  # 2: rowsum.npy
BUILD_CLIPS = 262_144  # clips quantized at a time
AMX_MIN_CLIPS = 1_000_000  # with AMX the tier is added above this many clips (below, a batch's codes pass is cheap)


def default_rows(index: VideoIndex) -> str:
    """``int8`` where the index's memory-mapped rows take more than this machine's memory, or where the CPU has AMX
    (its batch pass) and the index holds more than AMX_MIN_CLIPS clips, else ``fp16``. Measured at 1M videos (33 GB of rows, 24 GB of memory), served: 7.3 requests/s
    under 16 clients against 5.6 and p50 214 against 312 ms at batch 1, before the batch pass; at 100k (rows in
    memory), with AMX: 82.9 requests/s against 62.6, p99 228 against 337 ms, batch 1 unchanged (34.3 against 35.6 ms).
    Without AMX where the rows fit, the fp16 re-score reads memory and the tier only adds a pass."""
    if not fastscan.available():
        return "fp16"
    amx = fastscan.simd_paths().get("amx") and int(index.offsets[-1]) > AMX_MIN_CLIPS
    return "int8" if exceeds_memory(index.nbytes) or amx else "fp16"


def default_batch() -> int:
    """The smallest batch whose int8 pass replaces the codes' (see the module's docstring): 6 with AMX, 12 with
    AVX-512 VNNI alone, never without either. Measured at the generated 1M (``benchmarks/first_stage_scale.py
    --batch``): the pass costs a batch 370-390 ms whatever its size (93, 47 and 24 ms a query at batch 4, 8 and 16)
    and the codes 63-80 ms a query (80, 71 and 63), so the pass wins from 5 or 6 queries; VNNI's pass took twice
    AMX's at 100k (77 against 37-42 ms), so twice the batch."""
    if not fastscan.available():
        return 1 << 30
    paths = fastscan.simd_paths()
    return 6 if paths.get("amx") else 12 if paths.get("vnni") else 1 << 30


def _error(message: str) -> FirstStageError:
    return FirstStageError(f"{message}; delete the folder and the int8 rows are built again")


@dataclass(frozen=True)
class Rows8Manifest:
    version: int
    n_streams: int
    dim: int
    n_clips: int
    layout: str  # the scan stage's layout_key of the index
    cosine: bool

    @classmethod
    def read(cls, path: Path) -> Rows8Manifest:
        raw = read_json_object(path, _error, "int8 rows manifest")
        ints = ("version", "n_streams", "dim", "n_clips")
        if any(type(raw.get(k)) is not int or raw[k] < 0 for k in ints):
            raise _error(f"{path}: {', '.join(ints)} must be whole numbers >= 0")
        if not isinstance(raw.get("layout"), str) or not isinstance(raw.get("cosine"), bool):
            raise _error(f"{path}: layout must be a string and cosine true or false")
        return cls(*(raw[k] for k in ints), raw["layout"], raw["cosine"])


def rows8_key(source: VectorSource) -> str:
    """Names the tier's folder: the model, the array and unit or raw rows (the videos are in the manifest)."""
    blob = json.dumps(["rows8", ROWS8_VERSION, source.index.meta.get("fingerprint"), source.array, source.cosine])
    return "rows8_" + hashlib.sha1(blob.encode()).hexdigest()[:16]


def quantize(x: np.ndarray, cosine: bool) -> tuple[np.ndarray, np.ndarray]:
    """(n, S, d) float rows -> (n, S, d) int8 rows and (n, S) float32 factors (see the module's docstring)."""
    x = np.asarray(x, np.float32)
    q, scale, amax = fastscan.to_int8(x)
    mult = np.where(amax > 0, scale, 0.0).astype(np.float32)
    if cosine:
        mult = mult / np.maximum(np.sqrt(np.einsum("nsd,nsd->ns", x, x)), 1e-12)
    return q, mult.astype(np.float32)


class Rows8:
    """The int8 rows of an index's clips, memory-mapped and advised random."""

    def __init__(self, rows: np.ndarray, mult: np.ndarray, rowsum: np.ndarray, offsets: np.ndarray,
                 folder: Path | None = None):
        self.rows, self.mult, self.rowsum, self.folder = rows, mult, rowsum, folder
        self.offsets = np.ascontiguousarray(offsets, np.int64)
        self.batch = default_batch()  # the smallest batch this tier scores whole (ScanFirstStage.int8_batch overrides)
        advise("MADV_RANDOM", rows, mult, self.rowsum)  # a video's rows are 3 pages: no read-around
        if rows.nbytes + mult.nbytes + self.rowsum.nbytes < memory_bytes() // 2:
            advise("MADV_WILLNEED", rows, mult, self.rowsum)  # read in the background now: the tier in memory

    def scores(self, q: np.ndarray, videos: np.ndarray, pool: ThreadPoolExecutor | None = None) -> np.ndarray:
        """(U,) approximate scores of ``videos`` (``q`` (S, d)); split in two over ``pool``."""
        videos = np.ascontiguousarray(videos, np.int64)
        return scores_in_halves(pool, len(videos),
                                lambda part: fastscan.rescore_i8(self.rows, self.mult, q, self.offsets, videos[part]))

    def approximate(self, q: np.ndarray, ranges: list[tuple[int, int]], pool: ThreadPoolExecutor | None = None
                    ) -> np.ndarray:
        """(B, S, d) queries -> (B, V) scores of every video from the int8 rows, the queries quantized to int8 too:
        16 queries a pass, each pass's video ``ranges`` over ``pool``."""
        out = np.empty((len(q), len(self.offsets) - 1), np.float32)
        for a in range(0, len(q), fastscan.LANES):
            part = q[a: a + fastscan.LANES]
            qpack, qscale = fastscan.quantize_queries(part)
            view = out[a: a + len(part)]
            run_jobs(pool, lambda r: fastscan.scan_i8(self.rows, self.mult, self.rowsum, qpack, qscale, len(part),
                                                      self.offsets, r[0], r[1], view), ranges)
        return out

    def candidates(self, q: np.ndarray, n: int, ranges: list[tuple[int, int]], pool: ThreadPoolExecutor | None = None
                   ) -> list[np.ndarray]:
        """Each query's ``n`` videos of best int8 score over every video (sorted ids): the batch's pass."""
        return [np.sort(top_indices(a, n)) for a in self.approximate(q, ranges, pool)]

    def top(self, q: np.ndarray, videos: np.ndarray, n: int, pool: ThreadPoolExecutor | None = None) -> np.ndarray:
        """The ``n`` of ``videos`` with the best int8 scores, sorted by id."""
        if len(videos) <= n:
            return videos
        return np.sort(videos[top_indices(self.scores(q, videos, pool), n)])

    @staticmethod
    def build(source: VectorSource, folder: Path, layout: str, progress: bool = False,
              carry: tuple[Rows8, np.ndarray] | None = None) -> Rows8:
        """The tier of ``source``'s index, written to ``folder`` as a set. ``carry``: (the old index's tier, each
        new clip row's row in it or -1): the rows it has are copied, the others quantized."""
        full = source.index.array(source.array)
        if full.ndim != 3:
            raise FirstStageError(f"scan rows=int8: the index's {source.array!r} rows are not (clips, streams, dim)")
        n, s, d = full.shape
        if progress:
            say(f"  scan: int8 rows of {n:,} clips x {s} streams ({n * s * (d + 4) / 2**30:.1f} GiB) in {folder}")
        with atomic_dir(folder) as tmp:
            rows = np.lib.format.open_memmap(tmp / "rows.npy", "w+", np.int8, (n, s, d))
            mult = np.lib.format.open_memmap(tmp / "mult.npy", "w+", np.float32, (n, s))
            rowsum = np.lib.format.open_memmap(tmp / "rowsum.npy", "w+", np.int32, (n, s))
            for a in range(0, n, BUILD_CLIPS):
                b = min(n, a + BUILD_CLIPS)
                fresh: slice | np.ndarray = slice(a, b)  # the rows quantized now: all, or those the old tier lacks
                if carry is not None:
                    old, src = carry[0], carry[1][a:b]
                    kept, fresh = a + np.flatnonzero(src >= 0), a + np.flatnonzero(src < 0)
                    at = src[src >= 0]
                    rows[kept], mult[kept], rowsum[kept] = old.rows[at], old.mult[at], old.rowsum[at]
                if isinstance(fresh, slice) or len(fresh):
                    r8, m8 = quantize(full[fresh], source.cosine)
                    rows[fresh], mult[fresh], rowsum[fresh] = r8, m8, fastscan.row_sums(r8)
                if progress and (a // BUILD_CLIPS) % 32 == 31:
                    say(f"  scan: int8 rows {b:,}/{n:,} clips")
            for a in (rows, mult, rowsum):
                a.flush()
            del rows, mult, rowsum
            write_json(tmp / "manifest.json", asdict(Rows8Manifest(ROWS8_VERSION, s, d, n, layout, source.cosine)))
        loaded = Rows8.load(folder, source, layout)
        assert loaded is not None
        return loaded

    @staticmethod
    def load(folder: Path, source: VectorSource, layout: str) -> Rows8 | None:
        """The tier saved in ``folder`` for this index's videos, else None; a damaged folder is a
        :class:`FirstStageError` naming the file."""
        if not (folder / "manifest.json").is_file():
            return None
        man = Rows8Manifest.read(folder / "manifest.json")
        n = int(source.index.offsets[-1])
        if man.version != ROWS8_VERSION or man.layout != layout or man.n_clips != n or man.cosine != source.cosine:
            return None
        path = folder / "rows.npy"
        rows = check_array(read_npy(path, _error, mmap=True), str(path), _error, ndim=3, kinds="i", length=n)
        if rows.dtype != np.int8 or rows.shape[1:] != (man.n_streams, man.dim):
            raise _error(f"{path}: {rows.dtype} rows of shape {rows.shape}, expected int8 "
                         f"({n}, {man.n_streams}, {man.dim})")
        path = folder / "mult.npy"
        mult = check_array(read_npy(path, _error, mmap=True), str(path), _error, ndim=2, kinds="f", length=n)
        if mult.dtype != np.float32 or mult.shape[1] != man.n_streams:
            raise _error(f"{path}: {mult.dtype} factors of shape {mult.shape}, expected float32 ({n}, {man.n_streams})")
        path = folder / "rowsum.npy"
        rowsum = check_array(read_npy(path, _error, mmap=True), str(path), _error, ndim=2, kinds="i", length=n)
        if rowsum.dtype != np.int32 or rowsum.shape[1] != man.n_streams:
            raise _error(f"{path}: {rowsum.dtype} sums of shape {rowsum.shape}, expected int32 ({n}, {man.n_streams})")
        for name, a in (("rows.npy", rows), ("mult.npy", mult), ("rowsum.npy", rowsum)):
            if not a.flags.c_contiguous:  # the compiled loops read them in C order
                raise _error(f"{folder / name}: stored in Fortran order, expected C order")
        return Rows8(rows, mult, rowsum, source.index.offsets, folder)


def load_or_build(source: VectorSource, folder: Path, layout: str, progress: bool = False) -> Rows8:
    """The int8 tier in ``folder``'s ``rows8_<key>/``, built there when missing or for other videos."""
    if not fastscan.available():
        raise FirstStageError("scan rows=int8: its re-score is compiled, and this install has no compiled loops "
                              "(pip install . where a C compiler is found); use rows=fp16")
    where = folder / rows8_key(source)
    return Rows8.load(where, source, layout) or Rows8.build(source, where, layout, progress)


def grow_rows8(old_folder: Path, new_folder: Path, source: VectorSource, old_source: VectorSource,
               src: np.ndarray) -> int:
    """Carry the int8 tier in ``old_folder``, built over ``old_source``'s index, over to ``source``'s (the new)
    index, into ``new_folder``: ``src[c]`` is new clip row c's row in the old index, or -1 (a new or re-encoded
    video's). Returns 1 when a tier was carried over, 0 when there was none (or a damaged one: the next search builds
    it)."""
    old = old_folder / rows8_key(source)
    if not (old.is_dir() and fastscan.available()):
        return 0
    try:
        tier = Rows8.load(old, old_source, layout_key(old_source.index))
    except FirstStageError:
        return 0
    if tier is None:
        return 0
    Rows8.build(source, new_folder / old.name, layout_key(source.index), carry=(tier, src))
    return 1
