"""The first stage: exact, FAISS and Milvus give the same top 100; approximate indexes are measured;
families that vectors cannot serve say so."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from momentsearch.errors import FirstStageError, QueryError
from momentsearch.search.clipmax import ClipMaxRetriever
from momentsearch.search.first_stage import ExactFirstStage, build_first_stage, parse_params
from momentsearch.search.index import VideoIndex, concat_ragged
from momentsearch.search.stages import Queries

pytest.importorskip("faiss")


def _index(n_videos: int = 400, streams: int = 2, d: int = 24, seed: int = 0) -> VideoIndex:
    """Random clip vectors (fp16, as an index stores them) in videos of 3 to 40 clips."""
    rng = np.random.default_rng(seed)
    parts = [rng.normal(size=(int(rng.integers(3, 41)), streams, d)).astype(np.float16) for _ in range(n_videos)]
    rows, offsets = concat_ragged(parts)
    ids = [f"v{i:04d}" for i in range(n_videos)]
    return VideoIndex(ids, np.full(n_videos, 60.0), np.full(n_videos, 2.0), offsets, {"h1": rows},
                      meta={"family": "test", "fingerprint": f"seed{seed}"})


def _retriever(index: VideoIndex, cosine: bool) -> ClipMaxRetriever:
    s = index.arrays["h1"].shape[1]
    return ClipMaxRetriever(lambda q: q.tokens[:, :s], index, "h1", cosine=cosine)


def _queries(b: int = 12, s: int = 2, d: int = 24) -> tuple[torch.Tensor, torch.Tensor]:
    t = torch.from_numpy(np.random.default_rng(1).normal(size=(b, s, d)).astype(np.float32))
    return t, torch.ones(b, s, dtype=torch.bool)


@pytest.mark.parametrize("cosine", [True, False])  # XML's cosine, MINUTE's inner product
def test_exact_faiss_flat_and_milvus_give_the_same_top_100(tmp_path: Path, cosine: bool) -> None:
    index = _index()
    retr = _retriever(index, cosine)
    tokens, mask = _queries()
    ref_s, ref_v = ExactFirstStage(retr).retrieve(Queries(tokens, mask), 100)
    assert ref_v.shape == (12, 100)
    for spec in ("faiss:Flat", "milvus"):
        stage = build_first_stage(retr, index, spec, tmp_path / "fs", family="test")
        s, v = stage.retrieve(Queries(tokens, mask), 100)
        assert np.array_equal(v, ref_v), spec
        np.testing.assert_allclose(s.numpy(), ref_s.numpy(), rtol=1e-5, atol=1e-5)
        # certified by the threshold bound in every query, after fetching far fewer clips than the corpus holds
        assert stage.stats["uncertified"] == 0 and stage.stats["queries"] == 12
        assert stage.stats["candidates"] / 12 < len(index)
        stage.close()


def test_built_indexes_are_reused_and_rebuilt_when_the_rows_change(tmp_path: Path) -> None:
    index = _index(n_videos=150)
    retr = _retriever(index, True)
    build_first_stage(retr, index, "faiss:Flat", tmp_path, family="test")
    files = sorted(p.name for p in tmp_path.glob("*.faiss"))
    assert len(files) == 2  # one per stream
    stamp = [p.stat().st_mtime_ns for p in sorted(tmp_path.glob("*.faiss"))]
    build_first_stage(retr, index, "faiss:Flat", tmp_path, family="test")
    assert [p.stat().st_mtime_ns for p in sorted(tmp_path.glob("*.faiss"))] == stamp  # loaded, not rebuilt
    other = _index(n_videos=150, seed=5)
    build_first_stage(_retriever(other, True), other, "faiss:Flat", tmp_path, family="test")
    assert len(list(tmp_path.glob("*.faiss"))) == 4  # other rows: another key


def test_approximate_indexes_recall_against_exact(tmp_path: Path) -> None:
    index = _index(n_videos=600, streams=1)
    retr = _retriever(index, True)
    tokens, mask = _queries(s=1)
    _, ref = ExactFirstStage(retr).retrieve(Queries(tokens, mask), 100)
    recall = {}
    for spec, params in (("faiss:HNSW32", {}), ("faiss:IVF64,Flat", {"nprobe": "8"}),
                         ("faiss:IVF64,Flat", {"nprobe": "64"})):
        _, got = build_first_stage(retr, index, spec, tmp_path, params, family="test").retrieve(Queries(tokens, mask), 100)
        recall[spec, params.get("nprobe")] = np.mean([len(set(a) & set(b)) / 100 for a, b in zip(got, ref, strict=True)])
    # random vectors are the hard case: 8 of 64 lists miss 40% (measured 0.597); all 64 lists are exhaustive
    assert recall["faiss:HNSW32", None] >= 0.97
    assert 0.45 <= recall["faiss:IVF64,Flat", "8"] < 0.95
    assert recall["faiss:IVF64,Flat", "64"] == 1.0


def test_pools_are_scored_exactly(tmp_path: Path) -> None:
    index = _index(n_videos=120)
    retr = _retriever(index, True)
    tokens, mask = _queries(b=2)
    pools = [[3, 50, 7, 99], [10, 11]]
    ref_s, ref_v = ExactFirstStage(retr).retrieve(Queries(tokens, mask), 100, pools)
    s, v = build_first_stage(retr, index, "faiss:Flat", tmp_path).retrieve(Queries(tokens, mask), 100, pools)
    assert ref_v.shape == v.shape == (2, 4)
    assert np.array_equal(v[0], ref_v[0]) and set(v[1, :2]) == {10, 11}
    assert torch.isinf(s[1, 2:]).all()
    with pytest.raises(QueryError, match="outside 0..119"):
        build_first_stage(retr, index, "faiss:Flat", tmp_path).retrieve(Queries(tokens, mask), 10, [[1], [500]])


def test_bad_specs_and_unservable_families_say_what_to_do(tmp_path: Path) -> None:
    index = _index(n_videos=30)
    retr = _retriever(index, True)
    with pytest.raises(FirstStageError, match="unknown first stage 'annoy'.*faiss:HNSW32"):
        build_first_stage(retr, index, "annoy", tmp_path)
    with pytest.raises(FirstStageError, match="not an index-factory string"):
        build_first_stage(retr, index, "faiss:Bogus99", tmp_path)
    with pytest.raises(FirstStageError, match="4096 lists need at least 4096 vectors"):
        build_first_stage(retr, index, "faiss:IVF4096,Flat", tmp_path)
    with pytest.raises(FirstStageError, match="not KEY=VALUE"):
        parse_params(["nprobe"])
    with pytest.raises(FirstStageError, match="unknown parameter"):
        build_first_stage(retr, index, "milvus", tmp_path, {"colour": "red"})

    class CrossEncoder:
        provides = frozenset()  # declares no vectors: a first stage cannot serve it
        not_vector_servable = "it reads each (query, video) pair"

    with pytest.raises(FirstStageError, match="family cet cannot be served.*reads each.*Use the first stage 'exact'"):
        build_first_stage(CrossEncoder(), index, "faiss:HNSW32", tmp_path, family="cet")
    assert isinstance(build_first_stage(CrossEncoder(), index, "exact"), ExactFirstStage)


def test_the_device_path_takes_each_videos_max_as_the_cpu_path_does() -> None:
    """``video_max_torch`` (the per-video max a GPU search takes on the device) against NumPy's reduceat
    over the offsets, on videos of 1 to 39 clips; and a retriever's scores by either path."""
    from momentsearch.search.clipmax import video_max_torch

    rng = np.random.default_rng(3)
    n = rng.integers(1, 40, size=300)
    offsets = np.concatenate([[0], np.cumsum(n)])
    sim = rng.normal(size=(4, int(offsets[-1]), 2)).astype(np.float32)
    got = video_max_torch(torch.from_numpy(sim), torch.from_numpy(n)).numpy()
    assert got.shape == (4, 300, 2)
    assert np.array_equal(got, np.maximum.reduceat(sim, offsets[:-1], axis=1))
    assert got[1, 7, 0] == sim[1, offsets[7]: offsets[8], 0].max()

    # the device path a stream at a time (clips in chunks that cut videos in two) against the CPU retriever's scores
    from momentsearch.search.clipmax import ClipMaxRetriever, as_read, streamwise_video_max
    from momentsearch.search.index import VideoIndex
    from momentsearch.search.stages import Queries

    rows = rng.normal(size=(int(offsets[-1]), 2, 16)).astype(np.float16)
    index = VideoIndex([f"v{i}" for i in range(300)], np.full(300, 60.0), np.full(300, 2.0), offsets, {"h1": rows})
    q = torch.from_numpy(rng.normal(size=(5, 2, 16)).astype(np.float32))
    retriever = ClipMaxRetriever(as_read, index, "h1", True, chunk_clips=1000)
    cpu = retriever.score_videos(Queries(q, torch.ones(5, 2, dtype=torch.bool)))
    unit = torch.nn.functional.normalize(q, dim=-1)
    streamwise = streamwise_video_max(unit, retriever._prepared(), torch.from_numpy(n))
    assert len(retriever._prepared()) > 3 and streamwise.shape == (5, 300)
    assert torch.allclose(cpu, streamwise, atol=1e-6)
    assert np.array_equal(cpu.topk(20).indices.numpy(), streamwise.topk(20).indices.numpy())
    # in pieces that cut videos too (as a device scores, at most PIECE_ELEMS scores at once), down to one clip
    from momentsearch.search.clipmax import video_pieces

    chunks = retriever._prepared()
    for size in (1, 7, 64, 1000):
        pieces = video_pieces(n, [len(c) for c in chunks], size, torch.device("cpu"))
        assert sum(int(p[4].sum()) for p in pieces) == offsets[-1] and max(p[2] - p[1] for p in pieces) <= size
        assert torch.allclose(cpu, streamwise_video_max(unit, chunks, torch.from_numpy(n), pieces), atol=1e-6)
    # by hand: videos of 3, 5 and 2 clips in chunks of 6 and 4, pieces of at most 4 clips
    by_hand = [(c, a, b, v, held.tolist()) for c, a, b, v, held in video_pieces(np.array([3, 5, 2]), [6, 4], 4,
                                                                                torch.device("cpu"))]
    assert by_hand == [(0, 0, 4, 0, [3, 1]), (0, 4, 6, 1, [2]), (1, 0, 4, 1, [2, 2])]  # video 1 in all three


def test_auto_is_exact_on_a_gpu_where_every_clip_fits() -> None:
    """``auto`` above 200,000 clips: ``scan`` on the CPU; on a GPU ``exact`` while the fp32 copy of every
    clip takes at most 80 % of the device's free memory (an H200 holds 1M videos' 32 GiB)."""
    from momentsearch.search.first_stage.retrieve import resolve_spec

    assert resolve_spec("auto", 150_000) == "exact"
    assert resolve_spec("auto", 34_000_000) == "scan"
    assert resolve_spec("auto", 34_000_000, (32 * 2**30, 140 * 2**30)) == "exact"
    assert resolve_spec("auto", 34_000_000, (32 * 2**30, 40 * 2**30)) == "exact"  # 80 % of 40 = 32
    assert resolve_spec("auto", 34_000_000, (32 * 2**30, 39 * 2**30)) == "scan"
    assert resolve_spec("scan", 150_000, (1, 2**40)) == "scan"  # a named stage is kept
