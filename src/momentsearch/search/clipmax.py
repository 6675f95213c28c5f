"""The late-fusion retriever XML and MINUTE share: a video's score is the max over its clips of a
query-clip similarity, per stream, averaged over streams (XML Eq. 1 with cosine; MINUTE Eq. 8 with
the inner product). The clips come from a named per-clip array of the index, (clips, S, d).

Such a score can be served by a vector index of each stream's clips (``search.first_stage``): the
retriever exposes its query vectors, each stream's rows and an exact score of given videos."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from momentsearch.search.index import VideoIndex, clip_rows
from momentsearch.search.kernels import half_to_float32
from momentsearch.search.stages import Queries

QueryVectors = Callable[[Queries], torch.Tensor]  # the queries the stages read -> (B, S, d) query vectors


def as_read(queries: Queries) -> torch.Tensor:
    """The queries' tokens as they are: the family's query network already made them its vectors (B, S, d)."""
    return queries.tokens


class ClipMaxRetriever:
    """``score_videos(queries) -> (B, V)``: mean over streams of max over clips of sim(q_s, c_s).
    ``vectors``: the (B, S, d) query vectors of the queries the stages read (:func:`as_read` when the family's
    query network made them; else a function of the token features)."""

    provides = frozenset({"vectors"})  # servable by a vector index (search.first_stage)

    def __init__(self, vectors: QueryVectors, index: VideoIndex, array: str, cosine: bool,
                 device: torch.device | None = None, chunk_clips: int = 200_000):
        self.vectors = vectors
        self.index, self.array, self.cosine = index, array, cosine
        self.device = device or torch.device("cpu")
        self.chunk = chunk_clips
        self.piece_elems = PIECE_ELEMS  # on a device: at most this many (query, clip) scores held at once
        self._clips: list[torch.Tensor] | None = None
        self._clip_counts: torch.Tensor | None = None
        self._pieces: dict[int, list[Piece]] = {}

    def _prepared(self) -> list[torch.Tensor]:
        """The clips as fp32 (unit rows for a cosine retriever): in chunks of ``chunk_clips`` on the CPU, one tensor
        on another device (filled a chunk at a time), so that a piece of the scan is not cut by a chunk's edge."""
        if self._clips is None:
            a = self.index.array(self.array)
            one = None if self.device.type == "cpu" else torch.empty(a.shape, dtype=torch.float32, device=self.device)
            chunks = []
            for s in range(0, a.shape[0], self.chunk):  # a copy: the index may be a read-only memory map
                c = torch.from_numpy(np.array(a[s: s + self.chunk], np.float32)).to(self.device)
                c = F.normalize(c, dim=-1) if self.cosine else c
                if one is None:
                    chunks.append(c)
                else:
                    one[s: s + len(c)] = c
            self._clips = chunks if one is None else [one]
        return self._clips

    @property
    def n_streams(self) -> int:
        return int(self.index.array(self.array).shape[1])

    @torch.no_grad()
    def query_vectors(self, queries: Queries) -> np.ndarray:
        """(B, S, d) float32: the vectors whose inner products with :meth:`stream_rows` are the clip scores."""
        q = self.vectors(queries.to(self.device)).float()
        return (F.normalize(q, dim=-1) if self.cosine else q).cpu().numpy()

    def stream_rows(self, stream: int, rows: np.ndarray | None = None) -> np.ndarray:
        """(clips, d) float32 of one stream (unit rows for a cosine retriever), in index row order;
        ``rows``: only those clip rows (sorted rows read a memory-mapped index in order)."""
        a = self.index.array(self.array)
        n = a.shape[0] if rows is None else len(rows)
        out = np.empty((n, a.shape[2]), np.float32)
        for s in range(0, n, self.chunk):
            block = a[s: s + self.chunk, stream] if rows is None else np.take(a, rows[s: s + self.chunk], axis=0)[:, stream]
            c = torch.from_numpy(np.array(block, np.float32))
            out[s: s + len(c)] = (F.normalize(c, dim=-1) if self.cosine else c).numpy()
        return out

    def exact_scores(self, q: np.ndarray, videos: np.ndarray) -> np.ndarray:
        """One query's (S, d) vectors -> the exact score of each of ``videos`` (U,), as :meth:`score_videos`."""
        if len(videos) == 0:
            return np.zeros(0, np.float32)
        off = np.asarray(self.index.offsets, np.int64)
        n = off[videos + 1] - off[videos]
        first = np.concatenate([[0], np.cumsum(n)[:-1]])
        rows = clip_rows(off, videos)
        c = torch.from_numpy(half_to_float32(np.take(self.index.array(self.array), rows, axis=0)))  # (R, S, d)
        sim = torch.einsum("sd,rsd->rs", torch.from_numpy(q), c)
        if self.cosine:  # as F.normalize: x / max(|x|, 1e-12)
            sim = sim / torch.linalg.vector_norm(c, dim=-1).clamp_min(1e-12)
        per_video = np.maximum.reduceat(sim.numpy(), first, axis=0)  # (U, S)
        return torch.from_numpy(per_video).mean(-1).numpy()

    @torch.no_grad()
    def score_videos(self, queries: Queries) -> torch.Tensor:
        return self.device_scores(queries).cpu()

    @torch.no_grad()
    def device_scores(self, queries: Queries) -> torch.Tensor:
        """(B, V) on the retriever's device: a first stage takes its top k there, and only (B, k) comes back
        (on a GPU, copying all of (B, V) to pageable host memory cost more than the scoring: 186 of 238 ms for
        64 queries over 1M videos on an H200)."""
        q = self.vectors(queries.to(self.device))
        if self.cosine:
            q = F.normalize(q, dim=-1)
        q = q.float()
        if self.device.type == "cpu":
            sim = torch.cat([torch.einsum("bsd,nsd->bns", q, h) for h in self._prepared()], dim=1)  # (B, N, S)
            return torch.from_numpy(np.maximum.reduceat(sim.numpy(), self.index.offsets[:-1], axis=1)).mean(-1)
        clips = self._prepared()
        size = 1 << max(0, (self.piece_elems // q.shape[0]).bit_length() - 1)  # clips a piece, a power of two
        if size not in self._pieces:
            self._pieces[size] = video_pieces(self.index.n_clips, [len(c) for c in clips], size, q.device)
        return streamwise_video_max(q, clips, self._lengths(q.device), self._pieces[size])

    def _lengths(self, device: torch.device) -> torch.Tensor:
        if self._clip_counts is None or self._clip_counts.device != device:
            self._clip_counts = torch.from_numpy(self.index.n_clips.astype(np.int64)).to(device)
        return self._clip_counts


PIECE_ELEMS = 1 << 29  # 2 GiB of fp32 scores: as fast as one (B, N) piece on an H200; smaller pieces were slower
Piece = tuple[int, int, int, int, torch.Tensor]  # chunk, its first and end clip, first video, clips of each video


def video_pieces(n_clips: np.ndarray, chunk_sizes: list[int], size: int, device: torch.device) -> list[Piece]:
    """The clips (in chunks of ``chunk_sizes``) cut into pieces of at most ``size`` within a chunk: each piece's
    chunk, first and end clip in it, the first video it touches and how many of each video's clips it holds (a
    video cut by a piece's edge is in both pieces, each with its part)."""
    off = np.concatenate([[0], np.cumsum(n_clips, dtype=np.int64)])
    pieces, g = [], 0
    for ci, n in enumerate(chunk_sizes):
        for a in range(0, n, size):
            p0, p1 = g + a, g + min(a + size, n)
            va = int(np.searchsorted(off, p0, "right")) - 1
            vb = int(np.searchsorted(off, p1 - 1, "right")) - 1
            held = np.minimum(off[va + 1: vb + 2], p1) - np.maximum(off[va: vb + 1], p0)
            pieces.append((ci, a, a + p1 - p0, va, torch.from_numpy(held).to(device)))
        g += n
    return pieces


def streamwise_video_max(q: torch.Tensor, clips: list[torch.Tensor], lengths: torch.Tensor,
                         pieces: list[Piece] | None = None) -> torch.Tensor:
    """(B, S, d) queries, the clips in chunks of (n, S, d), (V,) clips per video -> (B, V): the mean over streams of
    each video's best clip, a stream and a piece at a time (:func:`video_pieces`; default: one piece a chunk):
    (B, n) products and each video's max along the last axis, folded into the videos' running max. No (B, N, S)
    matrix is made and permuted (on an H200, 13.6 against 21.8 ms for one query over 1M videos), and no (B, N)
    one is concatenated: a piece's scores are at most ``PIECE_ELEMS``."""
    if pieces is None:
        pieces = video_pieces(lengths.cpu().numpy(), [len(c) for c in clips], max(len(c) for c in clips), q.device)
    total = None
    for s in range(q.shape[1]):
        best = torch.full((q.shape[0], len(lengths)), -torch.inf, device=q.device)
        for ci, a, b, va, held in pieces:
            part = best[:, va: va + len(held)]
            torch.maximum(part, video_max_torch(q[:, s] @ clips[ci][a:b, s].T, held), out=part)
        total = best if total is None else total + best
    return total / q.shape[1]


def video_max_torch(sim: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """(B, N, ...) clip scores, (V,) clips per video (each >= 1, contiguous) -> (B, V, ...) each video's max,
    as ``np.maximum.reduceat`` over the offsets, on the tensors' device."""
    return torch.segment_reduce(sim, "max", lengths=lengths.expand(sim.shape[0], -1), axis=1)
