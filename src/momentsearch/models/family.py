"""The contract every model family fulfils, so that one trainer, one search engine, one checkpoint
format and one API serve them all.

A family is one folder under ``momentsearch/models/`` that reads like its paper. It subclasses
:class:`ModelFamily` and registers itself by name (``@register``); YAML selects it with
``model: {name: ...}``. It supplies:

* ``config_class``: its typed config (a frozen dataclass with a ``name`` field), filled from YAML;
* ``network_class`` (or :meth:`ModelFamily.build` / :meth:`ModelFamily.restore`): the network(s), as
  one ``nn.Module``, for the data's input dims;
* :meth:`ModelFamily.batches`: a :class:`BatchSource` (a sampler of index lists and a collate);
* :meth:`ModelFamily.loss`: the loss of one batch, with its named terms (the model owns its loss);
* :meth:`ModelFamily.prepare_epoch` (optional): a per-epoch schedule (phases, mined negatives);
* :meth:`ModelFamily.encode_corpus`: a :class:`~momentsearch.search.index.VideoIndex` holding the
  named per-clip (or per-video) arrays of its choosing;
* :meth:`ModelFamily.stages`: its search stages (a retriever, an optional reranker, a localizer).

Shapes: B queries, L tokens, D_q query feature dim.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import torch
from torch import nn

from momentsearch.data.corpus import Corpus, Video
from momentsearch.data.features import FeatureStore

if TYPE_CHECKING:
    from momentsearch.search.index import VideoIndex
    from momentsearch.search.stages import SearchStages
    from momentsearch.text.queries import InMemoryTextFeatures, QueryFeatures


@dataclass(frozen=True)
class InputDims:
    """Feature dims of the data a model is built for. ``subtitle`` is 0 when the store has no subtitle stream."""

    visual: int
    subtitle: int
    query: int


@dataclass
class TrainingData:
    """What a family's batches are made from: one split's annotated moments and their features."""

    corpus: Corpus
    store: FeatureStore
    queries: QueryFeatures
    clip_lengths: Mapping[str, float]  # video id -> seconds per feature clip


@dataclass
class Step:
    """Where training is: the epoch (0-based) and the generator every random draw of a batch uses."""

    epoch: int
    generator: torch.Generator


class BatchSource(Protocol):
    """Training batches in two parts, so that a DataLoader's workers can run the collate."""

    def __len__(self) -> int: ...
    def sampler(self, batch_size: int, generator: torch.Generator) -> Iterator[list[int]]: ...
    def collate(self, idx: Sequence[int]) -> Any: ...
    def reopen(self) -> None: ...  # drop file handles inherited by a worker process


class ModelFamily(ABC):
    """One model family. Instances hold the family's config (with input dims once built)."""

    name: ClassVar[str]
    version: ClassVar[int] = 1  # bump when a checkpoint of the old version cannot be loaded
    config_class: ClassVar[type]
    network_class: ClassVar[Any] = None  # built from the config by the default build / restore
    packable: ClassVar[bool] = False  # True: ``pack`` writes a model without training (the clip family)

    @classmethod
    def stored_config(cls, data: dict[str, Any]) -> dict[str, Any]:
        """A config stored by an earlier momentsearch (a checkpoint's) as this version reads it: an option
        added since, whose default changed what the network is, is set to the value it had then."""
        return data

    def __init__(self, cfg: Any):
        if not isinstance(cfg, self.config_class):
            raise TypeError(f"family {self.name!r} takes a {self.config_class.__name__}, got {type(cfg).__name__}")
        self.cfg = cfg

    # ---- the network -------------------------------------------------------------------------
    def build(self, dims: InputDims) -> nn.Module:
        """The network for these input dims; ``self.cfg`` becomes the config with the dims filled
        (by default ``cfg.with_inputs(visual, subtitle, query)``, then ``network_class(cfg)``)."""
        self.cfg = self.cfg.with_inputs(dims.visual, dims.subtitle, dims.query)
        return self.restore()

    def restore(self) -> nn.Module:
        """The network of ``self.cfg`` (dims already filled, as stored in a checkpoint)."""
        if self.network_class is None:
            raise NotImplementedError(f"family {self.name!r}: set network_class or override restore()")
        return self.network_class(self.cfg)

    @property
    def max_tokens(self) -> int:
        """Query token features are cut to this many tokens."""
        return int(getattr(self.cfg, "max_tokens", 32))

    def query_encoder(self, model: nn.Module | None = None) -> Any:
        """The query encoder this family reads (:mod:`momentsearch.text.query_encoders`): training, evaluation
        and search all take it from here. Default: MiniLM's token states, cut at ``max_tokens``."""
        from momentsearch.text.query_encoders import create_query_encoder

        return create_query_encoder("minilm", max_tokens=self.max_tokens)

    @property
    def text_encoder(self) -> dict[str, Any]:
        """The query encoder's identity (stored in checkpoints and index folders, checked when an index opens)."""
        return dict(self.query_encoder().identity())

    def query_features(self, model: nn.Module, cache_size: int = 4096) -> InMemoryTextFeatures:
        """Free text -> the features ``stages`` read, in memory (``encode_many(texts)``)."""
        from momentsearch.text.queries import InMemoryTextFeatures

        return InMemoryTextFeatures(cache_size, encoder=self.query_encoder(model))

    def check_features(self, model_features: dict[str, Any] | None, corpus_encoder: dict[str, Any],
                       dims: dict[str, int], streams: dict[str, dict[str, Any]] | None = None) -> str | None:
        """Why this model cannot read a corpus (None: it can). ``model_features``: what made the features it
        was trained on; ``corpus_encoder``: the corpus's visual encoder; ``dims``: the corpus's stream dims;
        ``streams``: the corpus's streams as its manifest describes them (each one's encoder)."""
        want = int(getattr(self.cfg, "visual_dim", 0) or 0)
        if want and dims.get("visual") != want:
            return f"it reads {want}-d visual features and the corpus holds {dims.get('visual')}-d ones"
        sub = int(getattr(self.cfg, "subtitle_dim", 0) or 0)
        if sub and dims.get("subtitle") != sub:
            return (f"it reads a {sub}-d subtitle stream and the corpus has "
                    f"{'a ' + str(dims['subtitle']) + '-d one' if 'subtitle' in dims else 'none'}")
        if model_features is not None:
            from momentsearch.video.encoders.base import describe, same_encoder

            if not same_encoder(model_features, corpus_encoder):
                return (f"it was trained on features of {describe(model_features)} and the corpus was made by "
                        f"{describe(corpus_encoder)}")
        return None

    def optimizer(self, model: nn.Module, lr: float) -> torch.optim.Optimizer:
        """Adam; AdamW with the config's ``weight_decay`` when the config has one."""
        wd = getattr(self.cfg, "weight_decay", None)
        if wd is None:
            return torch.optim.Adam(model.parameters(), lr=lr)
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=wd)

    def stamped(self, index: VideoIndex) -> VideoIndex:
        """``index`` marked as built by this family (and version), as ``encode_corpus`` returns it."""
        index.meta.update(family=self.name, family_version=self.version)
        return index

    # ---- training ----------------------------------------------------------------------------
    @abstractmethod
    def batches(self, data: TrainingData) -> BatchSource: ...

    def prepare_epoch(self, model: nn.Module, batches: Any, step: Step, device: torch.device) -> dict[str, float]:
        """Called by the trainer before each epoch's batches are drawn (so also at the first epoch
        after a resume). A family with a schedule sets its batch source up here, e.g. MINUTE's
        switch from retriever to localizer training and its hard negatives mined with the trained
        retriever. Random draws use ``step.generator``. Returns named stats for the epoch's log."""
        return {}

    @abstractmethod
    def loss(self, model: nn.Module, batch: Any, step: Step) -> tuple[torch.Tensor, dict[str, float]]:
        """The scalar loss and its named terms (``loss`` among them) as floats."""

    # ---- search ------------------------------------------------------------------------------
    @abstractmethod
    def encode_corpus(self, model: nn.Module, store: FeatureStore, videos: Sequence[Video],
                      clip_lengths: Mapping[str, float], device: torch.device, progress: bool = True) -> VideoIndex:
        """Encode every video once into an index of named arrays."""

    def index_grid(self, duration: float, clip_length: float, n_clips: int) -> tuple[float, int]:
        """The time grid a video takes in this family's index: (seconds a row, rows), from its corpus entry's
        (``momentsearch index`` writes the arrays part by part into files of that size). By default the corpus's own
        clips; a family that resamples every video to a fixed number of rows (MMN's N) says so here."""
        return clip_length, n_clips

    @abstractmethod
    def stages(self, model: nn.Module, index: VideoIndex, device: torch.device) -> SearchStages:
        """The search stages over ``index``."""

    takes_examples: ClassVar[bool] = False  # asked with a picture or a found moment (example_query)

    def moment_vectors(self, index: VideoIndex, row: int, start: float, end: float) -> Any:
        """What a found moment (index ``row``, ``[start, end)`` s) contributes to a query by example."""
        raise self._words_only()

    def example_query(self, text: Any | None, images: Any | None, moment: Any | None) -> Any:
        """The token features (L, D_q) of a query given by example: ``text`` the query encoder's features of its
        words (or None), ``images`` (n, d) unit image embeddings from the corpus's own visual encoder (or None),
        ``moment`` a found moment's :meth:`moment_vectors` (or None). A family whose query side reads words only
        refuses (:class:`~momentsearch.errors.QueryError`, the service's 4xx)."""
        raise self._words_only()

    def _words_only(self) -> Exception:
        from momentsearch.errors import QueryError

        return QueryError(f"model family {self.name!r} is asked in words only: its query encoder reads text, so a "
                          "picture or a moment cannot be a query (the clip family takes both)")
