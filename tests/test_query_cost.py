"""What made a served query cheaper changes no ranking: Eq. 2's similarities without padding every (query, video)
pair (``paired_clip_dots``) and localizing only the videos that can reach the top k (``search.bounded``) give the
moments, spans and scores of the reference path (padded, every candidate localized) on a trained model's test
split, at several k; and the bound does skip videos."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from tests.conftest import TEST_SEED, TEST_THREADS

import momentsearch
from momentsearch.data.batching import pad_tokens
from momentsearch.data.dataset import DatasetConfig
from momentsearch.models.xml import XMLConfig
from momentsearch.search.index import VideoIndex, paired_clip_dots
from momentsearch.training.config import TrainConfig
from momentsearch.training.trainer import Trainer


def test_paired_clip_dots_equal_padded_einsum_by_hand() -> None:
    rng = np.random.default_rng(0)
    n = np.array([3, 5, 1, 4])
    off = np.r_[0, np.cumsum(n)]
    h = rng.normal(size=(int(off[-1]), 2, 3)).astype(np.float16)
    index = VideoIndex([f"v{i}" for i in range(4)], n * 1.0, np.ones(4), off, {"h": h})
    q = torch.from_numpy(rng.normal(size=(2, 2, 3)).astype(np.float32))
    for videos in (np.array([[1, 0, 3], [1, 3, 0]]),  # shared videos: one product with every distinct clip
                   np.array([[0, 1], [2, 3]])):  # no video shared: query by query
        sim, mask = paired_clip_dots(index, "h", q, videos)
        padded, pmask = index.padded("h", videos.reshape(-1))  # (B*K, T, S, d) float32
        qq = q.repeat_interleave(videos.shape[1], 0)
        want = torch.einsum("nsd,ntsd->nt", qq, padded)
        assert torch.equal(mask, pmask) and torch.allclose(sim, want, atol=1e-5)
        # video 1 (5 clips) with query 0, clip 2, by hand
        i = list(videos.reshape(-1)).index(1)
        by_hand = (q[i // videos.shape[1]].numpy().astype(np.float64) * h[off[1] + 2].astype(np.float64)).sum()
        assert abs(float(sim[i, 2]) - by_hand) < 1e-4


@pytest.fixture(scope="module")
def trained(tiny_benchmark: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("qc")
    # trained on the 9-video val split (a quarter of train's cost): the rankings compared need trained weights,
    # not good ones
    cfg = TrainConfig(dataset=DatasetConfig(benchmark=str(tiny_benchmark)), out_dir=str(out / "run"), epochs=3,
                      batch_size=32, lr=1e-3, train_split="val", val_split="test", seed=TEST_SEED, num_threads=TEST_THREADS,
                      model=XMLConfig(hidden=64, hard_negative_start_epoch=2))
    Trainer(cfg, progress=False).fit()
    return out / "run" / "checkpoints" / "best.pt"


@pytest.mark.slow
@pytest.mark.parametrize("k", [1, 3, 10, 100])
def test_the_cheap_path_ranks_as_the_reference(trained: Path, tiny_benchmark: Path, k: int,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import momentsearch.search.bounded as bounded
    from momentsearch.data.synthetic import SyntheticBenchmark

    monkeypatch.setattr(bounded, "FIRST_BLOCK", 2)  # the tiny split has 7 test videos: blocks of 2, 4, then the rest
    searcher = momentsearch.load(trained, split="test", device="cpu")
    test = SyntheticBenchmark.load(tiny_benchmark).corpus.split("test")
    texts = [m.text for m in test.moments][:120]
    engine, loc = searcher.engine, searcher.engine.stages.localizer
    engine.stats.clear()
    fast = searcher.search_many(texts, k=k)  # paired dots, bounded localization
    loc.paired = False
    try:
        tokens, mask = pad_tokens(searcher.queries.encode_many(texts), searcher.family.max_tokens)
        ref = engine.search([f"q{i}" for i in range(len(texts))], tokens, mask, n_moments=k).vcmr  # every video
    finally:
        loc.paired = True
    for i, hits in enumerate(fast):
        want = [(ref.video_ids[int(v)], float(a), float(b), float(s)) for v, a, b, s in
                zip(ref.video_idx[i], ref.start[i], ref.end[i], ref.score[i], strict=True) if v >= 0]
        assert [(h.video_id, h.start, h.end) for h in hits] == [w[:3] for w in want], texts[i]
        np.testing.assert_allclose([h.score for h in hits], [w[3] for w in want], rtol=1e-4)
    assert engine.stats["localized"] <= engine.stats["candidates"]  # the bounded path ran (it counts)


def test_bounded_localization_by_hand() -> None:
    """One query, 10 candidate videos of 10 one-second clips, bounds 100, 90, 50, 20, 10, 5, 4, 3, 2, 1
    (non-increasing); each video's moments score as planted; blocks of 2, then 4, then the rest. n = 2: after
    videos 0-1 the 2nd moment (60) is above video 2's bound (50): videos 2-9 are never localized. n = 3: the
    3rd (30) is below 50, so videos 2-5 follow; then the 3rd is 40, above video 6's bound (4): 6-9 skipped.
    n = 8: every video. In each case the moments kept are those of localizing all ten."""
    import momentsearch.search.bounded as bounded
    from momentsearch.search.bounded import bounded_moments
    from momentsearch.search.stages import Proposals

    planted = {0: [(0, 1, 80.0), (5, 6, 30.0)], 1: [(2, 3, 60.0)], 2: [(0, 0, 40.0)], 3: [(1, 2, 15.0)],
               4: [(3, 4, 9.0)], 5: [(0, 9, 4.0)], 6: [(1, 1, 3.5)], 7: [(2, 2, 2.5)], 8: [(3, 3, 1.5)],
               9: [(4, 4, 0.5)]}
    asked: list[list[int]] = []

    def localize(rows: np.ndarray, cols: np.ndarray) -> Proposals:
        asked.append(cols.tolist())
        p = Proposals.empty(len(rows), len(cols), 2)
        for j, c in enumerate(cols):
            for m, (a, b, score) in enumerate(planted[int(c)]):
                p.start[:, j, m], p.end[:, j, m], p.score[:, j, m], p.valid[:, j, m] = a, b + 1, score, True
        return p

    bound = np.array([[100.0, 90.0, 50.0, 20.0, 10.0, 5.0, 4.0, 3.0, 2.0, 1.0]])
    videos, valid = np.arange(10)[None], np.ones((1, 10), bool)
    old = bounded.FIRST_BLOCK
    bounded.FIRST_BLOCK = 2
    try:
        for n, want_cols in ((2, [[0, 1]]), (3, [[0, 1], [2, 3, 4, 5]]),
                             (8, [[0, 1], [2, 3, 4, 5], [6, 7, 8, 9]])):
            asked.clear()
            stats: dict[str, int] = {}
            got = bounded_moments(localize, bound, valid, videos, n, 0.7, stats)
            assert asked == want_cols and stats["localized"] == sum(map(len, want_cols)), n
            full = localize(np.arange(1), np.arange(10))
            done = sum(map(len, want_cols))
            assert np.array_equal(got.score[:, :done], full.score[:, :done])
            assert np.array_equal(got.valid[:, :done], full.valid[:, :done]) and not got.valid[:, done:].any()
        # blocks of 3, then 6 would leave 1 video: after the first, a remainder smaller than it joins the block before
        bounded.FIRST_BLOCK = 3
        asked.clear()
        got = bounded_moments(localize, bound, valid, videos, 8, 0.7)
        assert asked == [[0, 1, 2], [3, 4, 5, 6, 7, 8, 9]]
        full = localize(np.arange(1), np.arange(10))
        assert np.array_equal(got.score, full.score) and np.array_equal(got.valid, full.valid)
    finally:
        bounded.FIRST_BLOCK = old


def test_clip_bound_keeps_the_moments(tmp_path: Path) -> None:
    """The clip family's bound ((1 + s_vr) / 2): over 40 random videos, 24 queries, the bounded search returns the
    moments and scores of localizing every candidate, at k 1, 5 and 50, and skips videos at k 1."""
    from clip_models import WORDS, tiny_hf_clip
    from momentsearch.serving.checkpoint import load_checkpoint
    from momentsearch.serving.indexing import build_index
    from momentsearch.serving.packing import pack
    from test_clip_family import _planted_corpus

    ckpt_path = pack("clip", tmp_path / "clip.pt", "hf_clip", tiny_hf_clip(tmp_path / "hf"), kappa=0.5)
    rng = np.random.default_rng(1)
    vectors = {f"v{i:02d}": rng.normal(size=(int(rng.integers(4, 30)), 16)) for i in range(40)}
    corpus = _planted_corpus(tmp_path / "corpus", load_checkpoint(ckpt_path).family.cfg.image_encoder, vectors)
    build_index(ckpt_path, corpus, tmp_path / "index", device="cpu", progress=False)
    searcher = momentsearch.load(tmp_path / "index", device="cpu", first_stage="exact")
    texts = [" ".join(rng.choice(WORDS, size=4)) for _ in range(24)]
    tokens, mask = pad_tokens(searcher.queries.encode_many(texts), searcher.family.max_tokens)
    for k in (1, 5, 50):
        searcher.engine.stats.clear()
        fast = searcher.engine.search(texts, tokens, mask, n_moments=k, moments_only=True).vcmr
        ref = searcher.engine.search(texts, tokens, mask, n_moments=k).vcmr
        assert np.array_equal(fast.video_idx, ref.video_idx) and np.array_equal(fast.start, ref.start)
        np.testing.assert_allclose(fast.score, ref.score, rtol=1e-6)
        if k == 1:
            assert searcher.engine.stats["localized"] < searcher.engine.stats["candidates"], searcher.engine.stats
