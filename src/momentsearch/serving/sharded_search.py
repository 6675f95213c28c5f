"""The head of a sharded index: :class:`ShardedSearcher`, the :class:`~momentsearch.serving.searcher.Searcher`
interface (``plan``, ``run``, ``search``, ``search_many``) over shards searched in two rounds
(:mod:`~momentsearch.serving.sharded`), in this process or on Ray (:mod:`~momentsearch.serving.ray_shards`).

    searcher = momentsearch.load("my_shards")                         # each shard in this process
    searcher = momentsearch.load("my_shards", ray="auto", replicas=2)  # each shard in 2 actors on a Ray cluster
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from momentsearch.data.batching import pad_tokens
from momentsearch.data.corpus_folder import CorpusFolder
from momentsearch.errors import QueryError, ShardError
from momentsearch.search.ranked import Hit
from momentsearch.serving.checkpoint import Checkpoint, load_checkpoint
from momentsearch.serving.filters import VideoFilter
from momentsearch.serving.plan import SearchPlan
from momentsearch.serving.query import MomentRef, PictureEncoder
from momentsearch.serving.searcher import PlannedSearch
from momentsearch.serving.sharded import (
    LocalShard,
    ShardCandidates,
    ShardDescription,
    ShardMoments,
    ShardScope,
    ShardWorker,
    merge_candidates,
    merge_moments,
    requests_of,
)
from momentsearch.serving.shards import ShardManifest, check_sharded
from momentsearch.timing import PartClock, part


@dataclass(frozen=True)
class ShardedStage:
    spec: str  # what the service prints: "N shards x <each shard's first stage>"


def _gathered(pending: Sequence[Any], kind: type) -> list[Any]:
    """Every call's answer (None stays None), each checked to be ``kind``: all of them, or the first error."""
    out = [None if p is None else p.result() for p in pending]
    for x in out:
        if x is not None and not isinstance(x, kind):
            raise ShardError(f"a shard answered {type(x).__name__} where {kind.__name__} was expected")
    return out


class ShardedSearcher(PlannedSearch):
    """Text in, ranked moments out, over a sharded index: the answers of one process over all its videos."""

    def __init__(self, root: Path, manifest: ShardManifest, shards: list[Any], ckpt: Checkpoint,
                 descriptions: list[ShardDescription], corpus: CorpusFolder | None, k_videos: int, cache_size: int = 4096):
        self.root, self.manifest, self.shards = root, manifest, shards
        self.folder = root
        self.checkpoint, self.family, self.corpus = ckpt, ckpt.family, corpus
        self.queries = ckpt.family.query_features(ckpt.model, cache_size)
        self.descriptions = descriptions
        self.n_videos = sum(d.n_videos for d in descriptions)
        self.n_clips = sum(d.n_clips for d in descriptions)
        self.k_videos = min(k_videos, self.n_videos)
        specs = sorted({d.first_stage for d in descriptions})
        self.first_stage = ShardedStage(f"{len(shards)} shards x {'/'.join(specs)}")
        self.stale = None  # each shard says its own staleness when it loads
        self.pictures = PictureEncoder(None if corpus is None else corpus.encoder,
                                       None if corpus is None else corpus.manifest.encoder_weights, str(root))
        self._ids: list[str] | None = None

    @property
    def video_ids(self) -> list[str]:
        """Every shard's video ids, in shard order (asked of the shards once)."""
        if self._ids is None:
            self._ids = [v for part_ in _gathered([s.ask("video_ids") for s in self.shards], list) for v in part_]
        return self._ids

    def close(self) -> None:
        for s in self.shards:
            s.close()

    def plan(self, k: int = 10, offset: int = 0, min_score: float | None = None, videos: Sequence[str] | None = None,
             where: VideoFilter | None = None, time_from: float | None = None, time_to: float | None = None,
             per_video: int | None = None, paged: bool = False) -> SearchPlan:
        """As :meth:`Searcher.plan`; a filter is resolved by each shard on its own videos, and an id that no shard
        holds is a :class:`QueryError` naming it."""
        plan = SearchPlan.of(k, offset, min_score, time_from, time_to, per_video, paged=paged)
        if videos is None and (where is None or where.is_empty):
            return plan
        if videos is not None and (isinstance(videos, str) or not videos):
            raise QueryError("videos must be a non-empty list of video ids")
        asked = None if videos is None else tuple(videos)
        scopes = _gathered([s.ask("scope", asked, where) for s in self.shards], ShardScope)
        missing = set.intersection(*(set(s.missing) for s in scopes))
        if missing:
            named = [v for v in (*(asked or ()), *((where.videos or ()) if where else ())) if v in missing]
            raise QueryError(f"{len(missing)} video id(s) not in this index: {', '.join(map(repr, named[:5]))}")
        return replace(plan, shard_pools=tuple(s.rows for s in scopes))

    def moment_vectors_of(self, ref: MomentRef) -> Any:
        """Asked of the shard that holds the moment's video."""
        got = [x for x in _gathered([s.ask("moment_vectors", ref) for s in self.shards], object) if x is not None]
        if not got:
            raise QueryError(f"like=: no video {ref.video_id[:200]!r} in this index")
        return got[0]

    def _scope(self, plan: SearchPlan) -> tuple[tuple[int, ...] | None, ...] | None:
        return plan.shard_pools  # (a sharded plan has no pool of rows of its own)

    def _ranked(self, texts: list[str], n: int, pools: tuple[tuple[int, ...] | None, ...] | None,
                clock: PartClock | None) -> list[list[Hit]]:
        with part(clock, "encode"):
            tokens, mask = pad_tokens(self.token_features(texts), self.family.max_tokens)
        pools = pools or (None,) * len(self.shards)
        with part(clock, "first_stage"):
            got = _gathered([None if pool == () else s.ask("candidates", tokens, mask, pool, self.k_videos)
                             for s, pool in zip(self.shards, pools, strict=True)], ShardCandidates)
            top = merge_candidates(got, self.k_videos)
        reqs = requests_of(top, len(self.shards))
        with part(clock, "localize"):
            answers = _gathered([None if r is None else s.ask("moments", tokens, mask, r[0], r[1], n)
                                 for s, r in zip(self.shards, reqs, strict=True)], ShardMoments)
        with part(clock, "rank"):
            return merge_moments([None if a is None else (a, r[2]) for a, r in zip(answers, reqs, strict=True)], n,
                                 len(texts))


def load_sharded(path: str | Path, device: str = "auto", ray: str | None = None, replicas: int = 1,
                 first_stage: str | None = None, first_stage_params: dict[str, str] | None = None,
                 k_videos: int | None = None, cache_size: int = 4096, threads: int = 1) -> ShardedSearcher:
    """A :class:`ShardedSearcher` over the sharded index at ``path``: its shards in this process (``ray`` None), or
    ``replicas`` Ray actors each on the cluster at ``ray`` (``local``, ``auto``, ``HOST:PORT``). Every shard is
    checked by name before it loads (:func:`~momentsearch.serving.shards.check_sharded`), and what each loaded
    says of itself against the manifest."""
    from momentsearch.device import resolve_device
    from momentsearch.serving.indexing import find_corpus

    root = Path(path)
    manifest, infos = check_sharded(root)
    folders = [(e.path, manifest.folder_of(root, e)) for e in manifest.shards]
    ckpt = load_checkpoint(folders[0][1] / "model.pt")
    if ckpt.fingerprint != manifest.model_fingerprint:
        raise ShardError(f"shard {folders[0][0]!r} of {root}: model.pt is not the model the shards were built with")
    dev = str(resolve_device(device))
    if ray is None:
        shards: list[Any] = [LocalShard(name, ShardWorker(f, dev, first_stage, first_stage_params)) for name, f in folders]
    else:
        from momentsearch.serving.ray_shards import ray_shards

        shards = ray_shards(folders, ray, replicas, dev, first_stage, first_stage_params, threads)
    try:
        descriptions = _gathered([s.ask("describe") for s in shards], ShardDescription)
        for e, d in zip(manifest.shards, descriptions, strict=True):
            if (d.family, d.model_fingerprint, d.n_videos, d.n_clips) != (
                    manifest.family, manifest.model_fingerprint, e.n_videos, e.n_clips):
                raise ShardError(f"shard {e.path!r} of {root} loaded {d.n_videos} videos of {d.family} "
                                 f"{d.model_fingerprint[:12]}, the manifest says {e.n_videos} of {manifest.family} "
                                 f"{manifest.model_fingerprint[:12]}")
    except BaseException:
        for s in shards:
            s.close()
        raise
    settings = infos[0].search or ckpt.search_settings()
    return ShardedSearcher(root, manifest, shards, ckpt, descriptions, find_corpus(folders[0][1], infos[0]),
                           k_videos or settings.k_videos, cache_size)
