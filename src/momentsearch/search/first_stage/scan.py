"""The ``scan`` first stage: a compressed scan of every clip, then an exact re-score of the best videos.

The ColBERTv2/PLAID recipe (a compressed scan first, exact scores last) for a video score that is a
mean over streams of each stream's best clip (XML Eq. 1, MINUTE Eq. 8, CLIP):

* **build**, per stream s: a product quantizer (``m`` sub-vectors of d/m dimensions, 256 centroids
  each, or 128 with ``bits=7``, trained by FAISS on a seeded sample of the stream's clip vectors) codes every clip in ``m``
  bytes; with ``coarse`` a second quantizer of ``coarse`` sub-vectors codes every clip again (the funnel);
* **search**, per batch: the tables ``lut_s[j, c] = <q_s^(j), centroid_j,c>`` (m x 256), each clip's
  approximate inner product ``sum_j lut_s[j, code_j]``, each video's approximate score
  ``a(v) = mean_s max_{clips of v} (...)``: one pass over the codes for the whole batch (the compiled
  loops of :mod:`momentsearch.search.fastscan`, byte tables, or the numba ones,
  :mod:`momentsearch.search.first_stage.scan_loops`), split over ``threads`` threads by video ranges;
  with the funnel and fewer than FUNNEL_BATCH queries, the coarse codes over every video and the full
  codes over its top ``refine`` only. The ``rescore`` videos of highest ``a(v)`` are scored exactly from
  the index's own clip arrays, and the top ``k`` of those returned.

What is exact: the scores returned always are; a video of the true top k is returned whenever its
approximate score ranks within the top ``rescore``. ``benchmarks/first_stage_scale.py`` measures
recall@100 against exact search for each ``rescore``; :func:`default_rescore` is the rule ``auto``
uses. Parameters: ``m``, ``coarse``, ``bits`` (build; defaults d/4 at most 32, :func:`default_coarse`, 8),
``rescore``, ``refine``, ``threads`` and ``loops`` (search); ``rows=int8``, ``exact`` and ``int8_batch`` (the int8 tier
between the codes and the fp16 rows, whose pass over every clip replaces the codes' for a batch of ``int8_batch``
queries or more, :mod:`~momentsearch.search.first_stage.scan_rows8`).

Files, one folder per built stage written as a set: ``manifest.json`` (a :class:`ScanManifest`),
``codebooks.npy`` (S, m, 2**bits, d/m) float32, per stream ``codes_s{s}.npy`` (N, m) uint8 in index row
order, the same codes packed as the compiled loops read them in ``blocks_s{s}.npy`` (a serving process reads them
instead of packing them again: 22.6 s at 1M videos), and with the funnel ``coarse_codebooks.npy``,
``coarse_codes_s{s}.npy`` and ``coarse_blocks_s{s}.npy``. ``scan_build.grow_scan``
serves a grown index: it keeps the codebooks and the kept videos' codes, codes the new videos and drops
the removed ones, so the grown stage holds exactly what a stage built anew with the same codebooks would.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from momentsearch.console import say
from momentsearch.errors import FirstStageError
from momentsearch.fileio import atomic_dir, write_json
from momentsearch.readers import check_array, read_json_object, read_npy
from momentsearch.search import fastscan
from momentsearch.search.first_stage.pools import pad, score_pools
from momentsearch.search.first_stage.scan_loops import compiled, scan_loops
from momentsearch.search.index import VideoIndex
from momentsearch.search.stages import Queries, VectorSource

Tier = tuple[np.ndarray, list[np.ndarray]]  # codebooks (S, m, 2**bits, d/m) and per stream (N, m) uint8 codes

SCAN_VERSION = 1
FUNNEL_BATCH = 4  # batches of this many queries or more take one pass of the full codes (see candidates)
TRAIN_ROWS = 131_072  # clips sampled per stream to train the product quantizer
CODE_BLOCK = 262_144  # clips coded per FAISS call


def default_rescore(k: int, n_videos: int) -> int:
    """Videos re-scored exactly for a top ``k``: 10 per wanted video, at least 1,000, and one in 400
    videos above 400,000 (``auto``'s rule). Measured for k = 100 in ``benchmarks/first_stage_scale.py``:
    recall@100 0.998 at 100k videos with 1,000 (0.983 with 500); at 1M, 0.965 with 1,000, 0.994 with 2,000."""
    return min(n_videos, max(1000, 10 * k, n_videos // 400))


def top_indices(x: np.ndarray, r: int) -> np.ndarray:
    """The indices of the ``r`` largest of ``x`` (unordered), as ``np.argpartition(-x, r - 1)[:r]`` finds them,
    about 10x faster over 100,000 scores: a threshold from every 16th score keeps a superset, which is then
    partitioned (the whole array when the threshold keeps too few)."""
    n = len(x)
    if r >= n:
        return np.arange(n)
    if n >= 20_000 and r * 8 <= n:
        sample = x[::16]
        kk = min(len(sample), r // 16 + r // 64 + 16)  # about 1.25 r / 16 of the sample: a superset of r
        th = np.partition(sample, len(sample) - kk)[len(sample) - kk]
        idx = np.flatnonzero(x >= th)
        if len(idx) >= r:
            return idx[np.argpartition(-x[idx], r - 1)[:r]]
    return np.argpartition(-x, r - 1)[:r]


def default_refine(rescore: int, n_videos: int) -> int:
    """Videos the funnel's coarse pass hands to the full codes: 5 per re-scored video, at least one in 20.
    Measured at 100k (``benchmarks/first_stage_scale.py``): 16-byte codes' top 5,000, then the 32-byte codes'
    top 1,000, hold recall@100 0.998 (0.9979), as the 32-byte codes over every video do (0.9981)."""
    return min(n_videos, max(5 * rescore, n_videos // 20))


def default_coarse(m: int, n_clips: int) -> int:
    """The funnel's coarse codes (bytes a clip and stream): m/2 above 10,000,000 clips where the compiled loops
    run, none below. Measured (``benchmarks/first_stage_scale.py``): at 100k videos (3.4 M clips) the funnel
    costs more at batch 1 than one pass (19.8 against 17.4 ms): the second pass's random reads of 5,000
    videos' codes take what the coarse pass saves."""
    from momentsearch.search import fastscan

    return m // 2 if n_clips > 10_000_000 and m % 2 == 0 and m >= 8 and fastscan.available() else 0


def default_m(dim: int) -> int:
    """Sub-vectors per clip: d/4 (4 dimensions each), at most 32 bytes a clip; a divisor of d."""
    m = min(32, max(1, dim // 4))
    while dim % m:
        m -= 1
    return m


@dataclass(frozen=True)
class ScanManifest:
    """``manifest.json`` of a built scan stage: what it was built from, and the layout it serves."""

    version: int
    m: int
    n_streams: int
    dim: int
    n_videos: int
    n_clips: int
    layout: str  # :func:`layout_key` of the index it serves
    coarse_m: int = 0  # the funnel's coarse codes: bytes a clip and stream (0: none)
    bits: int = 8  # bits a code (both tiers): 8 (256 centroids a sub-quantizer) or 7 (128)

    @classmethod
    def read(cls, path: Path) -> ScanManifest:
        raw = read_json_object(path, _error, "scan stage manifest")
        ints = ("version", "m", "n_streams", "dim", "n_videos", "n_clips")
        if any(type(raw.get(k)) is not int or raw[k] < 0 for k in ints):
            raise _error(f"{path}: {', '.join(ints)} must be whole numbers >= 0")
        if raw["m"] < 1 or raw["dim"] % raw["m"]:
            raise _error(f"{path}: m must divide dim")
        if not isinstance(raw.get("layout"), str):
            raise _error(f"{path}: layout must be a string")
        coarse = raw.get("coarse_m", 0)
        if type(coarse) is not int or coarse < 0 or (coarse and raw["dim"] % coarse):
            raise _error(f"{path}: coarse_m must be 0 or a whole number that divides dim")
        bits = raw.get("bits", 8)
        if bits not in (7, 8) or type(bits) is not int:
            raise _error(f"{path}: bits must be 7 or 8")
        return cls(*(raw[k] for k in ints), raw["layout"], coarse, bits)

    def write(self, path: Path) -> None:
        write_json(path, asdict(self))


def _error(message: str) -> FirstStageError:
    return FirstStageError(f"{message}; delete the folder and the stage is built again")


def layout_key(index: VideoIndex) -> str:
    """The videos and clip counts an index holds, in order (a grown or shrunk index has another)."""
    h = hashlib.sha1(json.dumps([len(index), index.meta.get("fingerprint")]).encode())
    h.update("\n".join(index.video_ids).encode())
    h.update(np.ascontiguousarray(index.offsets, np.int64).tobytes())
    return h.hexdigest()


def stage_key(source: VectorSource, m: int, coarse_m: int = 0, bits: int = 8) -> str:
    """Names a scan stage's folder: the model, the array, unit or raw rows, m, the coarse codes' m and the bits a
    code, not the videos (a grown index keeps it)."""
    blob = json.dumps(["scan", SCAN_VERSION, source.index.meta.get("fingerprint"), source.array,
                       source.cosine, m, *([coarse_m] if coarse_m else []), *([f"bits={bits}"] if bits != 8 else [])])
    return "scan_" + hashlib.sha1(blob.encode()).hexdigest()[:16]


def _faiss() -> Any:
    try:
        import faiss
    except ImportError:
        raise FirstStageError("the scan first stage trains its quantizer with FAISS: pip install "
                              "'momentsearch[service]' (or faiss-cpu), or use --first-stage exact") from None
    return faiss


def _ranges(offsets: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """``parts`` video ranges holding about as many clips each."""
    cuts = np.searchsorted(offsets, np.linspace(0, offsets[-1], parts + 1)[1:-1], side="right") - 1
    bounds = [0, *sorted(set(int(c) for c in cuts)), len(offsets) - 1]
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


class ScanFirstStage:
    """Each query's top ``k`` videos by a scan of every clip's PQ code and an exact re-score."""

    spec = "scan"

    def __init__(self, source: VectorSource, codebooks: np.ndarray, codes: list[np.ndarray], rescore: int | None = None,
                 threads: int | None = None, folder: Path | None = None, loops: str = "auto",
                 coarse: Tier | None = None, refine: int | None = None, blocks: list[list[np.ndarray]] | None = None,
                 rows8: Any = None, exact: int | None = None, int8_batch: int | None = None):
        self.source = source
        self.codebooks = np.ascontiguousarray(codebooks, np.float32)  # (S, m, 2**bits, d/m)
        self.bits = int(self.codebooks.shape[2]).bit_length() - 1
        self.codes = codes  # per stream (N, m) uint8
        self.coarse = None if coarse is None else (np.ascontiguousarray(coarse[0], np.float32), coarse[1])
        self.refine = refine
        self.offsets = np.ascontiguousarray(source.index.offsets, np.int64)
        self.n_videos = len(self.offsets) - 1
        self.rescore, self.folder = rescore, folder
        self.rows8, self.exact = rows8, exact  # the int8 tier (scan_rows8.Rows8) and the videos read in fp16 after it
        self.int8_batch = int8_batch  # batches of this many queries or more: the int8 rows' pass instead of the codes'
        self.threads = max(1, threads or min(4, os.cpu_count() or 1))
        self._ranges = ranges = _ranges(self.offsets, self.threads)
        self._pool = ThreadPoolExecutor(self.threads) if self.threads > 1 else None
        self.loops = scan_loops(codes, self.offsets, ranges, self._pool, loops,
                                None if self.coarse is None else self.coarse[1], blocks, self.bits)  # runs the passes
        self.stats = {"queries": 0, "uncertified": 0, "rounds": 0, "candidates": 0}

    def luts(self, q: np.ndarray, tier: int = 0) -> np.ndarray:
        """(B, S, d) query vectors -> (B, S, m, 256) tables of sub-vector inner products (tier 1: the coarse codebooks');
        7-bit codes: the unused upper half holds each table's minimum (the byte quantization's shift and scale stay)."""
        books = self.codebooks if tier == 0 else self.coarse[0]  # type: ignore[index]
        s, m, c, sub = books.shape
        q = np.asarray(q, np.float32)
        t = np.einsum("sjcd,bsjd->bsjc", books, q.reshape(len(q), s, m, sub))
        if c < 256:
            t = np.concatenate([t, np.repeat(t.min(-1, keepdims=True), 256 - c, -1)], -1)
        return t

    @property
    def funnel(self) -> bool:
        """Whether a coarse pass over every video comes first (coarse codes, and loops that read them)."""
        return self.coarse is not None and len(self.loops.tiers) > 1

    def candidates(self, q: np.ndarray, r: int) -> list[np.ndarray]:
        """Each query's ``r`` videos of highest approximate score (sorted ids): one pass of the codes over every
        video, or, for a batch below FUNNEL_BATCH, the funnel: the coarse codes over every video, the codes over
        its top ``refine`` (a batch reads the codes once for all its queries, and one pass is then cheaper)."""
        if not self.funnel or len(q) >= FUNNEL_BATCH:
            return [np.sort(top_indices(a, r)) for a in self.approximate(q)]
        coarse = self.loops.approximate(self.luts(q, 1), tier=1)
        n = min(self.n_videos, max(r, self.refine or default_refine(r, self.n_videos)))
        fine_luts, out = self.luts(q), []
        for i in range(len(q)):
            pre = np.sort(top_indices(coarse[i], n))
            fine = self.loops.approximate_videos(fine_luts[i], pre)  # type: ignore[attr-defined]
            out.append(np.sort(pre[top_indices(fine, r)]))
        return out

    def approximate(self, q: np.ndarray) -> np.ndarray:
        """(B, S, d) query vectors -> (B, V) approximate scores: the mean over streams of each video's best
        clip under the quantized inner product (one pass over the codes for the whole batch)."""
        return self.loops.approximate(self.luts(q))

    def retrieve(self, queries: Queries, k: int, pools: Sequence[Sequence[int]] | None = None
                 ) -> tuple[torch.Tensor, np.ndarray]:
        q = self.source.query_vectors(queries)  # (B, S, d)
        if pools is not None:  # a small set of videos: scored exactly
            return score_pools(self.source, q, pools, self.n_videos, k)
        k = min(k, self.n_videos)
        r = min(self.n_videos, max(k, self.rescore or default_rescore(k, self.n_videos)))
        every, n8 = np.arange(self.n_videos), max(k, self.exact or 2 * k)
        if self.rows8 is not None and len(q) >= (self.int8_batch or self.rows8.batch):  # one pass of the int8 rows
            cands = self.rows8.candidates(q, n8, self._ranges, self._pool)
        else:
            cands = self.candidates(q, r) if r < self.n_videos else [every] * len(q)
            if self.rows8 is not None:  # the int8 rows first, the fp16 rows of the best ``exact`` only
                cands = [self.rows8.top(q[i], c, n8, self._pool) for i, c in enumerate(cands)]
        self.source.index.ask_for(self.source.array, np.concatenate(cands))  # rows on disk: every read started at once
        rows = [self.loops.exact_top(self.source, q[i], c, k) for i, c in enumerate(cands)]
        for key, n in (("queries", 1), ("uncertified", r < self.n_videos), ("candidates", r), ("rounds", 1)):
            self.stats[key] += n * len(q)
        return pad(rows, k)

    @property
    def nbytes(self) -> int:
        """What the stage holds in memory: the codebooks and the codes as its loops read them."""
        books = self.codebooks.nbytes + (0 if self.coarse is None else self.coarse[0].nbytes)
        return int(books + self.loops.nbytes)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    # -- building, saving, loading, growing -------------------------------------------------------------

    @staticmethod
    def train(source: VectorSource, m: int, progress: bool = False, bits: int = 8) -> np.ndarray:
        """(S, m, 2**bits, d/m) product-quantizer codebooks of each stream's clip vectors (a seeded sample)."""
        faiss = _faiss()
        n = int(source.index.offsets[-1])
        if n < 256:
            raise FirstStageError(f"scan: its quantizer needs at least 256 clips, the index has {n}; "
                                  "use --first-stage exact")
        sample = np.sort(np.random.default_rng(0).choice(n, min(n, TRAIN_ROWS), replace=False))
        out = []
        for s in range(source.n_streams):
            x = np.ascontiguousarray(source.stream_rows(s, sample))
            if x.shape[1] % m:
                raise FirstStageError(f"scan: m={m} does not divide the vectors' dimension {x.shape[1]}")
            if progress:
                say(f"  scan: training a {m}-byte product quantizer on {len(x):,} clips (stream {s + 1})")
            pq = faiss.ProductQuantizer(x.shape[1], m, bits)
            pq.cp.seed = 1234 + s
            pq.cp.min_points_per_centroid = 1  # a small corpus: no warning per sub-quantizer (16 lines for 2 streams)
            pq.train(x)
            out.append(faiss.vector_to_array(pq.centroids).reshape(m, 1 << bits, x.shape[1] // m))
        return np.stack(out).astype(np.float32)

    @staticmethod
    def encode(source: VectorSource, codebooks: np.ndarray, rows: np.ndarray | None = None, progress: bool = False
               ) -> list[np.ndarray]:
        """Each stream's (len(rows), m) uint8 codes of the clip ``rows`` (default: every clip, in order)."""
        faiss = _faiss()
        n_rows = int(source.index.offsets[-1]) if rows is None else len(rows)
        out = []
        for s, book in enumerate(codebooks):
            m, c, sub = book.shape
            bits = c.bit_length() - 1
            pq = faiss.ProductQuantizer(m * sub, m, bits)
            faiss.copy_array_to_vector(np.ascontiguousarray(book.ravel()), pq.centroids)
            codes = np.empty((n_rows, m), np.uint8)
            for a in range(0, n_rows, CODE_BLOCK):
                sel = np.arange(a, min(a + CODE_BLOCK, n_rows)) if rows is None else rows[a: a + CODE_BLOCK]
                got = pq.compute_codes(np.ascontiguousarray(source.stream_rows(s, sel)))
                codes[a: a + len(sel)] = got if bits == 8 else faiss.unpack_bitstrings(got, m, bits)
                if progress and (a // CODE_BLOCK) % 8 == 7:
                    say(f"  scan: coded {a + len(sel):,}/{n_rows:,} clips (stream {s + 1})")
            out.append(codes)
        return out

    def save(self, folder: Path, layout: str) -> None:
        tiers = self.loops.tiers if self.loops.name == "compiled" else None  # their packed blocks, else packed here
        with atomic_dir(folder) as tmp:
            np.save(tmp / "codebooks.npy", self.codebooks)
            for prefix, codes, t in [("", self.codes, 0)] + ([("coarse_", self.coarse[1], 1)] if self.coarse else []):
                for s, c in enumerate(codes):
                    np.save(tmp / f"{prefix}codes_s{s}.npy", c)
                    np.save(tmp / f"{prefix}blocks_s{s}.npy", tiers[t][s] if tiers else fastscan.pack_blocks(c))
            if self.coarse is not None:
                np.save(tmp / "coarse_codebooks.npy", self.coarse[0])
            n_streams, m, _, sub = self.codebooks.shape
            ScanManifest(SCAN_VERSION, m, n_streams, m * sub, self.n_videos, int(self.offsets[-1]), layout,
                         0 if self.coarse is None else self.coarse[0].shape[1], self.bits).write(tmp / "manifest.json")
        self.folder = folder

    @classmethod
    def load(cls, folder: Path, source: VectorSource, layout: str | None, **kw: Any) -> ScanFirstStage | None:
        """The stage saved in ``folder`` if it serves ``layout`` (None: any), else None (not there, or
        for other videos); a damaged folder is a :class:`FirstStageError` naming the file."""
        if not (folder / "manifest.json").is_file():
            return None
        man = ScanManifest.read(folder / "manifest.json")
        if man.version != SCAN_VERSION or (layout is not None and man.layout != layout):
            return None
        if man.n_videos != len(source.index) or man.n_clips != int(source.index.offsets[-1]):
            return None  # built over an index of another size (``layout`` None: a caller's old index)
        books, codes = _read_tier(folder, "", man, man.m)
        coarse = _read_tier(folder, "coarse_", man, man.coarse_m) if man.coarse_m else None
        packed = None
        if compiled(kw.get("loops", "auto")):  # the compiled loops will read them
            blocks = [_read_blocks(folder, "", man, man.m)] + ([_read_blocks(folder, "coarse_", man, man.coarse_m)]
                                                               if man.coarse_m else [])
            packed = None if any(b is None for b in blocks) else blocks
        return cls(source, books, codes, folder=folder, coarse=coarse, blocks=packed, **kw)  # type: ignore[arg-type]


def _read_tier(folder: Path, prefix: str, man: ScanManifest, m: int) -> Tier:
    """One set of codebooks and codes (``prefix`` "" or "coarse_"), checked against the manifest."""
    path = folder / f"{prefix}codebooks.npy"
    books = check_array(read_npy(path, _error), str(path), _error, ndim=4, kinds="f", length=man.n_streams,
                        finite=True)
    if books.shape[1:] != (m, 1 << man.bits, man.dim // m):
        raise _error(f"{path}: shape {books.shape}, the manifest says ({man.n_streams}, {m}, {1 << man.bits}, "
                     f"{man.dim // m})")
    codes = []
    for s in range(man.n_streams):
        path = folder / f"{prefix}codes_s{s}.npy"
        c = check_array(read_npy(path, _error, mmap=True), str(path), _error, ndim=2, kinds="u", length=man.n_clips)
        if c.dtype != np.uint8 or c.shape[1] != m:
            raise _error(f"{path}: {c.dtype} codes of width {c.shape[1]}, expected uint8 of width {m}")
        codes.append(c)
    return books, codes


def _read_blocks(folder: Path, prefix: str, man: ScanManifest, m: int) -> list[np.ndarray] | None:
    """The tier's codes packed as the compiled loops read them (``{prefix}blocks_s*.npy``, memory-mapped: a serving
    process starts without packing or reading them, and processes serving the same files, such as the shards of a
    sharded index, share one copy in the page cache), or None for a folder saved before they were stored."""
    paths = [folder / f"{prefix}blocks_s{s}.npy" for s in range(man.n_streams)]
    if not all(p.is_file() for p in paths):
        return None
    shape = (-(-man.n_clips // fastscan.BLOCK), m, fastscan.BLOCK)
    out = []
    for path in paths:
        b = read_npy(path, _error, mmap=True)
        if b.dtype != np.uint8 or b.shape != shape:
            raise _error(f"{path}: {b.dtype} blocks of shape {b.shape}, expected uint8 of shape {shape}")
        out.append(b)
    return out
