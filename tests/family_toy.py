"""A test-only model family: the smallest thing that fills every role of the contract.

Query: mean of its token features -> linear. Video: each clip -> linear. Retrieval: max over
clips of the dot product; a reranker that adds the mean over clips; localization: a span's score
is the mean clip-query score inside it, minus the mean outside (a softmax over the span table).
Loss: InfoNCE over the batch's videos + cross-entropy of the annotated span's (start, end) cell.
Unlike XML, its index keeps per-video arrays too, and its video ranking comes from its moments.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from momentsearch.data.batching import load_video_batch, pad_tokens
from momentsearch.data.corpus import Video
from momentsearch.data.features import FeatureStore
from momentsearch.losses.localization import span_to_clip_indices
from momentsearch.models.family import InputDims, ModelFamily, Step, TrainingData
from momentsearch.search.index import VideoIndex, concat_ragged
from momentsearch.search.stages import DenseGrid, Queries, SearchStages


@dataclass(frozen=True)
class ToyConfig:
    name: str = "toy"
    visual_dim: int = 0
    query_dim: int = 0
    hidden: int = 16
    max_clips: int = 128
    max_tokens: int = 32
    max_span: int = 20


class Toy(nn.Module):
    def __init__(self, cfg: ToyConfig):
        super().__init__()
        self.cfg = cfg
        self.q = nn.Linear(cfg.query_dim, cfg.hidden)
        self.v = nn.Linear(cfg.visual_dim, cfg.hidden)

    def query(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:  # (B, L, D) -> (B, d)
        m = mask[..., None].float()
        return self.q((tokens * m).sum(1) / m.sum(1))

    def span_scores(self, sim: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """sim (N, T) clip-query scores -> (N, T, T) log-softmax over allowed (start <= end) spans."""
        t = sim.shape[-1]
        cs = F.pad(torch.cumsum(sim.masked_fill(~mask, 0), -1), (1, 0))
        n = F.pad(torch.cumsum(mask.float(), -1), (1, 0))
        inside = (cs[:, None, 1:] - cs[:, :-1, None]) / (n[:, None, 1:] - n[:, :-1, None]).clamp(min=1)
        idx = torch.arange(t, device=sim.device)
        ok = (idx[None, :] >= idx[:, None]) & (idx[None, :] - idx[:, None] < self.cfg.max_span)
        ok = ok[None] & mask[:, :, None] & mask[:, None, :]
        logits = inside.masked_fill(~ok, -1e9)
        return logits.reshape(len(sim), -1).log_softmax(-1).reshape(len(sim), t, t)


@dataclass
class ToyBatch:
    query_ids: list[str]
    tokens: torch.Tensor
    token_mask: torch.Tensor
    clips: torch.Tensor  # (B, T, D) the positive video of each query
    clip_mask: torch.Tensor
    st: torch.Tensor
    ed: torch.Tensor

    def to(self, device: torch.device, non_blocking: bool = False) -> ToyBatch:
        return replace(self, **{k: v.to(device) for k, v in vars(self).items() if isinstance(v, torch.Tensor)})


class ToyBatches:
    def __init__(self, data: TrainingData, cfg: ToyConfig):
        self.data, self.cfg = data, cfg
        self.moments = [m for m in data.corpus.moments if m.has_ground_truth]
        data.queries.ensure(self.moments, progress=False)

    def __len__(self) -> int:
        return len(self.moments)

    def sampler(self, batch_size: int, generator: torch.Generator) -> Iterator[list[int]]:
        order = torch.randperm(len(self.moments), generator=generator).tolist()
        return (order[s: s + batch_size] for s in range(0, len(order) - 1, batch_size))

    def collate(self, idx: Sequence[int]) -> ToyBatch:
        ms = [self.moments[i] for i in idx]
        tokens, tmask = pad_tokens([self.data.queries.get(m.query_id, m.text) for m in ms], self.cfg.max_tokens)
        (clips,), cmask = load_video_batch(self.data.store, [m.video_id for m in ms], self.cfg.max_clips, False)  # type: ignore[misc]
        se = [span_to_clip_indices(*m.span, self.data.clip_lengths[m.video_id], int(cmask[i].sum()))  # type: ignore[index]
              for i, m in enumerate(ms)]
        return ToyBatch([m.query_id for m in ms], tokens, tmask, clips, cmask,
                        torch.tensor([s for s, _ in se]), torch.tensor([e for _, e in se]))

    def reopen(self) -> None:
        self.data.store.reopen()


class ToyStages:
    """Retriever, reranker and localizer in one object, over the index's ``clips`` and ``mean`` arrays."""

    provides = frozenset({"dense"})

    def __init__(self, model: Toy, index: VideoIndex):
        self.model, self.index = model, index
        self.clips = torch.from_numpy(np.asarray(index.array("clips"), np.float32))

    @torch.no_grad()
    def score_videos(self, queries: Queries) -> torch.Tensor:
        sim = (self.model.query(queries.tokens, queries.mask) @ self.clips.T).numpy()  # (B, N)
        return torch.from_numpy(np.maximum.reduceat(sim, self.index.offsets[:-1], axis=1))

    @torch.no_grad()
    def rerank(self, queries: Queries, videos: np.ndarray, scores: torch.Tensor) -> torch.Tensor:
        mean = torch.from_numpy(np.asarray(self.index.video_arrays["mean"], np.float32))[videos]  # (B, K, d)
        return scores + torch.einsum("bd,bkd->bk", self.model.query(queries.tokens, queries.mask), mean)

    @torch.no_grad()
    def localize(self, queries: Queries, videos: np.ndarray, video_scores: torch.Tensor | None) -> DenseGrid:
        b, k = videos.shape
        clips, mask = self.index.padded("clips", videos.reshape(-1))  # (B*K, T, d)
        q = self.model.query(queries.tokens, queries.mask).repeat_interleave(k, 0)
        p = self.model.span_scores(torch.einsum("nd,ntd->nt", q, clips), mask).exp()
        if video_scores is not None:
            p = p * torch.sigmoid(video_scores.reshape(-1))[:, None, None]
        t = p.shape[-1]
        idx = torch.arange(t)
        ok = (idx[None, :] >= idx[:, None]) & (idx[None, :] - idx[:, None] < self.model.cfg.max_span)
        ok = ok[None] & mask[:, :, None] & mask[:, None, :]
        return DenseGrid(p.reshape(b, k, t, t), ok.reshape(b, k, t, t))


class ToyFamily(ModelFamily):
    name = "toy"
    version = 1
    config_class = ToyConfig
    cfg: ToyConfig

    def build(self, dims: InputDims) -> nn.Module:
        self.cfg = replace(self.cfg, visual_dim=dims.visual, query_dim=dims.query)
        return Toy(self.cfg)

    def restore(self) -> nn.Module:
        return Toy(self.cfg)

    def batches(self, data: TrainingData) -> ToyBatches:
        return ToyBatches(data, self.cfg)

    def loss(self, model: nn.Module, batch: ToyBatch, step: Step) -> tuple[torch.Tensor, dict[str, float]]:
        q = model.query(batch.tokens, batch.token_mask)  # type: ignore[operator]
        v = model.v(batch.clips)  # (B, T, d)  # type: ignore[operator]
        sim = torch.einsum("bd,ktd->bkt", q, v).masked_fill(~batch.clip_mask[None], -1e9)
        nce = F.cross_entropy(sim.max(-1).values, torch.arange(len(q)))
        ar = torch.arange(len(q))
        logp = model.span_scores(sim[ar, ar], batch.clip_mask)  # type: ignore[operator]
        nll = -logp[ar, batch.st, batch.ed].mean()
        loss = nce + 0.1 * nll
        return loss, {"loss": loss.item(), "loss_nce": nce.item(), "loss_span": nll.item()}

    @torch.no_grad()
    def encode_corpus(self, model: nn.Module, store: FeatureStore, videos: Sequence[Video],
                      clip_lengths: Mapping[str, float], device: torch.device, progress: bool = True) -> VideoIndex:
        per = [model.v(torch.from_numpy(store[v.video_id])).numpy().astype(np.float16) for v in videos]  # type: ignore[operator]
        clips, offsets = concat_ragged(per)
        return VideoIndex([v.video_id for v in videos], np.array([v.duration for v in videos]),
                          np.array([clip_lengths[v.video_id] for v in videos]), offsets, {"clips": clips},
                          {"mean": np.stack([p.mean(0) for p in per])}, {"family": self.name, "family_version": 1})

    def stages(self, model: nn.Module, index: VideoIndex, device: torch.device) -> SearchStages:
        s = ToyStages(model, index)  # type: ignore[arg-type]
        return SearchStages(retriever=s, localizer=s, reranker=s, video_ranking="moment")
