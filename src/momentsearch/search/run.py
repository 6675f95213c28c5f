"""Rank every query of a corpus split with an XML model: index, search, and SVMR in the true video."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from tqdm import tqdm

from momentsearch.data.batching import pad_tokens
from momentsearch.data.corpus import Corpus
from momentsearch.data.features import FeatureStore
from momentsearch.evaluation.predictions import RankedMoments
from momentsearch.models.xml import XML
from momentsearch.search.engine import SearchEngine, XMLLocalizer, XMLRetriever
from momentsearch.search.index import VideoIndex, build_index
from momentsearch.search.nms import temporal_nms
from momentsearch.text.encoders import QueryFeatureCache


def rank_split(
    model: XML, corpus: Corpus, store: FeatureStore, queries: QueryFeatureCache, clip_length: float,
    k_videos: int = 100, nms_threshold: float = 0.7, batch_size: int = 64, query_ids: Sequence[str] | None = None,
    index: VideoIndex | None = None, progress: bool = True,
) -> tuple[dict[str, RankedMoments], VideoIndex]:
    """{"VCMR", "SVMR", "VR"} rankings for the split's annotated queries (or ``query_ids``)."""
    model.eval()
    if index is None:
        index = build_index(model, store, list(corpus.videos.values()), clip_length, progress=progress)
    wanted = set(query_ids) if query_ids is not None else None
    ms = [m for m in corpus.moments if m.has_ground_truth and (wanted is None or m.query_id in wanted)]
    queries.ensure([m.text for m in ms], progress=progress)
    engine = SearchEngine(XMLRetriever(model, index), XMLLocalizer(model, index), index, k_videos=k_videos,
                          nms_threshold=nms_threshold)
    vindex = {v: i for i, v in enumerate(index.video_ids)}
    vcmr, vr, svmr = [], [], []
    for s in tqdm(range(0, len(ms), batch_size), desc="searching", unit="batch", disable=not progress):
        chunk = ms[s: s + batch_size]
        tokens, mask = pad_tokens([queries.get(m.text) for m in chunk], model.cfg.max_tokens)
        res = engine.search([m.query_id for m in chunk], tokens, mask)
        vcmr.append(res.vcmr)
        vr.append(res.vr)
        gt = np.array([[vindex[m.video_id]] for m in chunk])  # type: ignore[index]
        svmr.append(_svmr(engine, tokens, mask, gt, [m.query_id for m in chunk], index, nms_threshold))
    return {"VCMR": _concat(vcmr), "SVMR": _concat(svmr), "VR": _concat(vr)}, index


@torch.no_grad()
def _svmr(engine: SearchEngine, tokens: torch.Tensor, mask: torch.Tensor, gt: np.ndarray, qids: list[str],
          index: VideoIndex, nms_threshold: float, n: int = 100) -> RankedMoments:
    s_tl = engine.localizer.localize(tokens, mask, gt)[:, 0]  # (B, T, T)
    b, t, _ = s_tl.shape
    lists = []
    for i in range(b):
        flat = s_tl[i].reshape(-1).numpy()
        top = np.argsort(-flat)[: 4 * n]
        top = top[flat[top] > 0]
        st, ed = top // t, top % t
        dur = index.durations[gt[i, 0]]
        start, end = st * index.clip_length, np.minimum((ed + 1) * index.clip_length, dur)
        vids = np.full(len(top), gt[i, 0])
        keep = temporal_nms(vids, start, end, flat[top], nms_threshold, n)
        lists.append(list(zip(vids[keep], start[keep], end[keep], flat[top][keep], strict=True)))
    return RankedMoments.from_lists(qids, index.video_ids, lists)


def _concat(parts: list[RankedMoments]) -> RankedMoments:
    k = max(p.k for p in parts)

    def pad(a: np.ndarray, fill: float) -> np.ndarray:
        return np.pad(a, ((0, 0), (0, k - a.shape[1])), constant_values=fill)

    return RankedMoments(
        [q for p in parts for q in p.query_ids], parts[0].video_ids,
        np.concatenate([pad(p.video_idx, -1) for p in parts]), np.concatenate([pad(p.start, 0) for p in parts]),
        np.concatenate([pad(p.end, 0) for p in parts]), np.concatenate([pad(p.score, np.nan) for p in parts]),
    )
