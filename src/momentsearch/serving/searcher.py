"""``load(INDEX_DIR)``: a :class:`Searcher` over an index folder's corpus.

    import momentsearch
    searcher = momentsearch.load("my_index")
    for hit in searcher.search("a person opens the fridge", k=5):
        print(hit.video_id, hit.start, hit.end, hit.score)

Queries are encoded in memory (an LRU cache), so nothing is written per query and several threads may search at
once. Every search goes through :meth:`Searcher.plan` (the request checked once) and :meth:`Searcher.run`.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from momentsearch.data.batching import pad_tokens
from momentsearch.data.corpus_folder import CorpusFolder
from momentsearch.device import resolve_device
from momentsearch.errors import QueryError, SearchIndexError
from momentsearch.search.engine import SearchEngine
from momentsearch.search.first_stage import build_first_stage
from momentsearch.search.first_stage.retrieve import ExactFirstStage
from momentsearch.search.index import VideoIndex, exceeds_memory
from momentsearch.search.ranked import Hit
from momentsearch.serving.checkpoint import Checkpoint
from momentsearch.serving.filters import VideoFilter, VideoTable
from momentsearch.serving.freshness import Staleness
from momentsearch.serving.plan import SearchPlan
from momentsearch.serving.query import MomentRef, PictureEncoder, Query, as_query
from momentsearch.text.queries import TextQueries
from momentsearch.timing import PartClock, part


class PlannedSearch:
    """``search`` and ``search_many`` over a searcher's :meth:`plan` and :meth:`run` (:class:`Searcher`, and a
    sharded index's :class:`~momentsearch.serving.sharded_search.ShardedSearcher`). A query is a string or a
    :class:`~momentsearch.serving.query.Query` (words, a picture, a found moment)."""

    family: Any
    queries: TextQueries
    pictures: PictureEncoder

    def moment_vectors_of(self, ref: MomentRef) -> Any:
        """The family's :meth:`moment_vectors` of a found moment (a :class:`QueryError` for an unknown id)."""
        raise NotImplementedError

    def token_features(self, items: Sequence[str | Query]) -> list[np.ndarray]:
        """Each query's token features: the query encoder's for words, the family's
        :meth:`~momentsearch.models.family.ModelFamily.example_query` for a picture or a moment."""
        qs = [as_query(x) for x in items]
        if all(q.words_only for q in qs):
            return self.queries.encode_many([q.text for q in qs])  # type: ignore[misc]
        texts = list(dict.fromkeys(q.text for q in qs if q.text))
        said = dict(zip(texts, self.queries.encode_many(texts) if texts else [], strict=True))
        out = []
        for q in qs:
            if q.words_only:
                out.append(said[q.text])
                continue
            images = None if q.image is None else self.pictures.encode([q.image])
            moment = None if q.like is None else self.moment_vectors_of(q.like)
            out.append(np.asarray(self.family.example_query(said.get(q.text), images, moment), np.float32))
        return out

    def plan(self, k: int = 10, offset: int = 0, min_score: float | None = None, videos: Sequence[str] | None = None,
             where: VideoFilter | None = None, time_from: float | None = None, time_to: float | None = None,
             per_video: int | None = None, paged: bool = False) -> SearchPlan:
        raise NotImplementedError

    def run(self, texts: Sequence[str | Query], plans: Sequence[SearchPlan], clock: PartClock | None = None,
            batch_size: int = 64) -> list[tuple[list[Hit], int | None]]:
        """Each text searched under its own plan, as pages (:meth:`SearchPlan.page`): the texts that share a pool
        (:meth:`_scope`) are searched together, ``batch_size`` at a time, each batch ranking its plans' largest
        ``fetch`` (:meth:`_ranked`)."""
        if len(texts) != len(plans):
            raise QueryError(f"{len(texts)} texts but {len(plans)} plans: one plan per text")
        groups: dict[Any, list[int]] = {}
        for i, p in enumerate(plans):
            groups.setdefault(self._scope(p), []).append(i)
        out: list[tuple[list[Hit], int | None]] = [([], None)] * len(texts)
        for scope, members in groups.items():
            if plans[members[0]].answers_nothing:
                continue  # no video passes the filter: no moments
            for s in range(0, len(members), batch_size):
                chunk = members[s: s + batch_size]
                hits = self._ranked([texts[i] for i in chunk], max(plans[i].fetch for i in chunk), scope, clock)
                for i, h in zip(chunk, hits, strict=True):
                    out[i] = plans[i].page(h)
        return out

    def _scope(self, plan: SearchPlan) -> Any:
        """What a plan's queries must share to be searched in one call: its pool of index rows."""
        return plan.pool

    def _ranked(self, texts: list[str | Query], n: int, scope: Any, clock: PartClock | None) -> list[list[Hit]]:
        """The ``n`` best moments of each query, all under one :meth:`_scope`."""
        raise NotImplementedError

    def search(self, text: str | Query | None = None, k: int = 10, videos: Sequence[str] | None = None,
               where: VideoFilter | None = None, time_from: float | None = None, time_to: float | None = None,
               per_video: int | None = None, image: Any = None, like: Any = None) -> list[Hit]:
        """Ranked moments for words (``text``), a picture (``image``: a path, bytes or an RGB array), a found
        moment (``like``: (video_id, start, end)), or words with either (:class:`~momentsearch.serving.query.Query`)."""
        if image is not None or like is not None:
            if isinstance(text, Query):
                raise QueryError("give a Query, or text with image= / like=, not both")
            text = Query(text, image=image, like=like)
        if text is None:
            raise QueryError("search needs words, image= or like=")
        return self.search_many([text], k, videos=videos, where=where, time_from=time_from, time_to=time_to,
                                per_video=per_video)[0]

    def search_many(self, texts: Sequence[str | Query], k: int = 10, batch_size: int = 64,
                    videos: Sequence[str] | None = None, where: VideoFilter | None = None,
                    clock: PartClock | None = None, time_from: float | None = None, time_to: float | None = None,
                    per_video: int | None = None) -> list[list[Hit]]:
        """Ranked moments for each text, best first (at most ``k`` each, after temporal NMS); ``videos``:
        search only these video ids; ``where``: only the videos a :class:`VideoFilter` passes (no video passes:
        no moments); ``clock``: times the parts (encode, first_stage, localize, nms, rank). ``time_from`` /
        ``time_to``: only moments overlapping that range of seconds of their video; ``per_video``: grouped by
        video, each video's best ``per_video`` moments together (:func:`~momentsearch.serving.filters.arrange`)."""
        if isinstance(texts, str):
            raise QueryError("search_many takes a list of texts; use search() for one")
        plan = self.plan(k, videos=videos, where=where, time_from=time_from, time_to=time_to, per_video=per_video)
        return [hits for hits, _ in self.run(list(texts), [plan] * len(texts), clock, batch_size)]


class Searcher(PlannedSearch):
    """Text in, ranked moments out, over an index's videos (an index folder's, or a dataset split's)."""

    def __init__(self, ckpt: Checkpoint, index: VideoIndex, queries: TextQueries, device: torch.device,
                 k_videos: int = 100, nms_threshold: float = 0.7, corpus: CorpusFolder | None = None,
                 first_stage: str = "exact", first_stage_params: dict[str, str] | None = None,
                 first_stage_dir: Path | None = None, progress: bool = False):
        self.checkpoint, self.corpus, self.index, self.queries = ckpt, corpus, index, queries
        self.family, self.model = ckpt.family, ckpt.model.to(device).eval()
        self.device = device
        stages = self.family.stages(self.model, index, device)
        self.first_stage = build_first_stage(stages.retriever, index, first_stage, first_stage_dir, first_stage_params,
                                             family=self.family.name, progress=progress)
        self.engine = SearchEngine(stages, index, k_videos=k_videos, nms_threshold=nms_threshold,
                                   first_stage=self.first_stage)
        if not isinstance(self.first_stage, ExactFirstStage) and exceeds_memory(index.nbytes):
            index.advise_random()  # from here on rows that do not fit are read at random, page by page
        self._row = {v: i for i, v in enumerate(index.video_ids)}
        self._lock = threading.Lock()  # the stages' lazily built caches are filled once
        self._table: VideoTable | None = None
        self.stale: Staleness | None = None  # an index folder's Staleness (serving.freshness) when its corpus changed since
        self.folder: Path | None = None  # the index folder it was loaded from (saved searches live beside it)
        self.pictures = PictureEncoder(None if corpus is None else corpus.encoder,
                                       None if corpus is None else corpus.manifest.encoder_weights, "this index")

    @property
    def video_ids(self) -> list[str]:
        return self.index.video_ids

    @property
    def n_clips(self) -> int:
        return int(self.index.offsets[-1])

    @property
    def row_of(self) -> dict[str, int]:
        """Video id -> its index row."""
        return self._row

    def video_scores(self, texts: Sequence[str], batch_size: int = 64) -> np.ndarray:
        """(len(texts), V) the retriever's score of every video, in :attr:`video_ids` order."""
        out = []
        for s in range(0, len(texts), batch_size):
            tokens, mask = pad_tokens(self.queries.encode_many(list(texts[s: s + batch_size])), self.family.max_tokens)
            with self._lock, torch.no_grad():
                q = self.engine.stages.queries(tokens.to(self.device), mask.to(self.device))
                out.append(self.engine.stages.retriever.score_videos(q).float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, len(self.video_ids)), np.float32)

    def pool_of(self, videos: Sequence[str]) -> list[int]:
        """Video ids -> index rows; a :class:`QueryError` naming the ids this index does not hold."""
        if isinstance(videos, str) or not videos:
            raise QueryError("videos must be a non-empty list of video ids")
        bad = [v for v in videos if v not in self._row]
        if bad:
            raise QueryError(f"{len(bad)} video id(s) not in this index: {', '.join(map(repr, bad[:5]))}")
        return sorted({self._row[v] for v in videos})

    @property
    def table(self) -> VideoTable:
        """What filters read of each video (durations from the index; paths and ingest dates from the corpus)."""
        if self._table is None:
            entries = None if self.corpus is None else {v["id"]: v for v in self.corpus.manifest.videos}
            self._table = VideoTable.of_entries(self.video_ids, self.index.durations, entries)
        return self._table

    def rows_of(self, videos: Sequence[str] | None = None, where: VideoFilter | None = None) -> list[int] | None:
        """The index rows a search may answer from (None: every video); ``videos`` and ``where.videos`` both apply."""
        pool = None if videos is None else np.asarray(self.pool_of(videos))
        if where is None or where.is_empty:
            return None if pool is None else pool.tolist()
        if where.videos is not None:
            ids = np.asarray(self.pool_of(where.videos))
            pool = ids if pool is None else np.intersect1d(pool, ids)
        if where == VideoFilter(videos=where.videos):
            return pool.tolist()
        return self.table.rows(where, pool).tolist()

    def plan(self, k: int = 10, offset: int = 0, min_score: float | None = None, videos: Sequence[str] | None = None,
             where: VideoFilter | None = None, time_from: float | None = None, time_to: float | None = None,
             per_video: int | None = None, paged: bool = False) -> SearchPlan:
        """One request checked once (:class:`~momentsearch.serving.plan.SearchPlan`): a :class:`QueryError` a user
        can act on for a bad value, an id this index lacks or a filter the corpus cannot answer. ``paged``: the
        answer says whether a next page exists (one more moment is ranked)."""
        plan = SearchPlan.of(k, offset, min_score, time_from, time_to, per_video, paged=paged)  # the cheap checks first
        pool = self.rows_of(videos, where)
        return plan if pool is None else replace(plan, pool=tuple(pool))

    def moment_vectors_of(self, ref: MomentRef) -> Any:
        if ref.video_id not in self._row:
            raise QueryError(f"like=: no video {ref.video_id[:200]!r} in this index")
        row = self._row[ref.video_id]
        if ref.start >= float(self.index.durations[row]):
            raise QueryError(f"like=: the moment starts at {ref.start:g} s, past the end of {ref.video_id!r} "
                             f"({float(self.index.durations[row]):.2f} s)")
        return self.family.moment_vectors(self.index, row, ref.start, ref.end)

    def _ranked(self, texts: list[str | Query], n: int, scope: tuple[int, ...] | None, clock: PartClock | None
                ) -> list[list[Hit]]:
        """The engine's ``n`` best moments of each query (one encoder batch, one engine call), from the rows
        ``scope`` (None: every video)."""
        with part(clock, "encode"):
            tokens, mask = pad_tokens(self.token_features(texts), self.family.max_tokens)
        with self._lock:  # the stages' lazily built caches are filled once
            res = self.engine.search([f"q{i}" for i in range(len(texts))], tokens, mask,
                                     None if scope is None else [list(scope)] * len(texts), n_moments=n, clock=clock,
                                     moments_only=True).vcmr
        with part(clock, "rank"):
            return [res.hits(i) for i in range(len(texts))]


def load_index(path: str | Path, device: str = "auto", progress: bool = False, k_videos: int | None = None,
               cache_size: int = 4096, first_stage: str | None = None, first_stage_params: dict[str, str] | None = None
               ) -> Searcher:
    """A :class:`Searcher` over an index folder's corpus (``momentsearch index``), searched as its ``index.json``
    says (``k_videos`` overrides it). ``first_stage``: ``exact``, ``auto`` (the default), ``scan``,
    ``faiss:FACTORY`` or ``milvus[:URI]``; its vector indexes are kept in the folder's ``first_stage/``.
    (:func:`momentsearch.serving.loader.load` opens an index folder or a sharded index.)"""
    from momentsearch.serving.freshness import staleness, warn_if_stale
    from momentsearch.serving.indexing import IndexFolder, is_index_folder

    if not is_index_folder(path):
        hint = (" (a checkpoint: momentsearch.load(CHECKPOINT, split) indexes a split of its dataset, or "
                "`momentsearch index CHECKPOINT --corpus DIR --out INDEX` a corpus)") if Path(path).is_file() else ""
        raise SearchIndexError(f"{path}: not an index folder{hint}")
    dev = resolve_device(device)
    folder = IndexFolder.open(path)
    ckpt = folder.checkpoint
    settings = folder.info.search or ckpt.search_settings()  # an index.json from before the settings were stored
    searcher = Searcher(ckpt, folder.index, ckpt.family.query_features(ckpt.model, cache_size), dev,
                        k_videos or settings.k_videos, settings.nms_threshold, corpus=folder.corpus,
                        first_stage=first_stage or "auto", first_stage_params=first_stage_params,
                        first_stage_dir=folder.root / "first_stage", progress=progress)
    searcher.folder = folder.root
    searcher.stale = staleness(folder.root, folder.info, folder.corpus)
    warn_if_stale(searcher.stale)  # a StaleIndexWarning: the corpus changed since the index was built
    return searcher
