"""XML's search stages: the corpus encoded once into H1/H2, a retriever (Eq. 1) over H1 and a
localizer (Eqs. 2-4) over H2 of the top-K videos, its scores combined with s_vr by Eq. 3."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch

from momentsearch.data.batching import video_batches
from momentsearch.data.corpus import Video
from momentsearch.data.features import FeatureStore
from momentsearch.errors import FeatureError
from momentsearch.models.layers import eval_mode, length_band
from momentsearch.models.xml.network import XML
from momentsearch.search.clipmax import ClipMaxRetriever, as_read
from momentsearch.search.index import VideoIndex, concat_ragged, paired_clip_dots
from momentsearch.search.proposals import ClipProposals, banded_top
from momentsearch.search.stages import DenseGrid, Queries, SearchStages


@torch.no_grad()
def encode_corpus(model: XML, store: FeatureStore, videos: Sequence[Video], clip_lengths: Mapping[str, float],
                  device: torch.device, batch_size: int = 64, progress: bool = True) -> VideoIndex:
    """Every video's H1 and H2, (clips, S, d) fp16 per video, concatenated without padding."""
    cfg = model.cfg
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    # a video longer than the model's max_clips is encoded in consecutive windows of max_clips clips
    # (each window as the model saw videos in training); the estimate leaves a clip of margin
    long = [v for v in videos if v.duration / clip_lengths[v.video_id] > cfg.max_clips - 2]
    short = [v for v in videos if v not in long]
    with eval_mode(model):
        for chunk, streams, mask in video_batches(store, short, batch_size, cfg.max_clips, cfg.n_streams == 2,
                                                  progress):
            h1, h2 = model.encode_videos([x.to(device) for x in streams], mask.to(device))
            h1, h2 = h1.cpu(), h2.cpu()
            for i in range(len(chunk)):
                n = int(mask[i].sum())
                out[chunk[i].video_id] = (h1[i, :, :n].permute(1, 0, 2).half().numpy(),
                                          h2[i, :, :n].permute(1, 0, 2).half().numpy())
        for v in long:
            out[v.video_id] = _encode_windows(model, store, v.video_id, device, batch_size)
    h1_all, offsets = concat_ragged([out[v.video_id][0] for v in videos])
    h2_all, _ = concat_ragged([out[v.video_id][1] for v in videos])
    return VideoIndex([v.video_id for v in videos], np.array([v.duration for v in videos]),
                      np.array([clip_lengths[v.video_id] for v in videos], np.float64), offsets,
                      {"h1": h1_all, "h2": h2_all})


def _encode_windows(model: XML, store: FeatureStore, video_id: str, device: torch.device, batch_size: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """H1, H2 (clips, S, d) fp16 of one long video, window by window (windows batched)."""
    cfg = model.cfg
    vis, sub = store.get(video_id)
    w = cfg.max_clips
    starts = list(range(0, len(vis), w))
    h1s, h2s = [], []
    for b in range(0, len(starts), batch_size):
        group = starts[b: b + batch_size]
        n = [min(w, len(vis) - s) for s in group]
        t = max(n)
        mask = torch.zeros(len(group), t, dtype=torch.bool)
        streams = [torch.zeros(len(group), t, vis.shape[1])]
        if cfg.n_streams == 2:
            if sub is None:
                raise FeatureError(f"video {video_id!r}: the model needs a subtitle stream and the store has none")
            streams.append(torch.zeros(len(group), t, sub.shape[1]))
        for i, s in enumerate(group):
            mask[i, : n[i]] = True
            streams[0].numpy()[i, : n[i]] = vis[s: s + n[i]]
            if cfg.n_streams == 2:
                streams[1].numpy()[i, : n[i]] = sub[s: s + n[i]]
        h1, h2 = model.encode_videos([x.to(device) for x in streams], mask.to(device))
        for i in range(len(group)):
            h1s.append(h1[i, :, : n[i]].permute(1, 0, 2).half().cpu().numpy())
            h2s.append(h2[i, :, : n[i]].permute(1, 0, 2).half().cpu().numpy())
    return np.concatenate(h1s), np.concatenate(h2s)


def xml_stages(model: XML, index: VideoIndex, device: torch.device | None = None,
               paired: bool | None = None) -> SearchStages:
    """XML's stages: the query network (Eqs. 1-2's q) runs once per batch, and both stages read its output."""
    dev = device or torch.device("cpu")
    return SearchStages(XMLRetriever(model, index, dev), XMLLocalizer(model, index, dev, paired),  # type: ignore[arg-type]
                        query_network=lambda tokens, mask: model.encode_queries(tokens.to(dev), mask.to(dev)))


class XMLRetriever(ClipMaxRetriever):
    """Eq. 1 over an index: max over each video's clips of cos(q_s, H1), averaged over streams. It reads the
    queries XML's query network made (:func:`xml_stages`)."""

    def __init__(self, model: XML, index: VideoIndex, device: torch.device | None = None, chunk_clips: int = 200_000):
        self.model = model.eval()
        super().__init__(as_read, index, "h1", cosine=True, device=device, chunk_clips=chunk_clips)


class XMLLocalizer:
    """s_tl (Eqs. 2, 4) in each candidate video; with the retrieval scores, s_vcmr (Eq. 3). It reads the queries
    XML's query network made (:func:`xml_stages`)."""

    provides = frozenset({"dense", "propose", "score_bound"})

    def __init__(self, model: XML, index: VideoIndex, device: torch.device | None = None, paired: bool | None = None):
        self.model = model.eval()
        self.index = index
        self.device = device or torch.device("cpu")
        # paired: Eq. 2's similarities by paired_clip_dots (each distinct video's clips read once; the CPU's
        # default), else over every (query, video) pair's padded clips (the GPU's, and the reference)
        self.paired = self.device.type == "cpu" if paired is None else paired

    @torch.no_grad()
    def localize(self, queries: Queries, videos: np.ndarray, video_scores: torch.Tensor | None = None) -> DenseGrid:
        q = queries.tokens.to(self.device)  # (B, S, d)
        b, k = videos.shape
        ql = self.model.localizing_queries(q)
        if self.paired:  # each distinct video's clips read once, no (B*K, S, T, d) padding
            sim, mask = paired_clip_dots(self.index, "h2", ql, videos)
        else:
            h2, mask = self.index.padded("h2", videos.reshape(-1))  # (B*K, T, S, d)
            h2 = h2.permute(0, 2, 1, 3).to(self.device)  # (B*K, S, T, d)
            qq = ql[:, None].expand(b, k, *ql.shape[1:]).reshape(b * k, *ql.shape[1:])
            sim = torch.einsum("nsd,nstd->nt", qq, h2)
        mask = mask.to(self.device)
        o_st, o_ed = self.model.conv_logits(sim / q.shape[1], mask)
        t = o_st.shape[-1]
        # the band on each video's own clips: a span ends on a real clip (its start, at or before the end, is one too)
        valid = length_band(t, self.model.cfg.n_min, self.model.cfg.n_max, self.device) & mask[:, None, :]
        p_st, p_ed = o_st.softmax(-1), o_ed.softmax(-1)  # Eq. 4's s_tl = P_st P_ed (moment_scores), -inf off valid
        s_tl = (p_st[:, :, None] * p_ed[:, None, :]).masked_fill_(~valid, float("-inf"))  # (B*K, T, T)
        if video_scores is not None:
            s_tl = self.model.vcmr_scores(s_tl, video_scores.reshape(-1).to(self.device))  # Eq. 3 (-inf stays)
        return DenseGrid(s_tl.reshape(b, k, t, t).cpu(), valid.reshape(b, k, t, t).cpu(), masked=True)

    def score_bound(self, video_scores: torch.Tensor) -> torch.Tensor:
        """No moment of a video scores above exp(alpha s_vr) (Eq. 3 with s_tl = P_st P_ed <= 1)."""
        return torch.exp(self.model.cfg.alpha * video_scores.float())

    @torch.no_grad()
    def propose(self, queries: Queries, videos: np.ndarray, video_scores: torch.Tensor | None, n: int) -> ClipProposals:
        """The dense grid's top ``n`` per candidate, video by video at its own length: no (T, T) map,
        so a two-hour video costs T x n_max (Eq. 4's length band caps the moment length)."""
        cfg = self.model.cfg
        q = queries.tokens.to(self.device)  # (B, S, d)
        b, k = videos.shape
        st = np.zeros((b, k, n), np.int64)
        ed = np.zeros((b, k, n), np.int64)
        sc = np.zeros((b, k, n), np.float32)
        ok = np.zeros((b, k, n), bool)
        for j in np.unique(videos):
            h2, mask = self.index.padded("h2", np.array([j]))  # (1, T, S, d)
            h2 = h2.permute(0, 2, 1, 3).to(self.device)
            for i, kk in zip(*np.nonzero(videos == j), strict=True):
                o_st, o_ed = self.model.st_ed_logits(q[i: i + 1], h2, mask.to(self.device))
                s_, e_, p_, v_ = banded_top(o_st[0].softmax(-1), o_ed[0].softmax(-1), cfg.n_min, cfg.n_max, n)
                if video_scores is not None:
                    p_ = p_ * torch.exp(cfg.alpha * video_scores[i, kk].to(p_.device))
                st[i, kk], ed[i, kk], sc[i, kk] = s_.cpu().numpy(), e_.cpu().numpy(), p_.float().cpu().numpy()
                ok[i, kk] = v_.cpu().numpy()
        return ClipProposals(st, ed, sc, ok)
