"""The roles a model family fills in search: retrieve -> (rerank) -> localize, and the two values that flow
between them: :class:`Queries` in, :class:`Proposals` out.

* :class:`Queries`: a batch of B queries as every stage reads them. The engine makes it once per batch
  (:meth:`SearchStages.queries`): the query encoder's token features, passed through the model's own query
  network when the family has one (``SearchStages.query_network``), so no stage encodes a query again.
* ``Retriever.score_videos(queries) -> (B, V)``: a score for every video of the index (exact). The engine asks
  a first stage (:mod:`momentsearch.search.first_stage`) for each query's top videos: exhaustively through
  ``score_videos``, or through a vector index when the retriever provides ``vectors`` (``query_vectors``,
  ``stream_rows``, ``exact_scores``);
* ``Reranker.rerank(queries, videos (B, K), scores (B, K)) -> (B, K)``: optional, e.g. a cross-encoder;
* a localizer gives each candidate video's moments as :class:`Proposals` (start and end in seconds, score,
  valid), one of three ways it declares:

  - ``dense``: ``localize(queries, videos, video_scores | None) -> DenseGrid``: a score for every (start clip,
    end clip) of each candidate, padded to the longest, with the cells that are moments marked ``valid``; the
    engine turns it into proposals with :func:`grid_proposals` (the one conversion);
  - ``propose``: ``propose(queries, videos, video_scores | None, n) -> Proposals``: each candidate's top ``n`` at
    its own length (the engine uses it for videos longer than its dense limit, or a localizer with no grid);
  - ``spans``: ``spans(queries, videos, video_scores | None, n) -> Proposals``: moments in seconds on no grid
    (a spoken moment follows its cues' boundaries); a localizer with ``spans`` is asked for nothing else;

  and optionally ``score_bound(video_scores (B, K)) -> (B, K)``, an upper bound of any moment's score in each
  candidate (:mod:`~momentsearch.search.bounded`: a served search then localizes only the videos that can reach
  its top k). With ``video_scores`` the scores are comparable across videos (VCMR); with None they need only
  rank moments within one video (SVMR).

**Capabilities are declared, not guessed.** A localizer and a retriever each state what they provide as a
class attribute ``provides`` (a frozenset of :data:`LOCALIZER_CAPABILITIES` / :data:`RETRIEVER_CAPABILITIES`
names); :class:`SearchStages` checks at construction that each declared one has its method and nothing
undeclared is there, and the engine, the first stages and the index ask ``stages.can(name)`` (or
:func:`provides`).

``video_ranking`` says where the video ranking (VR) comes from: ``retrieval`` — the last stage that
scored videos (the reranker when there is one) — or ``moment`` — each video's best moment.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch

if TYPE_CHECKING:
    from momentsearch.search.index import VideoIndex

LOCALIZER_CAPABILITIES = {"dense": "localize", "propose": "propose", "spans": "spans", "score_bound": "score_bound"}
RETRIEVER_CAPABILITIES = {"vectors": "query_vectors"}  # query_vectors, stream_rows, exact_scores: a vector index
QueryNetwork = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # tokens (B, L, D), mask (B, L) -> (B, S, d)


@dataclass(frozen=True)
class Queries:
    """B queries as every stage reads them: ``tokens`` (B, L, D) and ``mask`` (B, L) bool (True: a real token).
    After a family's query network, ``tokens`` are its query vectors (B, S, d) and ``mask`` is all true."""

    tokens: torch.Tensor
    mask: torch.Tensor

    def __post_init__(self) -> None:
        if self.tokens.ndim < 2 or tuple(self.mask.shape) != tuple(self.tokens.shape[:2]) or self.mask.dtype != torch.bool:
            raise ValueError(f"Queries: tokens (B, L, ...) and a bool mask (B, L), got {tuple(self.tokens.shape)} and "
                             f"{tuple(self.mask.shape)} {self.mask.dtype}")

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def rows(self, rows: np.ndarray | slice) -> Queries:
        """These queries only (the engine's bounded search localizes some queries of a batch)."""
        return Queries(self.tokens[rows], self.mask[rows])

    def to(self, device: torch.device) -> Queries:
        return Queries(self.tokens.to(device), self.mask.to(device))


@dataclass
class Proposals:
    """Each (query, candidate video)'s moments, best first: (B, K, n) each. ``start``/``end`` in seconds (float64),
    ``score`` the localizer's (higher is better; comparable across videos when localized with video scores), and
    ``valid`` False where there is no moment (a video with fewer than n, a skipped video)."""

    start: np.ndarray
    end: np.ndarray
    score: np.ndarray
    valid: np.ndarray

    def __post_init__(self) -> None:
        if not (self.start.shape == self.end.shape == self.score.shape == self.valid.shape and self.score.ndim == 3):
            raise ValueError(f"Proposals: start, end, score and valid must share one (B, K, n) shape, got "
                             f"{self.start.shape}, {self.end.shape}, {self.score.shape}, {self.valid.shape}")
        if self.valid.dtype != np.bool_:
            raise ValueError(f"Proposals: valid must be bool, got {self.valid.dtype}")

    @classmethod
    def empty(cls, b: int, k: int, n: int, score_dtype: np.dtype | type = np.float32) -> Proposals:
        return cls(np.zeros((b, k, n)), np.zeros((b, k, n)), np.zeros((b, k, n), score_dtype), np.zeros((b, k, n), bool))


@dataclass
class DenseGrid:
    """A dense localizer's output: ``score`` (B, K, T, T) for every (start clip, end clip) of each candidate
    (padded to the longest) and ``valid`` (B, K, T, T), the cells that are moments (inside the length band, on
    the video's own clips). ``masked``: the cells that are not valid already hold -inf, so the conversion need not
    set them (a localizer that computes its grid that way saves a pass over it)."""

    score: torch.Tensor
    valid: torch.Tensor
    masked: bool = False  # True: the localizer already set every cell that is not valid to -inf (none to mask)

    def __post_init__(self) -> None:
        if self.score.ndim != 4 or self.score.shape != self.valid.shape or self.valid.dtype != torch.bool:
            raise ValueError(f"DenseGrid: score (B, K, T, T) and a bool valid of that shape, got "
                             f"{tuple(self.score.shape)} and {tuple(self.valid.shape)} {self.valid.dtype}")


def declared(stage: object, name: str, default: object = None) -> object:
    """A declaration of a stage's class (``provides``, ``not_vector_servable``), read from the class, not probed on
    the object."""
    return inspect.getattr_static(type(stage), name, default)


def provides(stage: object) -> frozenset[str]:
    """What a stage declares it provides (its class's ``provides``)."""
    declared_ = declared(stage, "provides")
    if not isinstance(declared_, frozenset):
        raise TypeError(f"{type(stage).__name__} must declare what it provides: provides = frozenset({{...}}) "
                        f"of {sorted({**LOCALIZER_CAPABILITIES, **RETRIEVER_CAPABILITIES})}")
    return declared_


def _checked(stage: object, table: dict[str, str], role: str) -> frozenset[str]:
    """The declaration held against the class's methods (read statically, not probed on the object)."""
    declared_ = provides(stage)
    for name, method in table.items():
        has = callable(declared(stage, method))
        if (name in declared_) != has:
            raise TypeError(f"{role} {type(stage).__name__}: {'declares' if has is False else 'has'} {name!r} "
                            f"({method}) but {'has no such method' if has is False else 'does not declare it'}")
    unknown = declared_ - set(LOCALIZER_CAPABILITIES) - set(RETRIEVER_CAPABILITIES)  # (one object may fill both roles)
    if unknown:
        raise TypeError(f"{role} {type(stage).__name__} declares unknown capabilities {sorted(unknown)}; "
                        f"a {role} may provide {sorted(table)}")
    return declared_


class Retriever(Protocol):
    provides: frozenset[str]

    def score_videos(self, queries: Queries) -> torch.Tensor: ...


class VectorSource(Protocol):
    """What a retriever that provides ``vectors`` exposes to be served by them (``ClipMaxRetriever`` does)."""

    index: VideoIndex
    array: str
    n_streams: int
    cosine: bool  # unit rows (a cosine retriever's) or raw (an inner product's)
    device: torch.device

    def query_vectors(self, queries: Queries) -> np.ndarray: ...
    def stream_rows(self, stream: int, rows: np.ndarray | None = None) -> np.ndarray: ...
    def exact_scores(self, q: np.ndarray, videos: np.ndarray) -> np.ndarray: ...


class Reranker(Protocol):
    def rerank(self, queries: Queries, videos: np.ndarray, scores: torch.Tensor) -> torch.Tensor: ...


class Localizer(Protocol):
    provides: frozenset[str]


@dataclass
class SearchStages:
    retriever: Retriever
    localizer: Localizer
    reranker: Reranker | None = None
    video_ranking: str = "retrieval"  # retrieval | moment
    # the model's query network, run once per search batch by :meth:`queries`: every stage then reads its output
    # (B, S, d) as the queries' tokens (with an all-true mask) instead of encoding the queries again
    query_network: QueryNetwork | None = None

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

    def queries(self, tokens: torch.Tensor, token_mask: torch.Tensor) -> Queries:
        """What the stages read, made once per batch: the token features, or the queries ``query_network`` makes
        of them."""
        if self.query_network is None:
            return Queries(tokens, token_mask)
        with torch.no_grad():
            q = self.query_network(tokens, token_mask)
        return Queries(q, torch.ones(q.shape[:2], dtype=torch.bool, device=q.device))
