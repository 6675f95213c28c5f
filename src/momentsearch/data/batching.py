"""Padded torch batches of query token features and video clip features (shared by training and search)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
from tqdm import tqdm

from momentsearch.data.corpus import Video
from momentsearch.data.features import FeatureStore
from momentsearch.errors import FeatureError


def pad_tokens(feats: Sequence[np.ndarray], max_tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    n = min(max(len(f) for f in feats), max_tokens)
    out = torch.zeros(len(feats), n, feats[0].shape[1])
    mask = torch.zeros(len(feats), n, dtype=torch.bool)
    for i, f in enumerate(feats):
        k = min(len(f), n)
        out[i, :k] = torch.from_numpy(np.asarray(f[:k], np.float32))
        mask[i, :k] = True
    return out, mask


def batches_of(order: Sequence[int], batch_size: int) -> Iterator[list[int]]:
    """``order`` cut into consecutive batches of ``batch_size``; a last batch of one is dropped
    (in-batch negatives need two)."""
    for s in range(0, len(order) - 1, batch_size):
        idx = list(order[s: s + batch_size])
        if len(idx) >= 2:
            yield idx


def load_video_batch(
    store: FeatureStore, video_ids: Sequence[str], max_clips: int, use_subtitle: bool
) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Features of videos padded to the longest: ([(V, T, D_s)] per stream, mask (V, T))."""
    vis, sub = [], []
    for vid in video_ids:
        v, s = store.get(vid)
        if len(v) > max_clips:
            raise FeatureError(f"video {vid!r} has {len(v)} clips, more than the model's max_clips={max_clips}")
        vis.append(v)
        if use_subtitle:
            if s is None:
                raise FeatureError(f"video {vid!r}: the model needs a subtitle stream and the store has none")
            if len(s) != len(v):
                raise FeatureError(f"video {vid!r}: {len(v)} visual clips but {len(s)} subtitle clips")
            sub.append(s)
    t = max(len(v) for v in vis)
    mask = torch.zeros(len(vis), t, dtype=torch.bool)
    streams = [torch.zeros(len(vis), t, vis[0].shape[1])]
    if use_subtitle:
        streams.append(torch.zeros(len(vis), t, sub[0].shape[1]))
    for i, v in enumerate(vis):
        mask[i, : len(v)] = True
        streams[0].numpy()[i, : len(v)] = v  # a NumPy copy: v may be a read-only array kept in memory
        if use_subtitle:
            streams[1].numpy()[i, : len(v)] = sub[i]
    return streams, mask


def video_batches(store: FeatureStore, videos: Sequence[Video], batch_size: int, max_clips: int, use_subtitle: bool,
                  progress: bool = True) -> Iterator[tuple[Sequence[Video], list[torch.Tensor], torch.Tensor]]:
    """``videos`` in batches of ``batch_size``, each with its features as :func:`load_video_batch` gives
    them, behind an "indexing videos" progress bar: what every family's ``encode_corpus`` walks."""
    for s in tqdm(range(0, len(videos), batch_size), desc="indexing videos", unit="batch", disable=not progress):
        chunk = videos[s: s + batch_size]
        yield (chunk, *load_video_batch(store, [v.video_id for v in chunk], max_clips, use_subtitle))
