"""The first stage: each query's top ``k`` videos (scores and indices), exact, by a compressed scan, or
through a vector backend.

* :class:`ExactFirstStage` scores every video with the family's retriever and keeps the top ``k``
  (the reference, and the only choice for a retriever no vector index can serve);
* :class:`~momentsearch.search.first_stage.scan.ScanFirstStage` (``scan``): product-quantized codes of
  every clip scanned, each video's best clip, the best videos re-scored exactly (``auto`` above
  200,000 clips);
* :class:`VectorFirstStage` serves a retriever whose video score is an aggregate of per-stream
  maxima of inner products over clip vectors (XML Eq. 1, MINUTE Eq. 8, CLIP): a video's score is
  ``mean_s max_c <q_s, c_s>``. Each stream's clip vectors sit in a backend; a query fetches its top
  ``M = k x clips_per_video`` clips per stream (8 by default: 800 clips for 100 videos), the clips'
  videos are the candidates, and each candidate is scored exactly from the index's own arrays.
  With an exhaustive backend (FAISS ``Flat``, Milvus ``FLAT``) the result is certified: a video
  none of whose clips was fetched scores at most ``mean_s tau_s`` (tau_s: the M-th fetched score of
  stream s), so when the k-th candidate scores at least that bound the top ``k`` is the exact one
  (Fagin's threshold algorithm); otherwise M grows 4x, up to ``rounds`` rounds (4), and the top
  ``k`` equals exhaustive search. An approximate backend (HNSW, IVF) grows its rounds the same way, the
  certificate then taking its lists as the true top clips (HNSW gains from it, IVF's unprobed lists stay missed);
  ``benchmarks/first_stage_scale.py`` measures its recall@100 against exact.
  Parameters of the stage itself: ``clips_per_video``, ``rounds``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from momentsearch.console import say
from momentsearch.errors import FirstStageError
from momentsearch.search.first_stage.base import VectorBackend, create_backend
from momentsearch.search.first_stage.pools import pad, restrict_to_pools, score_pools
from momentsearch.search.first_stage.scan import ScanFirstStage
from momentsearch.search.first_stage.scan_build import build_scan
from momentsearch.search.index import VideoIndex
from momentsearch.search.stages import Queries, Retriever, VectorSource, declared, provides

AUTO_EXACT_LIMIT = 200_000  # clips: above, ``auto`` scans clip codes (``scan``) instead of every vector


class FirstStage(Protocol):
    spec: str

    def retrieve(self, queries: Queries, k: int, pools: Sequence[Sequence[int]] | None = None
                 ) -> tuple[torch.Tensor, np.ndarray]: ...


class ExactFirstStage:
    spec = "exact"

    def __init__(self, retriever: Retriever):
        self.retriever = retriever

    def retrieve(self, queries: Queries, k: int, pools: Sequence[Sequence[int]] | None = None
                 ) -> tuple[torch.Tensor, np.ndarray]:
        on_device = getattr(self.retriever, "device_scores", None)
        if pools is None and on_device is not None:  # the top k taken where the scores are: (B, k) comes back
            s = on_device(queries)
            top, idx = s.topk(min(k, s.shape[1]), dim=1)
            return top.cpu(), idx.cpu().numpy()
        s = self.retriever.score_videos(queries).cpu()  # (B, V)
        if pools is not None:
            s = restrict_to_pools(s, pools)
            k = min(k, max(len(p) for p in pools))
        top, idx = s.topk(min(k, s.shape[1]), dim=1)
        return top, idx.numpy()


class VectorFirstStage:
    def __init__(self, source: VectorSource, backends: list[VectorBackend], spec: str, clips_per_video: int = 8,
                 max_rounds: int = 4):
        if len(backends) != source.n_streams:
            raise FirstStageError(f"{len(backends)} backends for {source.n_streams} streams")
        self.source, self.backends, self.spec = source, backends, spec
        self.clips_per_video, self.max_rounds = clips_per_video, max_rounds
        self.offsets = np.asarray(source.index.offsets, np.int64)
        self.n_rows = int(self.offsets[-1])
        self.stats = {"queries": 0, "uncertified": 0, "rounds": 0, "candidates": 0}

    def retrieve(self, queries: Queries, k: int, pools: Sequence[Sequence[int]] | None = None
                 ) -> tuple[torch.Tensor, np.ndarray]:
        q = self.source.query_vectors(queries)  # (B, S, d)
        n_videos = len(self.offsets) - 1
        if pools is not None:  # a small set of videos: scored exactly, no index needed
            return score_pools(self.source, q, pools, n_videos, k)
        k = min(k, n_videos)
        out: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(q)
        todo = np.arange(len(q))
        m = min(k * self.clips_per_video, self.n_rows)
        for round_ in range(self.max_rounds):
            m_eff = min(m, self.n_rows, *(b.max_k for b in self.backends))
            fetched = [b.search(q[todo, s], m_eff) for s, b in enumerate(self.backends)]
            self.stats["rounds"] += 1
            last = round_ == self.max_rounds - 1 or m_eff >= min(self.n_rows, *(b.max_k for b in self.backends))
            again = []
            for j, i in enumerate(todo):
                vids, sc, certified = self._merge(q[i], [(f[0][j], f[1][j]) for f in fetched], k, m_eff)
                if certified or last:
                    out[i] = (vids, sc)
                    self.stats["uncertified"] += int(not certified)
                else:
                    again.append(i)
            if not again:
                break
            todo, m = np.asarray(again), m * 4
        self.stats["queries"] += len(q)
        return pad([o for o in out if o is not None], k)

    def _merge(self, q: np.ndarray, fetched: list[tuple[np.ndarray, np.ndarray]], k: int, m: int
               ) -> tuple[np.ndarray, np.ndarray, bool]:
        """One query's fetched clips per stream -> (top k videos, their exact scores, certified?).

        A video's best fetched clip in a stream is its maximum there (exactly so for an exhaustive
        backend); a stream where none of its clips was fetched bounds it by tau_s. Videos seen in every
        stream are ranked by those maxima; the others only get their exact score computed when their
        upper bound could still reach the top k, so few videos are read from the index."""
        n_streams = len(fetched)
        seen, best, tau = [], [], np.empty(n_streams, np.float32)
        for s, (sc, ids) in enumerate(fetched):
            ok = ids >= 0
            sc, ids = sc[ok], ids[ok]
            v, first = np.unique(np.searchsorted(self.offsets, ids, side="right") - 1, return_index=True)
            seen.append(v)
            best.append(sc[first])  # lists come best first: a video's first clip is its best
            tau[s] = -np.inf if (len(ids) < m or m >= self.n_rows) else sc[-1]
        cand = np.unique(np.concatenate(seen))
        known = np.full((len(cand), n_streams), np.nan, np.float32)
        for s in range(n_streams):
            known[np.searchsorted(cand, seen[s]), s] = best[s]
        full = ~np.isnan(known).any(1)
        score = np.full(len(cand), -np.inf, np.float32)
        score[full] = known[full].mean(1)
        upper = np.where(np.isnan(known), tau[None], known).mean(1)
        part = np.flatnonzero(~full)
        part = part[np.argsort(-upper[part], kind="stable")]
        kth = score[np.argpartition(-score, k - 1)[k - 1]] if len(score) >= k else -np.inf
        for c in range(0, len(part), 256):
            chunk = part[c: c + 256]
            chunk = chunk[upper[chunk] > kth]
            if len(chunk) == 0:
                break
            score[chunk] = self.source.exact_scores(q, cand[chunk])
            kth = score[np.argpartition(-score, k - 1)[k - 1]] if len(score) >= k else -np.inf
        top = cand[np.argsort(-score, kind="stable")[:k]]
        exact = self.source.exact_scores(q, top)  # an approximate backend's maxima are only lower bounds
        order = np.argsort(-exact, kind="stable")
        self.stats["candidates"] += len(cand)
        return top[order], exact[order], bool(len(top) >= k and kth >= float(np.mean(tau)))

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self.backends)

    def close(self) -> None:
        for b in self.backends:
            b.close()


def data_key(index: VideoIndex, array: str, stream: int, unit: bool | None = None) -> str:
    """The identity of one stream's rows: the model and data that encoded the index, its layout, and
    whether the rows are unit vectors (a cosine retriever's) or raw (an inner product's): on a shared
    Milvus server the two must not find each other's collections."""
    h = hashlib.sha1(json.dumps([index.meta.get("fingerprint"), index.meta.get("corpus_fingerprint"),
                                 index.meta.get("data_signature"), index.video_ids[:1], len(index), array,
                                 stream, unit], default=str).encode())
    h.update(np.ascontiguousarray(index.offsets, np.int64).tobytes())
    return h.hexdigest()


def resolve_spec(spec: str, n_rows: int, device_bytes: tuple[int, int] | None = None) -> str:
    """``auto`` -> ``exact`` up to AUTO_EXACT_LIMIT clips (a scan of every clip is fast there) or without
    FAISS, ``scan`` above (recall@100 >= 0.99 against exact, measured at 100k and 1M videos).
    ``device_bytes``: (bytes the exact copy of every clip needs, bytes free) on a GPU the retriever runs
    on: ``exact`` there while the copy takes at most 80 % of what is free (1M videos: 25 ms a query on
    an H200, ``benchmarks/gpu_first_stage.py``)."""
    if spec != "auto":
        return spec
    if n_rows <= AUTO_EXACT_LIMIT or (device_bytes is not None and device_bytes[0] <= 0.8 * device_bytes[1]):
        return "exact"
    try:
        import faiss  # noqa: F401
    except ImportError:
        return "exact"
    return "scan"


def _device_bytes(retriever: Retriever, index: VideoIndex) -> tuple[int, int] | None:
    """(bytes of the retriever's fp32 copy of every clip, bytes free) when it runs on a CUDA device."""
    if "vectors" not in provides(retriever):
        return None
    dev = retriever.device  # a VectorSource
    if dev.type != "cuda":
        return None
    shape = index.array(retriever.array).shape
    return int(np.prod(shape)) * 4, int(torch.cuda.mem_get_info(dev)[0])


def _unwritable(asked: str, what: str, root: Path, e: OSError, retriever: Retriever) -> ExactFirstStage:
    """A stage that cannot be kept in ``root``: ``auto`` falls back to exact, a named stage is an error."""
    if asked == "auto":
        return ExactFirstStage(retriever)
    raise FirstStageError(f"cannot keep the {what} in {root} ({e.strerror or e}); make the "
                          "folder writable, or use --first-stage exact") from None


def build_first_stage(retriever: Retriever, index: VideoIndex, spec: str = "exact", folder: str | Path | None = None,
                      params: dict[str, str] | None = None, family: str = "", clips_per_video: int = 8,
                      progress: bool = False) -> ExactFirstStage | VectorFirstStage | ScanFirstStage:
    """The first stage ``spec`` over ``retriever`` (a family's), its built vector indexes kept in ``folder``
    (built there when missing or stale). ``auto``: exact up to 200,000 clips, ``scan`` above."""
    asked = spec
    spec = resolve_spec(spec, int(index.offsets[-1]), _device_bytes(retriever, index))
    if spec == "exact":
        if params:
            raise FirstStageError(f"the exact first stage takes no parameters, got {sorted(params)}")
        return ExactFirstStage(retriever)
    if "vectors" not in provides(retriever):
        why = declared(retriever, "not_vector_servable", "its video score is not a maximum of inner products")
        raise FirstStageError(f"model family {family or '?'} cannot be served by a vector index ({spec}): "
                              f"{why}. Use the first stage 'exact'")
    if folder is None:
        raise FirstStageError(f"the first stage {spec} needs a folder to keep its index in")
    root = Path(folder)
    params = dict(params or {})
    if spec == "scan":
        try:
            return build_scan(retriever, root, params, progress)
        except OSError as e:  # a read-only index folder, a full disk
            return _unwritable(asked, "scan stage", root, e, retriever)
    try:
        clips_per_video = int(params.pop("clips_per_video", clips_per_video))
        rounds = int(params.pop("rounds", 0))
    except ValueError:
        raise FirstStageError("clips_per_video and rounds must be whole numbers") from None
    if clips_per_video < 1 or rounds < 0:
        raise FirstStageError(f"clips_per_video must be >= 1 and rounds >= 1, got {clips_per_video} and {rounds}")
    backends = []
    for s in range(retriever.n_streams):
        backend = create_backend(spec, **params)
        name = f"{backend.key(data_key(index, retriever.array, s, retriever.cosine))}_s{s}"
        if not backend.load(root, name, int(index.offsets[-1])):
            if progress:
                say(f"building the first stage {spec} (stream {s + 1}/{retriever.n_streams}) in {root}")
            try:
                backend.build(retriever.stream_rows(s), root, name, progress)
            except OSError as e:  # a read-only index folder, a full disk
                return _unwritable(asked, f"{spec} index", root, e, retriever)
        backends.append(backend)
    # growing rounds until each query's top k is certified by its streams' lists (for an approximate index the
    # certificate holds as far as its lists are the true top clips: it takes the index's word for them)
    rounds = rounds or 4
    return VectorFirstStage(retriever, backends, spec, clips_per_video, rounds)
