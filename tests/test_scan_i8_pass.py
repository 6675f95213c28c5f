"""The int8 tier's pass over every clip for a batch of queries (``fastscan.scan_i8``, ``Rows8.candidates``): AMX,
AVX-512 VNNI and the portable loop equal to NumPy bit for bit, and the stage answering a batch from it with recall
and exact scores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.conftest import CPU_FLAGS

from momentsearch.search import fastscan
from momentsearch.search.first_stage import ExactFirstStage, build_first_stage
from momentsearch.search.first_stage.scan import ScanFirstStage
from momentsearch.search.first_stage.scan_rows8 import default_batch, quantize
from momentsearch.search.stages import Queries
from test_scan_stage import queries, recall, retriever, structured

PATHS = {"amx": (True, True), "vnni": (True, False), "portable": (False, False)}


def test_this_cpu_takes_its_amx_or_vnni_path():
    """A CPU listing AVX-512 VNNI gets the VNNI path (the portable loops where it does not, as on an AVX2-only
    machine); one listing AMX-INT8 (Sapphire Rapids and later) the AMX path, Linux granting the tile state, and
    the smaller batch with it."""
    paths = fastscan.set_simd(True)
    assert paths["vnni"] == ({"avx512f", "avx512_vnni"} <= CPU_FLAGS), f"this CPU's flags decide: {paths}"
    assert paths["amx"] == ({"amx_int8", "amx_tile"} <= CPU_FLAGS), paths
    assert default_batch() == (6 if paths["amx"] else 12 if paths["vnni"] else 1 << 30)  # never without either


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("streams, d", [(2, 128), (1, 64), (3, 192), (2, 36)])
def test_the_int8_pass_equals_numpy(path: str, streams: int, d: int):
    """Ragged videos (some without clips, ranges cut mid-tile), 1, 5 and 16 queries; d = 192: an odd number of AMX
    steps, d = 36: not a multiple of 64, so AMX hands it to VNNI."""
    rng = np.random.default_rng(d)
    n = rng.integers(0, 40, 300)
    n[[3, 4, 299]] = 0
    offsets = np.concatenate([[0], np.cumsum(n)]).astype(np.int64)
    rows, mult = quantize(rng.normal(size=(int(offsets[-1]), streams, d)), cosine=True)
    rowsum = fastscan.row_sums(rows)
    for nq in (1, 5, 16):
        qpack, qscale = fastscan.quantize_queries(rng.normal(size=(nq, streams, d)))
        want = fastscan.scan_i8_numpy(rows, mult, qpack, qscale, nq, offsets)
        got = np.full((nq, 300), 7.0, np.float32)
        fastscan.set_simd(*PATHS[path])
        try:
            for lo, hi in ((0, 101), (101, 102), (102, 300)):  # ranges as threads split them
                fastscan.scan_i8(rows, mult, rowsum, qpack, qscale, nq, offsets, lo, hi, got)
        finally:
            fastscan.set_simd(True)
        assert np.array_equal(got, want)
        assert (got[:, [3, 4, 299]] == -np.inf).all()
    # by hand: video 0's score for the last query is the mean over streams of its best clip's integer product
    qi = qpack.astype(np.int64) - 128  # (S, d/4, 16, 4)
    a, b = offsets[0], offsets[1]
    by_hand = np.mean([max(float(np.float32(int((rows[c, s].astype(np.int64) * qi[s, :, nq - 1].ravel()).sum()))
                                            * mult[c, s]) for c in range(a, b)) * qscale[s, nq - 1]
                       for s in range(streams)])
    assert got[nq - 1, 0] == pytest.approx(by_hand, rel=1e-6)


def test_the_int8_pass_approximates_the_float_scores_and_checks_its_arguments():
    rng = np.random.default_rng(1)
    offsets = np.arange(0, 2001, 20, dtype=np.int64)
    x = rng.normal(size=(2000, 2, 128)).astype(np.float32)
    rows, mult = quantize(x, cosine=True)
    q = rng.normal(size=(3, 2, 128)).astype(np.float32)
    qpack, qscale = fastscan.quantize_queries(q)
    out = np.empty((3, 100), np.float32)
    fastscan.scan_i8(rows, mult, fastscan.row_sums(rows), qpack, qscale, 3, offsets, 0, 100, out)
    unit = x / np.linalg.norm(x, axis=-1, keepdims=True)
    exact = np.einsum("csd,bsd->bcs", unit, q).reshape(3, 100, 20, 2).max(2).mean(-1)
    err = np.abs(out - exact)  # rows and queries both in int8: at worst 1/20 of the spread here, 1/68 on average
    assert err.max() < exact.std() / 15 and err.mean() < exact.std() / 50, (err.max(), err.mean(), exact.std())
    with pytest.raises(ValueError, match=r"1 <= nq <= 16"):
        fastscan.scan_i8(rows, mult, fastscan.row_sums(rows), qpack, qscale, 17, offsets, 0, 100, out)
    with pytest.raises(ValueError, match=r"rowsum: \d+ bytes, \d+ needed"):
        fastscan.scan_i8(rows, mult, fastscan.row_sums(rows)[:10], qpack, qscale, 3, offsets, 0, 100, out)
    bad = offsets.copy()
    bad[-1] = 5000
    with pytest.raises(ValueError, match=r"offsets must start at 0, never decrease and stay in the rows"):
        fastscan.scan_i8(rows, mult, fastscan.row_sums(rows), qpack, qscale, 3, bad, 0, 100, out)


def test_a_batch_through_the_int8_pass_keeps_recall_exact_scores_and_its_own_batch_1_answers(tmp_path: Path,
                                                                                             monkeypatch):
    index, protos = structured(3000, seed=4)
    retr = retriever(index)
    tokens, mask = queries(protos, b=40, seed=5)  # 40: three passes of up to 16 queries
    ref_s, ref_v = ExactFirstStage(retr).retrieve(Queries(tokens, mask), 100)
    stage = build_first_stage(retr, index, "scan", tmp_path, {"rescore": "1000", "rows": "int8", "int8_batch": "1"})
    assert isinstance(stage, ScanFirstStage) and stage.rows8 is not None and stage.int8_batch == 1
    calls, scan_i8 = [], fastscan.scan_i8
    monkeypatch.setattr(fastscan, "scan_i8", lambda *a: calls.append(a[5]) or scan_i8(*a))
    s, v = stage.retrieve(Queries(tokens, mask), 100)
    assert sorted(set(calls)) == [8, 16]  # 16 + 16 + 8 queries, each pass split over the stage's threads
    assert recall(v, ref_v) >= 0.99, recall(v, ref_v)
    for i in range(40):  # the scores returned are the exact ones (the fp16 rows of the best 200)
        exact = dict(zip(ref_v[i].tolist(), ref_s[i].tolist(), strict=True))
        assert all(sc == pytest.approx(exact[vid], abs=1e-5) for vid, sc in zip(v[i].tolist(), s[i].tolist(),
                                                                                 strict=True) if vid in exact)
    for i in (0, 17, 39):  # each query answered as it is alone through the same pass
        s1, v1 = stage.retrieve(Queries(tokens[i: i + 1], mask[i: i + 1]), 100)
        assert np.array_equal(v1[0], v[i]) and np.array_equal(s1[0].numpy(), s[i].numpy())
    # the pass decides: factors of 0 make every video tie, and recall falls
    stage.rows8.mult = np.zeros_like(stage.rows8.mult)
    assert recall(stage.retrieve(Queries(tokens, mask), 100)[1], ref_v) < 0.5
