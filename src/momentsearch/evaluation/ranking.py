"""Rank every query of a corpus split with any model family: index, search, and SVMR in the true video."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from momentsearch.data.batching import pad_tokens
from momentsearch.data.corpus import Corpus
from momentsearch.data.features import FeatureStore
from momentsearch.models.family import ModelFamily
from momentsearch.search.engine import SearchEngine
from momentsearch.search.index import VideoIndex
from momentsearch.search.ranked import RankedMoments
from momentsearch.text.queries import QueryFeatures


def rank_split(
    family: ModelFamily, model: nn.Module, corpus: Corpus, store: FeatureStore, queries: QueryFeatures,
    clip_lengths: Mapping[str, float], k_videos: int = 100, nms_threshold: float = 0.7, batch_size: int = 64,
    query_ids: Sequence[str] | None = None, index: VideoIndex | None = None, progress: bool = True,
    device: torch.device | None = None, n_moments: int = 100, pools: Mapping[str, Sequence[str]] | None = None,
    candidates_per_video: int | None = 20,
) -> tuple[dict[str, RankedMoments], VideoIndex]:
    """{"VCMR", "SVMR", "VR"} rankings for the split's annotated queries (or ``query_ids``). With
    ``pools`` (query id -> video ids, the MVMR protocol) each query is answered from its pool only.
    ``candidates_per_video``: the best spans of each video's map that go on to NMS (None: all)."""
    device = device or torch.device("cpu")
    model.eval()
    if index is None:
        index = family.encode_corpus(model, store, list(corpus.videos.values()), clip_lengths, device, progress)
    wanted = set(query_ids) if query_ids is not None else None
    ms = [m for m in corpus.moments if m.has_ground_truth and (wanted is None or m.query_id in wanted)]
    queries.ensure(ms, progress=progress)
    engine = SearchEngine(family.stages(model, index, device), index, k_videos=k_videos, nms_threshold=nms_threshold,
                          n_moments=n_moments, candidates_per_video=candidates_per_video)
    vindex = {v: i for i, v in enumerate(index.video_ids)}
    vcmr, vr, svmr = [], [], []
    for s in tqdm(range(0, len(ms), batch_size), desc="searching", unit="batch", disable=not progress):
        chunk = ms[s: s + batch_size]
        qids = [m.query_id for m in chunk]
        tokens, mask = pad_tokens([queries.get(m.query_id, m.text) for m in chunk], family.max_tokens)
        res = engine.search(qids, tokens, mask, None if pools is None else
                            [[vindex[v] for v in pools[q]] for q in qids])
        vcmr.append(res.vcmr)
        vr.append(res.vr)
        gt = np.array([vindex[m.video_id] for m in chunk])  # type: ignore[index]
        svmr.append(engine.localize_in(qids, tokens, mask, gt))
    return {"VCMR": concat_ranked(vcmr), "SVMR": concat_ranked(svmr), "VR": concat_ranked(vr)}, index


def concat_ranked(parts: list[RankedMoments]) -> RankedMoments:
    k = max(p.k for p in parts)

    def pad(a: np.ndarray, fill: float) -> np.ndarray:
        return np.pad(a, ((0, 0), (0, k - a.shape[1])), constant_values=fill)

    return RankedMoments(
        [q for p in parts for q in p.query_ids], parts[0].video_ids,
        np.concatenate([pad(p.video_idx, -1) for p in parts]), np.concatenate([pad(p.start, 0) for p in parts]),
        np.concatenate([pad(p.end, 0) for p in parts]), np.concatenate([pad(p.score, np.nan) for p in parts]),
    )
