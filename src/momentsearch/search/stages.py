"""The roles a model family fills in search: retrieve -> (rerank) -> localize.

* ``Retriever.score_videos(tokens, token_mask) -> (B, V)``: a score for every video of the index
  (exact). The engine asks a first stage (:mod:`momentsearch.search.first_stage`) for each query's
  top videos, ``retrieve(tokens, mask, k) -> (scores (B, k), videos (B, k))``: exhaustively through
  ``score_videos``, or through a vector index when the retriever exposes its vectors;
* ``Reranker.rerank(tokens, token_mask, videos (B, K), scores (B, K)) -> (B, K)``: optional, e.g.
  a cross-encoder that reads each (query, video) pair;
* ``Localizer.localize(tokens, token_mask, videos (B, K), video_scores (B, K) | None) -> (B, K, T, T)``:
  moment scores for every (start clip, end clip) of each candidate video, padded to the longest,
  <= 0 where a span is not allowed. With ``video_scores`` the scores are comparable across videos
  (the final VCMR score); with None they need only rank moments within one video (SVMR).

A localizer may also offer ``propose(tokens, mask, videos, video_scores, n) -> (start, end, score)`` (each
candidate's top ``n`` spans at its own length, in clips: the engine uses it for videos longer than its dense
limit), or ``spans(tokens, mask, videos, video_scores, n) -> Spans``: each candidate's top ``n`` moments in
seconds, on no grid (a spoken moment follows its cues' boundaries); a localizer with ``spans`` is asked for
nothing else,
and ``score_bound(video_scores (B, K)) -> (B, K)``, an upper bound of any moment's score in each candidate
(:mod:`~momentsearch.search.bounded`: a served search then localizes only the videos that can reach its top k).

**Capabilities are declared, not guessed.** A localizer and a retriever each state what they provide as a
class attribute ``provides`` (a frozenset of :data:`LOCALIZER_CAPABILITIES` / :data:`RETRIEVER_CAPABILITIES`
names); :class:`SearchStages` checks at construction that each declared one has its method and nothing
undeclared is there, and the engine, the first stages and the index ask ``stages.can(name)`` (or
:func:`provides`) instead of probing for attributes.

``video_ranking`` says where the video ranking (VR) comes from: ``retrieval`` — the last stage that
scored videos (the reranker when there is one) — or ``moment`` — each video's best moment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch

LOCALIZER_CAPABILITIES = {"dense": "localize", "propose": "propose", "spans": "spans", "score_bound": "score_bound"}
RETRIEVER_CAPABILITIES = {"vectors": "query_vectors"}  # query_vectors, stream_rows, exact_scores: a vector index


def provides(stage: object) -> frozenset[str]:
    """What a stage declares it provides (its class's ``provides``)."""
    declared = getattr(type(stage), "provides", None)
    if not isinstance(declared, frozenset):
        raise TypeError(f"{type(stage).__name__} must declare what it provides: provides = frozenset({{...}}) "
                        f"of {sorted({**LOCALIZER_CAPABILITIES, **RETRIEVER_CAPABILITIES})}")
    return declared


def _checked(stage: object, table: dict[str, str], role: str) -> frozenset[str]:
    declared = provides(stage)
    for name, method in table.items():
        has = callable(getattr(stage, method, None))
        if (name in declared) != has:
            raise TypeError(f"{role} {type(stage).__name__}: {'declares' if has is False else 'has'} {name!r} "
                            f"({method}) but {'has no such method' if has is False else 'does not declare it'}")
    unknown = declared - set(LOCALIZER_CAPABILITIES) - set(RETRIEVER_CAPABILITIES)  # (one object may fill both roles)
    if unknown:
        raise TypeError(f"{role} {type(stage).__name__} declares unknown capabilities {sorted(unknown)}; "
                        f"a {role} may provide {sorted(table)}")
    return declared


class Retriever(Protocol):
    provides: frozenset[str]

    def score_videos(self, tokens: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor: ...


class Reranker(Protocol):
    def rerank(self, tokens: torch.Tensor, token_mask: torch.Tensor, videos: np.ndarray,
               scores: torch.Tensor) -> torch.Tensor: ...


class Localizer(Protocol):
    provides: frozenset[str]

    def localize(self, tokens: torch.Tensor, token_mask: torch.Tensor, videos: np.ndarray,
                 video_scores: torch.Tensor | None) -> torch.Tensor: ...


@dataclass
class Spans:
    """Moments of each (query, candidate video) in seconds, best first: (B, K, n) each; score <= 0: no moment."""

    start: np.ndarray  # float64 seconds
    end: np.ndarray  # float64 seconds
    score: np.ndarray  # float32

    def __post_init__(self) -> None:
        if not (self.start.shape == self.end.shape == self.score.shape and self.score.ndim == 3):
            raise ValueError(f"Spans: start, end and score must share one (B, K, n) shape, got {self.start.shape}, "
                             f"{self.end.shape}, {self.score.shape}")


@dataclass
class SearchStages:
    retriever: Retriever
    localizer: Localizer
    reranker: Reranker | None = None
    video_ranking: str = "retrieval"  # retrieval | moment
    # the model's query network, run once per search batch: every stage then reads its output (B, S, d) as its
    # tokens (with an all-true mask) instead of encoding the queries again
    encode: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None

    def __post_init__(self) -> None:
        if self.video_ranking not in ("retrieval", "moment"):
            raise ValueError(f"video_ranking must be 'retrieval' or 'moment', got {self.video_ranking!r}")
        loc = _checked(self.localizer, LOCALIZER_CAPABILITIES, "localizer")
        if not loc & {"dense", "propose", "spans"}:
            raise TypeError(f"localizer {type(self.localizer).__name__} provides no moments: declare dense, propose "
                            "or spans")
        self.capabilities = loc | _checked(self.retriever, RETRIEVER_CAPABILITIES, "retriever")

    def can(self, capability: str) -> bool:
        return capability in self.capabilities

    def encoded(self, tokens: torch.Tensor, token_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """What the stages read: the token features, or the queries ``encode`` made of them (once)."""
        if self.encode is None:
            return tokens, token_mask
        with torch.no_grad():
            q = self.encode(tokens, token_mask)
        return q, torch.ones(q.shape[:2], dtype=torch.bool, device=q.device)
