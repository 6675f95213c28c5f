"""Search: NMS by hand, the index round trip, and the ragged retrieval path against the model's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from momentsearch.data.batching import load_video_batch
from momentsearch.data.synthetic import SyntheticBenchmark
from momentsearch.errors import QueryError
from momentsearch.models.xml import XML, XMLConfig
from momentsearch.models.xml.search import XMLLocalizer, XMLRetriever, encode_corpus, xml_stages
from momentsearch.search import engine as engine_module
from momentsearch.search.engine import SearchEngine
from momentsearch.search.index import VideoIndex
from momentsearch.search.nms import temporal_nms, temporal_nms_grid, temporal_nms_grid_loop, temporal_nms_loop
from momentsearch.search.stages import DenseGrid, Proposals, Queries, SearchStages

CPU = torch.device("cpu")


def build_index(model: XML, store, videos, clip_length: float) -> VideoIndex:  # type: ignore[no-untyped-def]
    return encode_corpus(model, store, videos, {v.video_id: clip_length for v in videos}, CPU, progress=False)


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


def test_vectorised_nms_equals_the_loop_on_random_moments() -> None:
    """Ties in score, equal and zero-length spans, many or one video, every threshold: the same indices."""
    rng = np.random.default_rng(0)
    for _ in range(400):
        b, k, c = (int(x) for x in rng.integers(1, 7, 3))
        st = rng.uniform(0, 30, (b, k, c)).round(int(rng.integers(0, 2)))
        ed = st + rng.uniform(0, 10, (b, k, c)).round(int(rng.integers(0, 2)))
        sc = rng.normal(size=(b, k, c)).round(int(rng.integers(0, 2)))
        ok = rng.random((b, k, c)) < 0.8
        thr, keep = float(rng.choice([0.0, 0.3, 0.5, 0.7, 1.0])), int(rng.integers(1, 30))
        got, want = temporal_nms_grid(st, ed, sc, ok, thr, keep), temporal_nms_grid_loop(st, ed, sc, ok, thr, keep)
        assert np.array_equal(got[1], want[1]) and np.array_equal(got[0][got[1]], want[0][want[1]])
        vids = np.repeat(np.arange(k), c)
        flat = (x[0].ravel() for x in (st, ed, sc))
        s0, e0, c0 = flat
        assert np.array_equal(temporal_nms(vids, s0, e0, c0, thr, keep), temporal_nms_loop(vids, s0, e0, c0, thr, keep))


def test_engine_ranks_a_split_identically_with_the_nms_loop(tiny_benchmark: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bench, model, index, engine = _xml_engine(tiny_benchmark, k_videos=8, n_moments=50)
    tokens, mask = torch.randn(6, 5, 384), torch.ones(6, 5, dtype=torch.bool)
    fast = engine.search(list("abcdef"), tokens, mask)
    svmr_fast = engine.localize_in(list("abcdef"), tokens, mask, np.arange(6))
    monkeypatch.setattr(engine_module, "temporal_nms_grid", temporal_nms_grid_loop)
    slow = engine.search(list("abcdef"), tokens, mask)
    svmr_slow = engine.localize_in(list("abcdef"), tokens, mask, np.arange(6))
    suppressed = 0
    for a, b in ((fast.vcmr, slow.vcmr), (svmr_fast, svmr_slow)):
        for f in ("video_idx", "start", "end", "score"):
            assert np.array_equal(getattr(a, f), getattr(b, f), equal_nan=True), f
        suppressed += int((a.video_idx < 0).sum())
    assert suppressed > 0  # NMS dropped some moments, so the comparison covers suppression


def _model(bench: SyntheticBenchmark) -> XML:
    torch.manual_seed(0)
    cfg = bench.config
    return XML(XMLConfig(visual_dim=cfg.feature_dim, subtitle_dim=cfg.subtitle_dim, hidden=32, n_heads=2)).eval()


def test_index_round_trip_and_ragged_scores_match_the_model(tiny_benchmark: Path, tmp_path: Path) -> None:
    bench = SyntheticBenchmark.load(tiny_benchmark)
    model = _model(bench)
    videos = list(bench.corpus.split("test").videos.values())
    with bench.features() as store:
        index = build_index(model, store, videos, bench.config.clip_length)
        streams, mask = load_video_batch(store, [v.video_id for v in videos], 128, True)
    assert index.offsets[-1] == int(mask.sum()) and len(index) == len(videos)
    index.save(tmp_path / "idx")
    back = VideoIndex.load(tmp_path / "idx")
    assert back.video_ids == index.video_ids and np.array_equal(np.asarray(back.arrays["h2"]), index.arrays["h2"])
    assert np.array_equal(back.clip_lengths, index.clip_lengths) and back.meta == index.meta
    back.meta["family"] = "xml"
    from momentsearch.errors import SearchIndexError

    with pytest.raises(SearchIndexError, match="built by model family 'xml', not 'toy'"):
        back.check_built_by("toy")
    tokens = torch.randn(3, 6, 384)
    tmask = torch.ones(3, 6, dtype=torch.bool)
    with torch.no_grad():
        h1, _ = model.encode_videos(streams, mask)
        expected = model.video_scores(model.encode_queries(tokens, tmask), h1, mask)
    got = XMLRetriever(model, back).score_videos(Queries(model.encode_queries(tokens, tmask).detach(),
                                                         torch.ones(3, model.cfg.n_streams, dtype=torch.bool)))
    np.testing.assert_allclose(got.numpy(), expected.numpy(), atol=2e-3)  # fp16 index vs fp32


def _xml_engine(tiny_benchmark: Path, **kwargs: int) -> tuple[SyntheticBenchmark, XML, VideoIndex, SearchEngine]:
    """A random XML over the tiny benchmark's test videos, indexed, in an engine."""
    bench = SyntheticBenchmark.load(tiny_benchmark)
    model = _model(bench)
    videos = list(bench.corpus.split("test").videos.values())
    with bench.features() as store:
        index = build_index(model, store, videos, bench.config.clip_length)
    return bench, model, index, SearchEngine(xml_stages(model, index), index, **kwargs)


def test_engine_returns_sorted_moments_inside_their_videos(tiny_benchmark: Path) -> None:
    bench, model, index, engine = _xml_engine(tiny_benchmark, k_videos=5, n_moments=20)
    res = engine.search(["a", "b"], torch.randn(2, 5, 384), torch.ones(2, 5, dtype=torch.bool))
    for i in range(2):
        n = int((res.vcmr.video_idx[i] >= 0).sum())
        assert 0 < n <= 20
        sc = res.vcmr.score[i, :n]
        assert np.all(np.diff(sc) <= 0)
        dur = index.durations[res.vcmr.video_idx[i, :n]]
        assert np.all(res.vcmr.start[i, :n] < res.vcmr.end[i, :n]) and np.all(res.vcmr.end[i, :n] <= dur + 1e-9)
        assert set(res.vcmr.video_idx[i, :n]) <= set(res.vr.video_idx[i, :5])  # moments only from the top 5
        lengths = (res.vcmr.end[i, :n] - res.vcmr.start[i, :n]) / bench.config.clip_length
        assert np.all(lengths <= model.cfg.n_max + 1e-9)


def test_k_is_an_argument_not_engine_state(tiny_benchmark: Path) -> None:
    """``n_moments`` per call: the engine keeps its own, a smaller k is the larger one's head (the same
    NMS pass, stopped earlier), and the videos' ranking is built only when asked for."""
    _, _, _, engine = _xml_engine(tiny_benchmark, k_videos=5, n_moments=20)
    tokens, mask = torch.randn(2, 5, 384, generator=torch.Generator().manual_seed(0)), torch.ones(2, 5, dtype=torch.bool)
    full = engine.search(["a", "b"], tokens, mask)
    three = engine.search(["a", "b"], tokens, mask, n_moments=3)
    assert engine.n_moments == 20 and three.vcmr.k == 3 and full.vcmr.k == 20
    for name in ("video_idx", "start", "end", "score"):
        np.testing.assert_array_equal(getattr(three.vcmr, name), getattr(full.vcmr, name)[:, :3])
    assert three._vr_made is None  # not built until asked for
    np.testing.assert_array_equal(three.vr.video_idx, full.vr.video_idx)
    with pytest.raises(QueryError, match="n_moments must be >= 1, got 0"):
        engine.search(["a"], tokens[:1], mask[:1], n_moments=0)


def test_localizer_through_the_fp16_index_equals_the_models_padded_computation(tiny_benchmark: Path) -> None:
    """XMLLocalizer reads H2 from the fp16 index, one ragged video at a time; the model computes
    s_vcmr from its own padded fp32 batch. They agree to fp16 precision."""
    bench = SyntheticBenchmark.load(tiny_benchmark)
    model = _model(bench)
    videos = list(bench.corpus.split("test").videos.values())[:6]
    with bench.features() as store:
        index = build_index(model, store, videos, bench.config.clip_length)
        streams, mask = load_video_batch(store, [v.video_id for v in videos], 128, True)
    tokens, tmask = torch.randn(2, 7, 384), torch.ones(2, 7, dtype=torch.bool)
    tmask[1, 5:] = False
    s_vr = torch.tensor([[0.3, -0.1, 0.5, 0.2, 0.0, 0.4], [0.1, 0.2, -0.3, 0.6, 0.3, 0.0]])
    order = np.array([[0, 1, 2, 3, 4, 5], [5, 3, 1, 0, 2, 4]])
    stages = xml_stages(model, index)
    grid = XMLLocalizer(model, index).localize(stages.queries(tokens, tmask), order, s_vr)  # (2, 6, T, T)
    got = grid.score
    assert grid.masked and (got[~grid.valid] == float("-inf")).all()  # cells that are not moments: -inf, not 0
    with torch.no_grad():
        q = model.encode_queries(tokens, tmask)
        _, h2 = model.encode_videos(streams, mask)
        for b in range(2):
            o_st, o_ed = model.st_ed_logits(q[b:b + 1].expand(6, -1, -1), h2[order[b]], mask[order[b]])
            want = model.vcmr_scores(model.moment_scores(o_st, o_ed), s_vr[b])
            t = want.shape[-1]
            ok = grid.valid[b, :, :t, :t]
            np.testing.assert_allclose(got[b, :, :t, :t][ok].numpy(), want[ok].numpy(), rtol=2e-2, atol=1e-6)
            assert (want[~ok] == 0).all()  # the model's own grid is 0 there: the same moments either way
    # without retrieval scores: s_tl within each video (SVMR), a distribution over the allowed spans
    s_tl = XMLLocalizer(model, index).localize(stages.queries(tokens, tmask), order, None)
    n = index.n_clips[order[0]]
    for j in range(6):
        assert float(s_tl.score[0, j][s_tl.valid[0, j]].sum()) <= 1.0 + 1e-5
        # the valid cells: the length band on the video's own clips, nothing past its end
        want_valid = np.zeros(s_tl.valid.shape[-2:], bool)
        for a in range(n[j]):
            want_valid[a, a + model.cfg.n_min - 1: min(n[j], a + model.cfg.n_max)] = True
        np.testing.assert_array_equal(s_tl.valid[0, j].numpy(), want_valid)


def test_candidate_pools_restrict_the_videos_a_query_is_answered_from(tiny_benchmark: Path) -> None:
    _, _, index, engine = _xml_engine(tiny_benchmark, k_videos=5)
    pools = [[1, 3], [0, 2, 4, 6, 8, 7]]
    res = engine.search(["a", "b"], torch.randn(2, 5, 384), torch.ones(2, 5, dtype=torch.bool), pools=pools)
    for i, pool in enumerate(pools):
        got = res.vcmr.video_idx[i][res.vcmr.video_idx[i] >= 0]
        assert set(got) <= set(pool) and len(got) > 0
        vr = res.vr.video_idx[i][res.vr.video_idx[i] >= 0]
        assert set(vr) <= set(pool) and len(vr) == min(5, len(pool))
    from momentsearch.errors import QueryError

    with pytest.raises(QueryError, match="outside"):
        engine.search(["a"], torch.randn(1, 5, 384), torch.ones(1, 5, dtype=torch.bool), pools=[[len(index)]])


def test_stages_hold_their_stages_to_what_they_declare() -> None:
    """Capabilities are declared (``provides``) and checked against the methods: no attribute probing."""

    class Retr:
        provides = frozenset()

        def score_videos(self, queries):
            return queries.tokens

    class Grid:
        provides = frozenset({"dense"})

        def localize(self, queries, videos, scores=None):
            return queries.tokens

    class Claims(Grid):
        provides = frozenset({"dense", "score_bound"})

    class Hides(Grid):
        def propose(self, queries, videos, scores, n):
            return queries.tokens

    class Silent:
        def localize(self, queries, videos, scores=None):
            return queries.tokens

    stages = SearchStages(Retr(), Grid())
    assert stages.can("dense") and not stages.can("score_bound") and not stages.can("vectors")
    with pytest.raises(TypeError, match="declares 'score_bound' \\(score_bound\\) but has no such method"):
        SearchStages(Retr(), Claims())
    with pytest.raises(TypeError, match="has 'propose' \\(propose\\) but does not declare it"):
        SearchStages(Retr(), Hides())
    with pytest.raises(TypeError, match="Silent must declare what it provides"):
        SearchStages(Retr(), Silent())


def test_the_values_between_stages_refuse_what_does_not_fit() -> None:
    """Queries, DenseGrid and Proposals check their shapes; validity is a mask, never a score value."""
    with pytest.raises(ValueError, match="bool mask"):
        Queries(torch.zeros(2, 3, 4), torch.ones(2, 3))
    with pytest.raises(ValueError, match="bool mask"):
        Queries(torch.zeros(2, 3, 4), torch.ones(2, 4, dtype=torch.bool))
    q = Queries(torch.arange(24.0).reshape(2, 3, 4), torch.tensor([[True, True, False], [True, False, False]]))
    assert len(q) == 2 and torch.equal(q.rows(np.array([1])).mask, q.mask[1:])
    with pytest.raises(ValueError, match="one \\(B, K, n\\) shape"):
        Proposals(np.zeros((1, 2, 3)), np.zeros((1, 2, 3)), np.zeros((1, 2, 3)), np.zeros((1, 2, 2), bool))
    with pytest.raises(ValueError, match="valid must be bool"):
        Proposals(np.zeros((1, 2, 3)), np.zeros((1, 2, 3)), np.zeros((1, 2, 3)), np.zeros((1, 2, 3)))
    with pytest.raises(ValueError, match="DenseGrid"):
        DenseGrid(torch.zeros(1, 2, 3, 3), torch.zeros(1, 2, 3, 3))


def test_a_dense_grid_becomes_proposals_by_its_valid_cells_not_by_its_scores() -> None:
    """grid_proposals by hand: a valid cell with a negative (log) score is a moment, an invalid cell with the best
    score is not; a video with fewer valid cells than asked has its other slots not valid; seconds on each
    video's own grid, the end cut at its duration."""
    from momentsearch.search.proposals import grid_proposals

    index = VideoIndex(["a", "b"], np.array([5.0, 2.5]), np.array([2.0, 1.0]), np.array([0, 3, 6]),
                       {"x": np.zeros((6, 1, 1), np.float16)})
    score = torch.tensor([[[[-1.0, -3.0, 9.0], [0.0, -2.0, -5.0], [0.0, 0.0, -0.5]],
                           [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]]])  # (1, 2, 3, 3)
    valid = torch.zeros(1, 2, 3, 3, dtype=torch.bool)
    valid[0, 0] = torch.tensor([[True, True, False], [False, True, True], [False, False, True]])
    valid[0, 1, 0, 0] = True
    p = grid_proposals(index, np.array([[0, 1]]), DenseGrid(score, valid), 3)
    np.testing.assert_array_equal(p.score[0, 0], [-0.5, -1.0, -2.0])  # the 9.0 cell is not a moment
    np.testing.assert_array_equal(p.valid[0, 0], [True, True, True])
    np.testing.assert_array_equal(p.start[0, 0], [4.0, 0.0, 2.0])  # clips 2-2, 0-0, 1-1 of 2 s
    np.testing.assert_array_equal(p.end[0, 0], [5.0, 2.0, 4.0])  # clip 2 ends at 6 s, cut at 5 s
    assert p.valid[0, 1].tolist() == [True, False, False] and (p.start[0, 1, 0], p.end[0, 1, 0]) == (0.0, 1.0)
