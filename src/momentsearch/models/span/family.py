"""CET and BET as model families (``model: {name: cet}`` / ``{name: bet}``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import nn

from momentsearch.data.corpus import Video
from momentsearch.data.features import FeatureStore
from momentsearch.distributed import sharded
from momentsearch.models.family import BatchSource, ModelFamily, Step, TrainingData
from momentsearch.models.registry import register
from momentsearch.models.span.batches import SpanBatch, SpanBatches
from momentsearch.models.span.config import SpanConfig
from momentsearch.models.span.loss import span_bce
from momentsearch.models.span.network import SpanNet
from momentsearch.models.span.search import encode_corpus, span_stages
from momentsearch.search.index import VideoIndex
from momentsearch.search.stages import SearchStages


class _SpanFamily(ModelFamily):
    version = 1
    config_class = SpanConfig
    network_class = SpanNet
    cfg: SpanConfig

    def __init__(self, cfg: SpanConfig):
        super().__init__(cfg)
        if cfg.name != self.name:
            raise TypeError(f"family {self.name!r} got a config for {cfg.name!r}")

    def batches(self, data: TrainingData) -> BatchSource:
        return SpanBatches(data.corpus, data.store, data.queries, data.clip_lengths, self.cfg)

    def loss(self, model: nn.Module, batch: SpanBatch, step: Step) -> tuple[torch.Tensor, dict[str, float]]:
        l_s, l_e = sharded(model.pair_logits, batch.streams, batch.clip_mask, batch.tokens, batch.token_mask)  # type: ignore[arg-type]
        loss = span_bce(l_s, l_e, batch.st, batch.ed, batch.clip_mask, self.cfg.label_power)
        return loss, {"loss": loss.item(), "loss_span_bce": loss.item()}

    def encode_corpus(self, model: nn.Module, store: FeatureStore, videos: Sequence[Video],
                      clip_lengths: Mapping[str, float], device: torch.device, progress: bool = True) -> VideoIndex:
        return self.stamped(encode_corpus(model, store, videos, clip_lengths, device, progress=progress))  # type: ignore[arg-type]

    def stages(self, model: nn.Module, index: VideoIndex, device: torch.device) -> SearchStages:
        return span_stages(model, index, device)  # type: ignore[arg-type]


@register
class CETFamily(_SpanFamily):
    name = "cet"


@register
class BETFamily(_SpanFamily):
    name = "bet"
