"""XML's search stages: the corpus encoded once into H1/H2, a retriever (Eq. 1) over H1 and a
localizer (Eqs. 2-4) over H2 of the top-K videos, its scores combined with s_vr by Eq. 3."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from momentsearch.data.batching import video_batches
from momentsearch.data.corpus import Video
from momentsearch.data.features import FeatureStore
from momentsearch.models.layers import eval_mode
from momentsearch.models.xml.network import XML
from momentsearch.search.clipmax import ClipMaxRetriever
from momentsearch.search.index import VideoIndex, concat_ragged


@torch.no_grad()
def encode_corpus(model: XML, store: FeatureStore, videos: Sequence[Video], clip_lengths: Mapping[str, float],
                  device: torch.device, batch_size: int = 64, progress: bool = True) -> VideoIndex:
    """Every video's H1 and H2, (clips, S, d) fp16 per video, concatenated without padding."""
    cfg = model.cfg
    h1s, h2s = [], []
    with eval_mode(model):
        for chunk, streams, mask in video_batches(store, videos, batch_size, cfg.max_clips, cfg.n_streams == 2,
                                                  progress):
            h1, h2 = model.encode_videos([x.to(device) for x in streams], mask.to(device))
            h1, h2 = h1.cpu(), h2.cpu()
            for i in range(len(chunk)):
                n = int(mask[i].sum())
                h1s.append(h1[i, :, :n].permute(1, 0, 2).half().numpy())
                h2s.append(h2[i, :, :n].permute(1, 0, 2).half().numpy())
    h1_all, offsets = concat_ragged(h1s)
    h2_all, _ = concat_ragged(h2s)
    return VideoIndex([v.video_id for v in videos], np.array([v.duration for v in videos]),
                      np.array([clip_lengths[v.video_id] for v in videos], np.float64), offsets,
                      {"h1": h1_all, "h2": h2_all})


class XMLRetriever(ClipMaxRetriever):
    """Eq. 1 over an index: max over each video's clips of cos(q_s, H1), averaged over streams."""

    def __init__(self, model: XML, index: VideoIndex, device: torch.device | None = None, chunk_clips: int = 200_000):
        self.model = model.eval()
        super().__init__(model.encode_queries, index, "h1", cosine=True, device=device, chunk_clips=chunk_clips)


class XMLLocalizer:
    """s_tl (Eqs. 2, 4) in each candidate video; with the retrieval scores, s_vcmr (Eq. 3)."""

    def __init__(self, model: XML, index: VideoIndex, device: torch.device | None = None):
        self.model = model.eval()
        self.index = index
        self.device = device or torch.device("cpu")

    @torch.no_grad()
    def localize(self, tokens: torch.Tensor, token_mask: torch.Tensor, videos: np.ndarray,
                 video_scores: torch.Tensor | None = None) -> torch.Tensor:
        q = self.model.encode_queries(tokens.to(self.device), token_mask.to(self.device))  # (B, S, d)
        b, k = videos.shape
        h2, mask = self.index.padded("h2", videos.reshape(-1))  # (B*K, T, S, d)
        h2 = h2.permute(0, 2, 1, 3).to(self.device)  # (B*K, S, T, d)
        qq = q[:, None].expand(b, k, *q.shape[1:]).reshape(b * k, *q.shape[1:])
        o_st, o_ed = self.model.st_ed_logits(qq, h2, mask.to(self.device))
        s_tl = self.model.moment_scores(o_st, o_ed)  # (B*K, T, T)
        if video_scores is not None:
            s_tl = self.model.vcmr_scores(s_tl, video_scores.reshape(-1).to(self.device))
        return s_tl.reshape(b, k, *s_tl.shape[1:]).cpu()
