"""The scan stage's int8 tier (``--param rows=int8``): the compiled re-score against NumPy, the quantization's error
bound, and the stage with the tier keeping recall and exact scores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from momentsearch.errors import FirstStageError
from momentsearch.search import fastscan
from momentsearch.search.first_stage import ExactFirstStage, build_first_stage
from momentsearch.search.first_stage.scan import ScanFirstStage
from momentsearch.search.first_stage.scan_rows8 import quantize
from momentsearch.search.stages import Queries
from test_scan_stage import queries, recall, retriever, structured


@pytest.mark.parametrize("simd", [True, False])
def test_the_compiled_int8_rescore_equals_numpy(simd: bool):
    index, protos = structured(200, d=40, seed=3)  # d = 40: two registers of 16 and a scalar tail of 8
    rows, mult = quantize(index.arrays["h1"], cosine=True)
    offsets = np.concatenate([index.offsets, [index.offsets[-1]]])  # and a last video without clips
    q = np.random.default_rng(0).normal(size=(2, 40)).astype(np.float32)
    videos = np.array([0, 7, 199, 200, 31])
    fastscan.set_simd(simd)
    try:
        got = fastscan.rescore_i8(rows, mult, q, offsets, videos)
    finally:
        fastscan.set_simd(True)
    want = fastscan.rescore_i8_numpy(rows, mult, q, offsets, videos)
    assert got[3] == want[3] == -np.inf  # no clips: never a candidate
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="video 201 outside"):
        fastscan.rescore_i8(rows, mult, q, offsets, np.array([201]))


@pytest.mark.parametrize("cosine", [True, False])
def test_int8_scores_are_within_half_a_step_a_dimension_of_exact(cosine: bool):
    """|<q, x> - mult <q, r>| <= sum_i |q_i| s / 2 per row (s = max|x| / 127), over the norm for cosine; the errors
    met are below a fortieth of the spread of scores (measured: 1/47 to 1/49 at worst over 6,774 rows, 32 dims),
    so the tier ranks as the fp16 rows do except near ties."""
    index, protos = structured(300, seed=5)
    x = index.arrays["h1"].astype(np.float32)
    rows, mult = quantize(x, cosine)
    q = np.random.default_rng(1).normal(size=(2, 32)).astype(np.float32)
    exact = np.einsum("nsd,sd->ns", x, q)
    norm = np.sqrt(np.einsum("nsd,nsd->ns", x, x))
    if cosine:
        exact = exact / norm
    approx = np.einsum("nsd,sd->ns", rows.astype(np.float32), q) * mult
    bound = np.abs(q).sum(-1)[None] * np.abs(x).max(-1) / 127 / 2 / (norm if cosine else 1)
    assert (np.abs(approx - exact) <= bound + 1e-5).all()
    assert np.abs(approx - exact).max() < exact.std() / 40


@pytest.mark.slow  # 12 s: the stage is built twice over 3,000 videos
def test_the_int8_tier_keeps_recall_and_returns_exact_scores(tmp_path: Path):
    index, protos = structured(3000, seed=4)
    retr = retriever(index)
    tokens, mask = queries(protos, b=40, seed=5)
    ref_s, ref_v = ExactFirstStage(retr).retrieve(Queries(tokens, mask), 100)
    plain = build_first_stage(retr, index, "scan", tmp_path, {"rescore": "1000"})
    tiered = build_first_stage(retr, index, "scan", tmp_path, {"rescore": "1000", "rows": "int8"})
    assert isinstance(tiered, ScanFirstStage) and tiered.rows8 is not None
    (folder,) = tmp_path.glob("rows8_*")
    assert {p.name for p in folder.iterdir()} == {"manifest.json", "rows.npy", "mult.npy", "rowsum.npy"}
    tiered.int8_batch = 1 << 30  # each query through the codes, then the int8 rows (the batch's pass: below)
    s, v = tiered.retrieve(Queries(tokens, mask), 100)
    _, v_plain = plain.retrieve(Queries(tokens, mask), 100)
    assert recall(v, ref_v) >= recall(v_plain, ref_v) - 0.005 and recall(v, ref_v) >= 0.99, recall(v, ref_v)
    for i in range(40):  # the scores returned are the exact ones (the fp16 rows of the best 100)
        exact = dict(zip(ref_v[i].tolist(), ref_s[i].tolist(), strict=True))
        assert all(sc == pytest.approx(exact[vid], abs=1e-5) for vid, sc in zip(v[i].tolist(), s[i].tolist(),
                                                                                 strict=True) if vid in exact)
    # the tier decides which videos go on: factors of 0 make every candidate tie, and recall falls
    tiered.rows8.mult = np.zeros_like(tiered.rows8.mult)
    assert recall(tiered.retrieve(Queries(tokens, mask), 100)[1], ref_v) < 0.5
    np.save(folder / "rowsum.npy", np.zeros((7, 2), np.int32))
    with pytest.raises(FirstStageError, match=r"rowsum\.npy: 7 rows where \d+ are expected"):
        build_first_stage(retr, index, "scan", tmp_path, {"rows": "int8"})
    np.save(folder / "rowsum.npy", fastscan.row_sums(np.load(folder / "rows.npy")))
    # reused, not rebuilt; a damaged file is named
    stamps = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    build_first_stage(retr, index, "scan", tmp_path, {"rows": "int8"})
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == stamps
    rows = np.load(folder / "rows.npy")
    np.save(folder / "rows.npy", np.asfortranarray(rows))  # found by the fuzz run: the C re-score needs C order
    with pytest.raises(FirstStageError, match=r"rows\.npy: stored in Fortran order, expected C order"):
        build_first_stage(retr, index, "scan", tmp_path, {"rows": "int8"})
    np.save(folder / "rows.npy", rows)
    np.save(folder / "mult.npy", np.zeros((5, 2), np.float32))
    with pytest.raises(FirstStageError, match=r"mult\.npy: 5 rows where \d+ are expected.*int8 rows are built again"):
        build_first_stage(retr, index, "scan", tmp_path, {"rows": "int8"})


def test_the_int8_tiers_parameters_are_checked(tmp_path: Path):
    index, _ = structured(300)
    retr = retriever(index)
    with pytest.raises(FirstStageError, match=r"rows='int4'; known: fp16 .*, int8"):
        build_first_stage(retr, index, "scan", tmp_path, {"rows": "int4"})
    with pytest.raises(FirstStageError, match=r"exact= \(the videos read in fp16 after the int8 rows\).*need rows=int8"):
        build_first_stage(retr, index, "scan", tmp_path, {"exact": "200"})
    with pytest.raises(FirstStageError, match=r"int8_batch= \(the smallest batch scored from the int8 rows"):
        build_first_stage(retr, index, "scan", tmp_path, {"int8_batch": "8"})
    with pytest.raises(FirstStageError, match=r"must be whole numbers"):
        build_first_stage(retr, index, "scan", tmp_path, {"rows": "int8", "exact": "many"})
    with pytest.raises(FirstStageError, match=r"int8_batch=-3 must be at least 1 \(0: the default\)"):
        build_first_stage(retr, index, "scan", tmp_path, {"rows": "int8", "int8_batch": "-3"})


def test_the_tier_is_added_where_the_rows_exceed_memory_or_the_cpu_has_amx(tmp_path: Path, monkeypatch):
    """``default_rows``: without AMX, fp16 where the index's rows fit in memory and int8 where they do not (a million
    videos' 33 GB on 24 GB); with AMX, int8 above AMX_MIN_CLIPS clips (its batch pass beats the codes from 6 queries);
    then `scan` with no parameter builds and serves the tier."""
    import momentsearch.search.index as index_module
    from momentsearch.search.first_stage import scan_rows8

    index, protos = structured(300)
    paths = fastscan.simd_paths()
    monkeypatch.setattr(fastscan, "simd_paths", lambda: {**paths, "amx": True})
    assert scan_rows8.default_rows(index) == "fp16"  # 6,000-odd clips: below AMX_MIN_CLIPS
    monkeypatch.setattr(scan_rows8, "AMX_MIN_CLIPS", int(index.offsets[-1]) - 1)
    assert scan_rows8.default_rows(index) == "int8"
    monkeypatch.setattr(fastscan, "simd_paths", lambda: {**paths, "amx": False})
    assert scan_rows8.default_rows(index) == "fp16"
    assert build_first_stage(retriever(index), index, "scan", tmp_path).rows8 is None
    monkeypatch.setattr(index_module, "memory_bytes", lambda: index.nbytes - 1)
    assert scan_rows8.default_rows(index) == "int8"
    stage = build_first_stage(retriever(index), index, "scan", tmp_path)
    assert stage.rows8 is not None and stage.rows8.rows.shape == (int(index.offsets[-1]), 2, 32)
    tokens, mask = queries(protos, b=4)
    s, v = stage.retrieve(Queries(tokens, mask), 10)
    ref_s, ref_v = ExactFirstStage(retriever(index)).retrieve(Queries(tokens, mask), 10)
    assert recall(v, ref_v) >= 0.95


def test_without_the_compiled_loops_the_tier_is_refused_by_name_and_not_chosen(tmp_path: Path, monkeypatch):
    import momentsearch.search.index as index_module

    index, _ = structured(300)
    monkeypatch.setattr(fastscan, "_ext", None)  # an install built without a C compiler
    monkeypatch.setattr(index_module, "memory_bytes", lambda: 1024)
    from momentsearch.search.first_stage.scan_rows8 import default_rows

    assert default_rows(index) == "fp16"
    with pytest.raises(FirstStageError, match=r"rows=int8: its re-score is compiled.*use rows=fp16"):
        build_first_stage(retriever(index), index, "scan", tmp_path, {"rows": "int8", "loops": "numba"})


def test_a_grown_index_carries_the_tier_over_equal_to_one_built_anew(tmp_path: Path, monkeypatch):
    """``momentsearch index`` over a grown corpus: the kept videos' int8 rows are copied, only the new and re-encoded
    videos' rows quantized, and the tier equals one built anew over the new index, byte for byte."""
    from momentsearch.search.first_stage import scan_rows8
    from momentsearch.search.first_stage.scan import layout_key
    from momentsearch.search.first_stage.scan_build import grow_scan
    from momentsearch.search.index import VideoIndex, concat_ragged

    old, _ = structured(400, seed=6, ids=[f"v{i:04d}" for i in range(400)])
    scan_rows8.load_or_build(retriever(old), tmp_path / "old", layout_key(old))
    more, _ = structured(60, seed=7, ids=[f"n{i:04d}" for i in range(60)])
    keep = [i for i in range(400) if not 50 <= i < 90]  # 40 removed
    parts, ids, old_row = [], [], []
    for j, i in enumerate(keep):
        changed = j < 10  # re-encoded: new content under the same id
        parts.append((more if changed else old).arrays["h1"][
            slice(*(more.offsets[j: j + 2] if changed else old.offsets[i: i + 2]))])
        ids.append(old.video_ids[i])
        old_row.append(-1 if changed else i)
    for j in range(10, 60):  # 50 new videos
        parts.append(more.arrays["h1"][more.offsets[j]: more.offsets[j + 1]])
        ids.append(more.video_ids[j])
        old_row.append(-1)
    rows, offsets = concat_ragged(parts)
    new = VideoIndex(ids, np.full(len(ids), 60.0), np.full(len(ids), 2.0), offsets, {"h1": rows}, meta=old.meta)
    fresh = sum(int(offsets[v + 1] - offsets[v]) for v, r in enumerate(old_row) if r < 0)
    quantized: list[int] = []
    plain = scan_rows8.quantize
    monkeypatch.setattr(scan_rows8, "quantize", lambda x, cosine: (quantized.append(len(x)), plain(x, cosine))[1])
    assert grow_scan(tmp_path / "old", tmp_path / "new", retriever(new), old, np.asarray(old_row)) == 1
    assert sum(quantized) == fresh < len(rows) // 4  # only the new and re-encoded videos' clips
    (grown,) = (tmp_path / "new").glob("rows8_*")
    anew = scan_rows8.Rows8.build(retriever(new), tmp_path / "anew" / grown.name, layout_key(new))
    for name, want in (("rows.npy", anew.rows), ("mult.npy", anew.mult), ("rowsum.npy", anew.rowsum)):
        got = np.load(grown / name)
        assert got.dtype == want.dtype and np.array_equal(got, want), name
    loaded = scan_rows8.Rows8.load(grown, retriever(new), layout_key(new))
    assert loaded is not None and loaded.rows.shape[0] == len(rows)  # the grown tier is the new index's
    assert scan_rows8.Rows8.load(grown, retriever(old), layout_key(old)) is None  # and not the old one's
