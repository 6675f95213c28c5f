"""Search: NMS by hand, the index round trip, and the ragged retrieval path against the model's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from momentsearch.data.synthetic import SyntheticBenchmark
from momentsearch.models.xml import XML, XMLConfig
from momentsearch.search.engine import SearchEngine, XMLLocalizer, XMLRetriever
from momentsearch.data.batching import load_video_batch
from momentsearch.search.index import VideoIndex, build_index
from momentsearch.search.nms import temporal_nms


def test_temporal_nms_by_hand() -> None:
    video = np.array([0, 0, 0, 1])
    start = np.array([0.0, 1.0, 20.0, 0.0])
    end = np.array([10.0, 10.0, 30.0, 10.0])
    score = np.array([0.9, 0.8, 0.7, 0.6])
    # [1, 10] overlaps [0, 10] with tIoU 0.9 on the same video: dropped; the other video's copy stays
    assert temporal_nms(video, start, end, score, 0.7, 10).tolist() == [0, 2, 3]
    assert temporal_nms(video, start, end, score, 0.95, 10).tolist() == [0, 1, 2, 3]
    assert temporal_nms(video, start, end, score, 0.7, 2).tolist() == [0, 2]
    assert temporal_nms(video, start, end, score, 1.0, 3).tolist() == [0, 1, 2]


def _model(bench: SyntheticBenchmark) -> XML:
    torch.manual_seed(0)
    cfg = bench.config
    return XML(XMLConfig(visual_dim=cfg.feature_dim, subtitle_dim=cfg.subtitle_dim, hidden=32, n_heads=2)).eval()


def test_index_round_trip_and_ragged_scores_match_the_model(tiny_benchmark: Path, tmp_path: Path) -> None:
    bench = SyntheticBenchmark.load(tiny_benchmark)
    model = _model(bench)
    videos = list(bench.corpus.split("test").videos.values())
    with bench.features() as store:
        index = build_index(model, store, videos, bench.config.clip_length, progress=False)
        streams, mask = load_video_batch(store, [v.video_id for v in videos], 128, True)
    assert index.offsets[-1] == int(mask.sum()) and len(index) == len(videos)
    index.save(tmp_path / "idx")
    back = VideoIndex.load(tmp_path / "idx")
    assert back.video_ids == index.video_ids and np.array_equal(np.asarray(back.h2), index.h2)
    tokens = torch.randn(3, 6, 384)
    tmask = torch.ones(3, 6, dtype=torch.bool)
    with torch.no_grad():
        h1, _ = model.encode_videos(streams, mask)
        expected = model.video_scores(model.encode_queries(tokens, tmask), h1, mask)
    got = XMLRetriever(model, back).score_videos(tokens, tmask)
    np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=2e-3)  # fp16 index vs fp32


def test_engine_returns_sorted_moments_inside_their_videos(tiny_benchmark: Path) -> None:
    bench = SyntheticBenchmark.load(tiny_benchmark)
    model = _model(bench)
    videos = list(bench.corpus.split("test").videos.values())
    with bench.features() as store:
        index = build_index(model, store, videos, bench.config.clip_length, progress=False)
    engine = SearchEngine(XMLRetriever(model, index), XMLLocalizer(model, index), index, k_videos=5, n_moments=20)
    res = engine.search(["a", "b"], torch.randn(2, 5, 384), torch.ones(2, 5, dtype=torch.bool))
    for i in range(2):
        n = int((res.vcmr.video_idx[i] >= 0).sum())
        assert 0 < n <= 20
        sc = res.vcmr.score[i, :n]
        assert np.all(np.diff(sc) <= 0)
        dur = index.durations[res.vcmr.video_idx[i, :n]]
        assert np.all(res.vcmr.start[i, :n] < res.vcmr.end[i, :n]) and np.all(res.vcmr.end[i, :n] <= dur + 1e-9)
        assert set(res.vcmr.video_idx[i, :n]) <= set(res.vr.video_idx[i, :5])  # moments only from the top 5
        lengths = (res.vcmr.end[i, :n] - res.vcmr.start[i, :n]) / index.clip_length
        assert np.all(lengths <= model.cfg.n_max + 1e-9)
