"""XML as a model family: its config, network, batches, loss and search stages behind one name."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn

from momentsearch.data.corpus import Video
from momentsearch.data.features import FeatureStore
from momentsearch.models.family import (
    BatchSource,
    InputDims,
    ModelFamily,
    Step,
    TrainingData,
)
from momentsearch.models.registry import register
from momentsearch.models.xml.batches import Batch, MomentBatches
from momentsearch.models.xml.config import XMLConfig
from momentsearch.models.xml.loss import batch_loss
from momentsearch.models.xml.network import XML
from momentsearch.models.xml.search import encode_corpus, xml_stages
from momentsearch.search.index import VideoIndex
from momentsearch.search.stages import SearchStages


@register
class XMLFamily(ModelFamily):
    name = "xml"
    version = 1
    config_class = XMLConfig
    network_class = XML
    cfg: XMLConfig

    @classmethod
    def stored_config(cls, data: dict[str, Any]) -> dict[str, Any]:
        # before encoder_layer existed (issue 23), XML's layers were full Transformer layers
        return data if "encoder_layer" in data else {**data, "encoder_layer": "transformer"}

    def build(self, dims: InputDims) -> nn.Module:
        self.cfg = self.cfg.with_inputs(dims.visual, dims.subtitle if self.cfg.use_subtitle else 0, dims.query)
        return XML(self.cfg)

    def batches(self, data: TrainingData) -> BatchSource:
        c = self.cfg
        source = MomentBatches(data.corpus, data.store, data.queries, data.clip_lengths, c.max_clips, c.max_tokens,
                               c.n_streams == 2, c.queries_per_video)
        if c.relevance.uses_pairs:
            from momentsearch.relevance.training_pairs import training_pairs

            source.attach_pairs(training_pairs(c.relevance, source.query_ids))
        return source

    def loss(self, model: nn.Module, batch: Batch, step: Step) -> tuple[torch.Tensor, dict[str, float]]:
        pool = None if step.epoch < self.cfg.hard_negative_start_epoch else self.cfg.hard_pool_size
        return batch_loss(model, batch, self.cfg, pool, step.generator)  # type: ignore[arg-type]

    def encode_corpus(self, model: nn.Module, store: FeatureStore, videos: Sequence[Video],
                      clip_lengths: Mapping[str, float], device: torch.device, progress: bool = True) -> VideoIndex:
        return self.stamped(encode_corpus(model, store, videos, clip_lengths, device, progress=progress))  # type: ignore[arg-type]

    def stages(self, model: nn.Module, index: VideoIndex, device: torch.device) -> SearchStages:
        return xml_stages(model, index, device)  # type: ignore[arg-type]
