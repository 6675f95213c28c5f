"""MMN and RMMN as one model family (``model: {name: mmn}``): the bi-encoder 2D-map network, its
BCE + mutual-matching loss, reliable true negatives, and the CM-ANS second stage."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from scipy import sparse
from torch import nn

from momentsearch.data.batching import pad_tokens
from momentsearch.data.corpus import Video
from momentsearch.data.features import FeatureStore
from momentsearch.models.family import BatchSource, ModelFamily, Step, TrainingData
from momentsearch.models.layers import eval_mode
from momentsearch.models.mmn.batches import MMNBatch, MMNBatches
from momentsearch.models.mmn.config import MMNConfig
from momentsearch.models.mmn.loss import mmn_loss
from momentsearch.models.mmn.negatives import ans_weights, draw, top_candidates
from momentsearch.models.mmn.network import MMN
from momentsearch.models.mmn.search import encode_corpus, map_stages, training_index
from momentsearch.models.registry import register
from momentsearch.search.index import VideoIndex
from momentsearch.search.stages import SearchStages


@register
class MMNFamily(ModelFamily):
    name = "mmn"
    version = 1
    config_class = MMNConfig
    network_class = MMN
    cfg: MMNConfig

    def __init__(self, cfg: MMNConfig):
        super().__init__(cfg)
        self._optimizer: torch.optim.Optimizer | None = None

    def optimizer(self, model: nn.Module, lr: float) -> torch.optim.Optimizer:
        self._optimizer = super().optimizer(model, lr)  # kept: the hard stage scales its learning rate
        return self._optimizer

    # ---- training ----------------------------------------------------------------------------
    def batches(self, data: TrainingData) -> BatchSource:
        return MMNBatches(data.corpus, data.store, data.queries, data.clip_lengths, self.cfg)

    def hard_stage(self, epoch: int) -> bool:
        return self.cfg.fine_tune_hard or 0 < self.cfg.hard_negative_start_epoch <= epoch

    def prepare_epoch(self, model: nn.Module, batches: Any, step: Step, device: torch.device) -> dict[str, float]:
        """From ``hard_negative_start_epoch`` on: the learning rate x ``hard_negative_lr_scale``; at the
        first such epoch (or the first after a resume) r(q, v) is mined with the model as trained so
        far; every such epoch draws new hard negatives from p'(v|q) and p'(q|v) (Eqs. 5-7)."""
        assert isinstance(batches, MMNBatches)
        hard = self.hard_stage(step.epoch)
        if self._optimizer is not None:
            for g in self._optimizer.param_groups:  # the trainer set this epoch's scheduled rate just before
                g["lr"] = g["lr"] * (self.cfg.hard_negative_lr_scale if hard else 1.0)
        batches.hard = hard
        if not hard:
            return {}
        stats: dict[str, float] = {}
        if batches.ans is None:
            t0 = time.perf_counter()
            batches.ans = mine_relevance(model, batches, self.cfg, device)  # type: ignore[arg-type]
            stats["mining_seconds"] = time.perf_counter() - t0
        row_top, row_r, col_top, col_r, r_own, r_video = batches.ans
        c = self.cfg
        batches.hard_videos = draw(row_top, ans_weights(row_r, r_own, c.ans_a, c.ans_b), row_top >= 0, c.hard_videos,
                                   step.generator)
        batches.hard_queries = draw(col_top, ans_weights(col_r, r_video, c.ans_a, c.ans_b), col_top >= 0,
                                    c.hard_queries, step.generator)
        stats["hard_r_gap"] = float(np.nanmean(np.where(row_top >= 0, row_r, np.nan)[:, 0] - r_own))
        return stats

    def loss(self, model: nn.Module, batch: MMNBatch, step: Step) -> tuple[torch.Tensor, dict[str, float]]:
        return mmn_loss(model, batch)  # type: ignore[arg-type]

    # ---- search ------------------------------------------------------------------------------
    def encode_corpus(self, model: nn.Module, store: FeatureStore, videos: Sequence[Video],
                      clip_lengths: Mapping[str, float], device: torch.device, progress: bool = True) -> VideoIndex:
        return self.stamped(encode_corpus(model, store, videos, device, progress=progress))  # type: ignore[arg-type]

    def index_grid(self, duration: float, clip_length: float, n_clips: int) -> tuple[float, int]:
        """N rows a video, one per start clip of its 2D map, each duration / N seconds (as ``encode_corpus``)."""
        return duration / self.cfg.num_clips, self.cfg.num_clips

    def stages(self, model: nn.Module, index: VideoIndex, device: torch.device) -> SearchStages:
        return map_stages(model, index, device)  # type: ignore[arg-type]


@torch.no_grad()
def mine_relevance(model: MMN, batches: MMNBatches, cfg: MMNConfig, device: torch.device, chunk: int = 256
                   ) -> tuple[np.ndarray, ...]:
    """r(q, v) = max over v's moments of s (Eq. 7) for every training query and video, kept as each
    query's top ``hard_video_candidates`` negative videos and each video's top ``hard_query_candidates``
    negative queries (own video / own queries, and with ``true_negatives`` the unreliable pairs, left
    out), with r of each query's own video and the mean over each video's own queries."""
    with eval_mode(model):
        stages = training_index(model, batches.store, batches.videos, device)
        q, v = len(batches), len(batches.videos)
        own = sparse.csr_matrix((np.ones(q, bool), (np.arange(q), batches.positive)), shape=(q, v))
        excluded = own if batches.unreliable is None else (own + batches.unreliable).astype(bool).tocsr()
        r_own = np.empty(q)

        def block(s: int, e: int) -> np.ndarray:
            tokens, mask = pad_tokens(batches.tokens[s:e], cfg.max_tokens)
            r = stages.retriever.score_videos(stages.queries(tokens, mask)).numpy()
            r_own[s:e] = r[np.arange(e - s), batches.positive[s:e]]
            return r

        row_top, row_r, col_top, col_r = top_candidates(block, q, v, cfg.hard_video_candidates,
                                                        cfg.hard_query_candidates, excluded, chunk)
        count = np.bincount(batches.positive, minlength=v)
        r_video = np.bincount(batches.positive, weights=r_own, minlength=v) / np.maximum(count, 1)
    return row_top, row_r, col_top, col_r, r_own, r_video
