"""MINUTE as a model family: the retriever and the localizer, their two-phase schedule, one checkpoint."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from momentsearch.data.batching import pad_tokens
from momentsearch.data.corpus import Video
from momentsearch.data.features import FeatureStore
from momentsearch.models.family import (
    BatchSource,
    ModelFamily,
    Step,
    TrainingData,
)
from momentsearch.models.layers import eval_mode
from momentsearch.models.minute.batches import MinuteBatch, MinuteBatches
from momentsearch.models.minute.config import MINUTEConfig
from momentsearch.models.minute.loss import localizer_loss, retriever_loss
from momentsearch.models.minute.network import MINUTE
from momentsearch.models.minute.search import (
    MinuteLocalizer,
    MinuteRetriever,
    encode_corpus,
)
from momentsearch.models.registry import register
from momentsearch.search.index import VideoIndex
from momentsearch.search.stages import Queries, SearchStages


@register
class MINUTEFamily(ModelFamily):
    name = "minute"
    version = 1
    config_class = MINUTEConfig
    network_class = MINUTE
    cfg: MINUTEConfig

    @classmethod
    def stored_config(cls, data: dict[str, Any]) -> dict[str, Any]:
        # before length_passes existed every batch ran in one pass padded to its longest video
        return data if "length_passes" in data else {**data, "length_passes": 1}

    # ---- training ----------------------------------------------------------------------------
    def batches(self, data: TrainingData) -> BatchSource:
        c = self.cfg
        return MinuteBatches(data.corpus, data.store, data.queries, data.clip_lengths, c.max_clips, c.max_tokens,
                             c.n_streams == 2, c.localizer_batch_size)

    def prepare_epoch(self, model: nn.Module, batches: Any, step: Step, device: torch.device) -> dict[str, float]:
        """Retriever epochs first; at the first localizer epoch (or the first after a resume) the
        trained retriever ranks the training videos for every training query, and each localizer
        epoch draws ``n_negatives`` of each query's top ``negative_pool`` (its own video left out)."""
        assert isinstance(batches, MinuteBatches)
        if step.epoch < self.cfg.retriever_epochs:
            batches.phase = "retriever"
            return {}
        stats: dict[str, float] = {}
        if batches.pool is None:
            t0 = time.perf_counter()
            batches.pool = mine_negative_pool(model, batches, self.cfg.negative_pool, device)  # type: ignore[arg-type]
            stats["mining_seconds"] = time.perf_counter() - t0
        batches.phase = "localizer"
        batches.draw_negatives(self.cfg.n_negatives, step.generator)
        return stats

    def loss(self, model: nn.Module, batch: MinuteBatch, step: Step) -> tuple[torch.Tensor, dict[str, float]]:
        if batch.candidates is None:
            return retriever_loss(model, batch)  # type: ignore[arg-type]
        return localizer_loss(model, batch)  # type: ignore[arg-type]

    # ---- search ------------------------------------------------------------------------------
    def encode_corpus(self, model: nn.Module, store: FeatureStore, videos: Sequence[Video],
                      clip_lengths: Mapping[str, float], device: torch.device, progress: bool = True) -> VideoIndex:
        return self.stamped(encode_corpus(model, store, videos, clip_lengths, device, progress=progress))  # type: ignore[arg-type]

    def stages(self, model: nn.Module, index: VideoIndex, device: torch.device) -> SearchStages:
        return SearchStages(MinuteRetriever(model, index, device),  # type: ignore[arg-type]
                            MinuteLocalizer(model, index, device, self.cfg.scoring, self.cfg.alpha))  # type: ignore[arg-type]


@torch.no_grad()
def mine_negative_pool(model: MINUTE, batches: MinuteBatches, pool: int, device: torch.device,
                       chunk: int = 256) -> np.ndarray:
    """(Q, P) indices into ``batches.videos``: each training query's top P videos by S_R, its own left out."""
    p = min(pool, len(batches.videos) - 1)
    out = np.empty((len(batches), p), np.int64)
    with eval_mode(model):
        index = encode_corpus(model, batches.store, batches.videos,
                              {v.video_id: batches.clip_lengths[v.video_id] for v in batches.videos}, device,
                              progress=False, arrays=("retr",))
        retriever = MinuteRetriever(model, index, device)
        for s in range(0, len(batches), chunk):
            tokens, mask = pad_tokens(batches.tokens[s: s + chunk], batches.max_tokens)
            scores = retriever.score_videos(Queries(tokens, mask))
            rows = torch.arange(len(scores))
            scores[rows, torch.from_numpy(batches.positive[s: s + chunk])] = float("-inf")
            out[s: s + chunk] = scores.topk(p, dim=1).indices.numpy()
    return out
