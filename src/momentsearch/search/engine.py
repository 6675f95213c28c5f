"""The search engine: a family's stages over an index, from query token features to ranked moments.

Per batch of queries: the first stage finds each query's top ``k_videos`` videos (exact: the
retriever scores every video, or only each query's candidate pool, the MVMR protocol; or through a
vector index, :mod:`momentsearch.search.first_stage`), they go to the optional reranker and then to the localizer, whose
moments come as :class:`~momentsearch.search.stages.Proposals` (seconds, score, valid; a dense grid is converted
by :func:`~momentsearch.search.proposals.grid_proposals`), lose their near-duplicates to temporal NMS, and come
back as :class:`RankedMoments` (VCMR) beside the video ranking (VR). ``localize_in`` ranks moments inside given
videos (SVMR). The engine knows no model: a family fills the roles of :mod:`momentsearch.search.stages`, and the
queries reach every stage as one :class:`~momentsearch.search.stages.Queries`, made once per batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from momentsearch.errors import QueryError
from momentsearch.search.bounded import as_bound, bounded_moments
from momentsearch.search.first_stage.retrieve import ExactFirstStage, FirstStage
from momentsearch.search.index import VideoIndex
from momentsearch.search.nms import temporal_nms_grid
from momentsearch.search.proposals import clip_proposals, grid_proposals
from momentsearch.search.ranked import RankedMoments
from momentsearch.search.stages import Proposals, Queries, SearchStages
from momentsearch.timing import PartClock, part

Ranked = list[tuple[int, float, float, float]]


class SearchResult:
    """A batch's ranked moments (``vcmr``) and, built when first asked for, its ranked videos (``vr``)."""

    def __init__(self, vcmr: RankedMoments, vr: Callable[[], RankedMoments]):
        self.vcmr = vcmr
        self._vr, self._vr_made = vr, None

    @property
    def vr(self) -> RankedMoments:
        if self._vr_made is None:
            self._vr_made = self._vr()
        return self._vr_made


def _non_increasing(bound: np.ndarray) -> bool:
    return bool((bound == np.minimum.accumulate(bound, axis=1)).all())


def _nms_taken(start: np.ndarray, end: np.ndarray, best: np.ndarray, ok: np.ndarray, threshold: float, n: int
               ) -> tuple[np.ndarray, np.ndarray]:
    """``temporal_nms_grid`` over the candidate videos that hold a candidate taking part (a bounded search
    leaves most out), its flat indices mapped back to the full (K x c) layout."""
    k, c = best.shape[1], best.shape[2]
    cols = np.flatnonzero(ok.any(axis=(0, 2)))
    if len(cols) == k or len(cols) == 0:
        return temporal_nms_grid(start, end, best, ok, threshold, n)
    keep, kept = temporal_nms_grid(start[:, cols], end[:, cols], best[:, cols], ok[:, cols], threshold, n)
    return cols[keep // c] * c + keep % c, kept


def _no_video_ranking() -> RankedMoments:
    raise QueryError("this search asked for moments only (moments_only=True): it has no video ranking")


class SearchEngine:
    def __init__(self, stages: SearchStages, index: VideoIndex, k_videos: int = 100, n_moments: int = 100,
                 nms_threshold: float = 0.7, candidates_per_video: int | None = 20, dense_limit: int = 512,
                 first_stage: FirstStage | None = None):
        if k_videos < 1 or n_moments < 1:
            raise QueryError(f"k_videos and n_moments must be >= 1, got {k_videos} and {n_moments}")
        self.stages, self.index = stages, index
        self.k_videos = min(k_videos, len(index))
        self.n_moments = n_moments
        self.nms_threshold = nms_threshold
        self.candidates_per_video = candidates_per_video  # None: every span of the dense map goes to NMS
        self.dense_limit = dense_limit  # clips: longer candidates are localized by proposals, not a T x T grid
        self.first_stage = first_stage or ExactFirstStage(stages.retriever)
        self.stats: dict[str, int] = {}  # bounded localization: candidate videos, and those localized

    @torch.no_grad()
    def search(self, query_ids: Sequence[str], tokens: torch.Tensor, token_mask: torch.Tensor,
               pools: Sequence[Sequence[int]] | None = None, n_moments: int | None = None,
               clock: PartClock | None = None, moments_only: bool = False) -> SearchResult:
        """tokens (B, L, D_q) padded token features of B queries -> ranked moments and videos.
        ``pools``: per query, the indices of the videos it may be answered from (default: all);
        ``n_moments``: moments kept per query (default: the engine's); ``clock``: times the parts
        (first_stage, rerank, localize, nms, rank); ``moments_only``: only the moments are wanted, so a
        localizer with a score bound localizes only the videos that can reach the top ``n_moments``
        (:mod:`~momentsearch.search.bounded`; the same moments) and the result has no video ranking."""
        n = self.n_moments if n_moments is None else n_moments
        if n < 1:
            raise QueryError(f"n_moments must be >= 1, got {n}")
        with part(clock, "encode"):  # the model's query network, once: every stage reads q
            q = self.stages.queries(tokens, token_mask)
        with part(clock, "first_stage"):
            top_vr, videos = self.first_stage.retrieve(q, self.k_videos, pools)  # (B, K) each
        return self.rank(query_ids, q, top_vr, videos, n, clock, moments_only)

    @torch.no_grad()
    def rank(self, query_ids: Sequence[str], q: Queries, top_vr: torch.Tensor, videos: np.ndarray, n: int,
             clock: PartClock | None = None, moments_only: bool = False) -> SearchResult:
        """The search after its first stage: the candidate ``videos`` (B, K) index rows of each query with their
        retrieval scores ``top_vr`` (B, K; -inf pads a short row) -> reranked, localized, NMS, ranked. A sharded
        search (:mod:`~momentsearch.serving.shards`) calls it on each shard with that shard's part of the merged
        top ``k_videos``: moments and NMS are per video, so the shards' moments merge into the one-process ranking."""
        if self.stages.reranker is not None:
            with part(clock, "rerank"):
                top_vr = self.stages.reranker.rerank(q, videos, top_vr).cpu()
        valid = torch.isfinite(top_vr).numpy()  # False: padding beyond a small pool
        bound_of = self.stages.localizer.score_bound if moments_only and self.stages.can("score_bound") else None
        bound = None if bound_of is None else np.where(valid, as_bound(bound_of(top_vr)), -np.inf)
        with part(clock, "localize"):
            if bound is not None and _non_increasing(bound):  # (a reranker may reorder: then every video)
                props = bounded_moments(
                    lambda rows, cols: self._moments(q.rows(rows), videos[rows][:, cols], top_vr[rows][:, cols], n),
                    bound, valid, videos, n, self.nms_threshold, self.stats)
            else:
                props = self._moments(q, videos, top_vr, n)  # (B, K, c) each, seconds
        with part(clock, "nms"):
            b = len(videos)
            vids = np.broadcast_to(videos[:, :, None], props.score.shape)
            ok = props.valid & valid[:, :, None]
            keep, kept = _nms_taken(props.start, props.end, props.score, ok, self.nms_threshold, n)  # (B, n) each
        with part(clock, "rank"):
            lists = []
            for i in range(b):
                j = keep[i][kept[i]]
                lists.append(list(zip(vids[i].ravel()[j], props.start[i].ravel()[j], props.end[i].ravel()[j],
                                      props.score[i].ravel()[j], strict=True)))
            vcmr = RankedMoments.from_lists(list(query_ids), self.index.video_ids, lists)
        if moments_only:
            return SearchResult(vcmr, _no_video_ranking)
        return SearchResult(vcmr, lambda: RankedMoments.from_lists(  # a served search asks for moments only
            list(query_ids), self.index.video_ids, self._video_lists(videos, top_vr.numpy(), valid, props)))

    def _moments(self, q: Queries, videos: np.ndarray, top_vr: torch.Tensor, n_moments: int) -> Proposals:
        """Each candidate's best moments: the localizer's spans, or from the dense grid, or, for a video longer
        than ``dense_limit`` clips (or a localizer with no grid), its proposals."""
        loc = self.stages.localizer
        per_video = self.candidates_per_video or n_moments
        if self.stages.can("spans"):
            return loc.spans(q, videos, top_vr, per_video)
        t_max = int(self.index.n_clips[videos].max())
        if self.stages.can("propose") and (t_max > self.dense_limit or not self.stages.can("dense")):
            # proposals of a long video: "all" is its top n_moments (no more can survive into the ranking unsuppressed)
            return clip_proposals(self.index, videos, loc.propose(q, videos, top_vr, per_video))
        return grid_proposals(self.index, videos, loc.localize(q, videos, top_vr), self.candidates_per_video)

    def _video_lists(self, videos: np.ndarray, video_scores: np.ndarray, valid: np.ndarray,
                     props: Proposals) -> list[Ranked]:
        if self.stages.video_ranking == "moment":  # each video's best moment
            video_scores = np.where(props.valid, props.score, -np.inf).max(-1)  # (B, K)
        out = []
        for i in range(len(videos)):
            order = np.argsort(-video_scores[i], kind="stable") if (
                self.stages.reranker is not None or self.stages.video_ranking == "moment") else np.arange(len(videos[i]))
            order = order[valid[i][order]]
            z = np.zeros(len(order))
            out.append(list(zip(videos[i][order], z, z, video_scores[i][order], strict=True)))
        return out

    @torch.no_grad()
    def localize_in(self, query_ids: Sequence[str], tokens: torch.Tensor, token_mask: torch.Tensor,
                    videos: np.ndarray, n: int = 100) -> RankedMoments:
        """SVMR: the moments of one given video per query (``videos`` (B,) indices), best first."""
        q = self.stages.queries(tokens, token_mask)
        one = videos.reshape(-1, 1)
        if self.stages.can("spans"):
            props = self.stages.localizer.spans(q, one, None, 4 * n)
        else:
            props = grid_proposals(self.index, one, self.stages.localizer.localize(q, one, None), 4 * n)
        keep, kept = temporal_nms_grid(props.start, props.end, props.score, props.valid, self.nms_threshold, n)
        lists = []
        for i in range(len(videos)):
            j = keep[i][kept[i]]
            lists.append([(int(videos[i]), props.start[i, 0, x], props.end[i, 0, x], props.score[i, 0, x]) for x in j])
        return RankedMoments.from_lists(list(query_ids), self.index.video_ids, lists)
