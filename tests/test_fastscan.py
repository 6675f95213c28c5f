"""The compiled scan loops (``_fastscan.c``): the byte-table scan equals its NumPy twin on the SIMD and the
portable paths, bit for bit; the exact re-score equals the retriever's; the scan stage answers a batch as
it answers each query alone, and its compiled loops find what the numba loops find."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from tests.conftest import CPU_FLAGS

from momentsearch.errors import FirstStageError
from momentsearch.search import fastscan
from momentsearch.search.first_stage import ExactFirstStage, build_first_stage
from momentsearch.search.first_stage.scan import ScanFirstStage, top_indices
from momentsearch.search.stages import Queries
from test_scan_stage import queries, recall, retriever, structured


def test_the_extension_is_built_and_this_cpu_takes_its_simd_paths():
    # make test needs the compiled loops: pip install builds them where a C compiler is (setup.py)
    assert fastscan.available()
    paths = fastscan.set_simd(True)
    want = {"vbmi": {"avx512vbmi", "avx512bw"} <= CPU_FLAGS, "avx512": {"avx512f", "f16c", "fma"} <= CPU_FLAGS}
    assert {k: paths[k] for k in want} == want, f"the SIMD paths on must be the ones this CPU lists: {paths}"


def ragged(rng: np.random.Generator, n_videos: int, most: int) -> np.ndarray:
    n = rng.integers(0, most, n_videos)
    n[[3, 4]] = 0  # videos without clips
    return np.concatenate([[0], np.cumsum(n)]).astype(np.int64)


@pytest.mark.parametrize("m", [32, 16, 7])
@pytest.mark.parametrize("simd", [True, False])
@pytest.mark.parametrize("bits", [8, 7])
def test_the_byte_table_scan_equals_numpy(m: int, simd: bool, bits: int):
    rng = np.random.default_rng(m)
    offsets = ragged(rng, 700, 90)
    codes = rng.integers(0, 256, (int(offsets[-1]), m), dtype=np.uint8)
    q8, _, _ = fastscan.quantize_luts(rng.normal(size=(3, m, 256)).astype(np.float32))
    blocks = fastscan.pack_blocks(codes)
    assert blocks.shape == (-(-len(codes) // 64), m, 64)
    ref = fastscan.video_max_u8_numpy(codes, q8, offsets, bits)  # 7 bits: a code's top bit ignored
    try:
        fastscan.set_simd(simd)
        out = np.full((3, 700), 7, np.uint16)
        fastscan.video_max_u8(blocks, q8, offsets, 0, 301, out, bits)  # two ranges, as two threads split them
        fastscan.video_max_u8(blocks, q8, offsets, 301, 700, out, bits)
        listed = np.array([0, 3, 4, 9, 10, 11, 350, 699])  # the funnel's second pass: listed videos only
        one = np.full(700, 7, np.uint16)
        fastscan.video_max_u8_videos(blocks, q8[2], offsets, listed, one, bits)
    finally:
        fastscan.set_simd(True)
    assert np.array_equal(out, ref)
    assert np.array_equal(one[listed], ref[2, listed]) and (np.delete(one, listed) == 7).all()
    a, b = offsets[0], offsets[1]  # by hand: video 0's best clip for query 1
    by_hand = max(sum(int(q8[1, j, int(codes[n, j]) % (1 << bits)]) for j in range(m)) for n in range(a, b))
    assert out[1, 0] == by_hand and out[0, 3] == 0 and out[0, 4] == 0


def test_the_block_layout_puts_clip_i_at_byte_2i_or_2i_minus_63_in_its_block():
    codes = np.arange(70, dtype=np.uint8)[:, None]  # m = 1: clip n's code is n
    blocks = fastscan.pack_blocks(codes)
    assert list(blocks[0, 0, :4]) == [0, 32, 1, 33] and blocks[0, 0, 63] == 63
    assert list(blocks[1, 0, :6]) == [64, 0, 65, 0, 66, 0] and blocks[1, 0, 10] == 69 and blocks[1, 0, 12] == 0


def test_byte_tables_are_within_half_a_step_per_sub_quantizer():
    rng = np.random.default_rng(0)
    luts = rng.normal(size=(4, 16, 256)).astype(np.float32)
    q8, scale, bias = fastscan.quantize_luts(luts)
    codes = rng.integers(0, 256, (1000, 16))
    j = np.arange(16)
    for i in range(4):
        exact = luts[i][j, codes].sum(1)
        approx = scale[i] * q8[i][j, codes].astype(np.int64).sum(1) + bias[i]
        assert np.abs(approx - exact).max() <= 16 * scale[i] / 2 + 1e-4
    assert q8.max() == 255 and (q8.min(-1) == 0).all()  # each table from 0, the widest one to 255


@pytest.mark.parametrize("cosine", [True, False])
def test_the_compiled_rescore_equals_the_retrievers_exact_scores(cosine: bool):
    index, protos = structured(300, d=40)  # d = 40: 16 + 16 in registers, 8 in the scalar tail
    retr = retriever(index, cosine)
    tokens, _ = queries(protos, b=3)
    q = tokens.numpy()
    videos = np.array([0, 5, 17, 299, 120])
    for i in range(3):
        got = fastscan.rescore_f16(index.arrays["h1"], q[i], index.offsets, videos, cosine)
        np.testing.assert_allclose(got, retr.exact_scores(q[i], videos), rtol=2e-6, atol=2e-6)
    with pytest.raises(ValueError, match="video 300 outside"):
        fastscan.rescore_f16(index.arrays["h1"], q[0], index.offsets, np.array([300]), cosine)


def test_a_batch_is_answered_as_each_query_alone_and_as_the_numba_loops_answer(tmp_path: Path):
    index, protos = structured(3000, seed=4)
    retr = retriever(index)
    tokens, mask = queries(protos, b=70, seed=5)  # 70: two passes of up to 64 queries
    stage = build_first_stage(retr, index, "scan", tmp_path, {"rescore": "150"})
    assert isinstance(stage, ScanFirstStage) and stage.loops.name == "compiled"
    s, v = stage.retrieve(Queries(tokens, mask), 50)
    for i in (0, 33, 64, 69):
        s1, v1 = stage.retrieve(Queries(tokens[i: i + 1], mask[i: i + 1]), 50)
        assert np.array_equal(v1[0], v[i]) and torch.equal(s1[0], s[i])
    numba = build_first_stage(retr, index, "scan", tmp_path, {"rescore": "150", "loops": "numba"})
    assert numba.loops.name == "numba"
    _, ref = ExactFirstStage(retr).retrieve(Queries(tokens, mask), 50)
    _, v_numba = numba.retrieve(Queries(tokens, mask), 50)
    got, base = recall(v, ref), recall(v_numba, ref)
    assert got >= 0.97 and got >= base - 0.01, (got, base)  # byte tables lose (almost) nothing here


def test_top_indices_finds_what_argpartition_finds():
    rng = np.random.default_rng(2)
    for n, r in ((100_000, 1000), (100_000, 5000), (30_000, 1000), (500, 100), (50, 50)):
        x = rng.normal(size=n).astype(np.float32)
        x[rng.integers(0, n, 20)] = -np.inf  # videos without clips
        assert np.array_equal(np.sort(top_indices(x, r)), np.sort(np.argpartition(-x, min(r, n) - 1)[:r]))


@pytest.mark.slow  # 6.6 s in a fresh-clone make test
def test_the_funnel_keeps_recall_and_is_kept_on_disk(tmp_path: Path):
    index, protos = structured(3000, seed=6)  # d = 32: m = 8 bytes, the coarse pass 4
    retr = retriever(index)
    tokens, mask = queries(protos, b=30, seed=7)
    _, ref = ExactFirstStage(retr).retrieve(Queries(tokens, mask), 50)
    one = build_first_stage(retr, index, "scan", tmp_path, {"rescore": "150", "coarse": "0"})
    funnel = build_first_stage(retr, index, "scan", tmp_path, {"rescore": "150", "coarse": "4", "refine": "600"})
    assert not one.funnel and funnel.funnel and funnel.coarse[0].shape == (2, 4, 256, 8)
    v_one = np.stack([one.retrieve(Queries(tokens[i: i + 1], mask[i: i + 1]), 50)[1][0] for i in range(30)])
    v_funnel = np.stack([funnel.retrieve(Queries(tokens[i: i + 1], mask[i: i + 1]), 50)[1][0] for i in range(30)])
    got, base = recall(v_funnel, ref), recall(v_one, ref)
    assert got >= 0.97 and got >= base - 0.01, (got, base)  # the coarse top 600 holds what the codes would pick
    _, v_batch = funnel.retrieve(Queries(tokens, mask), 50)  # a batch of 30: one pass of the full codes
    assert np.array_equal(v_batch, np.stack([one.retrieve(Queries(tokens, mask), 50)[1]])[0])
    again = build_first_stage(retr, index, "scan", tmp_path, {"rescore": "150", "coarse": "4", "refine": "600"})
    assert again.funnel and np.array_equal(again.coarse[1][0], funnel.coarse[1][0])  # loaded, not built anew
    with pytest.raises(FirstStageError, match="coarse=8 must be below m=8"):
        build_first_stage(retr, index, "scan", tmp_path, {"coarse": "8"})


@pytest.mark.slow  # 9 s with a generation running beside it
def test_a_saved_stage_keeps_its_packed_blocks_and_a_load_reads_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    index, protos = structured(2000, seed=8)
    retr = retriever(index)
    tokens, mask = queries(protos, b=8, seed=9)
    built = build_first_stage(retr, index, "scan", tmp_path, {"rescore": "100", "coarse": "4"})
    _, v_built = built.retrieve(Queries(tokens, mask), 20)
    folder = built.folder
    for prefix, codes in (("", built.codes), ("coarse_", built.coarse[1])):
        for s, c in enumerate(codes):
            assert np.array_equal(np.load(folder / f"{prefix}blocks_s{s}.npy"), fastscan.pack_blocks(c))

    def no_packing(codes: np.ndarray) -> np.ndarray:
        raise AssertionError("packed again at load")

    monkeypatch.setattr(fastscan, "pack_blocks", no_packing)
    loaded = build_first_stage(retr, index, "scan", tmp_path, {"rescore": "100", "coarse": "4"})
    assert loaded.folder == folder and np.array_equal(loaded.retrieve(Queries(tokens, mask), 20)[1], v_built)
    monkeypatch.undo()
    for p in folder.glob("*blocks_s*.npy"):  # a folder saved before the blocks were stored: packed at load
        p.unlink()
    older = build_first_stage(retr, index, "scan", tmp_path, {"rescore": "100", "coarse": "4"})
    assert older.folder == folder and np.array_equal(older.retrieve(Queries(tokens, mask), 20)[1], v_built)
    layout = json.loads((folder / "manifest.json").read_text())["layout"]
    built.save(folder, layout)
    np.save(folder / "blocks_s1.npy", np.zeros((3, 8, 64), np.uint8))  # the wrong number of blocks
    with pytest.raises(FirstStageError, match=r"blocks_s1.npy: uint8 blocks of shape \(3, 8, 64\), expected uint8 "
                                              r"of shape \(\d+, 8, 64\)"):
        ScanFirstStage.load(folder, retr, layout)


def test_seven_bit_codes_keep_recall_and_their_manifest_and_answer_as_the_numba_loops(tmp_path: Path):
    index, protos = structured(3000, seed=10)  # d = 32: m = 8 sub-quantizers of 4 dimensions
    retr = retriever(index)
    tokens, mask = queries(protos, b=20, seed=11)
    _, ref = ExactFirstStage(retr).retrieve(Queries(tokens, mask), 50)
    eight = build_first_stage(retr, index, "scan", tmp_path, {"rescore": "150"})
    seven = build_first_stage(retr, index, "scan", tmp_path, {"rescore": "150", "bits": "7"})
    assert seven.folder != eight.folder and seven.bits == 7 and seven.codebooks.shape == (2, 8, 128, 4)
    assert max(int(c.max()) for c in seven.codes) <= 127
    assert json.loads((seven.folder / "manifest.json").read_text())["bits"] == 7
    s7, v7 = seven.retrieve(Queries(tokens, mask), 50)
    got, base = recall(v7, ref), recall(eight.retrieve(Queries(tokens, mask), 50)[1], ref)
    assert got >= 0.95 and got >= base - 0.02, (got, base)  # 128 centroids lose (almost) nothing here
    for i in (0, 19):  # a batch is answered as each query alone
        s1, v1 = seven.retrieve(Queries(tokens[i: i + 1], mask[i: i + 1]), 50)
        assert np.array_equal(v1[0], v7[i]) and torch.equal(s1[0], s7[i])
    numba = build_first_stage(retr, index, "scan", tmp_path, {"rescore": "150", "bits": "7", "loops": "numba"})
    assert numba.loops.name == "numba" and numba.folder == seven.folder  # loaded: the same codes
    assert recall(numba.retrieve(Queries(tokens, mask), 50)[1], ref) >= got - 0.02
    with pytest.raises(FirstStageError, match="bits=6; known: 8"):
        build_first_stage(retr, index, "scan", tmp_path, {"bits": "6"})
    man = json.loads((seven.folder / "manifest.json").read_text())
    (seven.folder / "manifest.json").write_text(json.dumps({**man, "bits": 8}))  # codebooks of 128 said to be 256
    said = r"codebooks\.npy: shape \(2, 8, 128, 4\), the manifest says \(2, 8, 256, 4\)"
    with pytest.raises(FirstStageError, match=said):
        build_first_stage(retr, index, "scan", tmp_path, {"bits": "7"})
    (seven.folder / "manifest.json").write_text(json.dumps({**man, "bits": 9}))
    with pytest.raises(FirstStageError, match="bits must be 7 or 8; delete the folder"):
        build_first_stage(retr, index, "scan", tmp_path, {"bits": "7"})


@pytest.mark.slow  # 5.3-9.5 s in fresh-clone make test runs (subprocesses importing torch)
def test_the_simd_paths_follow_the_environment() -> None:
    """``MOMENTSEARCH_SIMD`` sets a process's paths: no-amx keeps the int8 pass on VNNI (and default_batch at 12),
    none the portable loops; an unknown value is an error that names the choices."""
    import os
    import subprocess
    import sys

    code = ("from momentsearch.search import fastscan; from momentsearch.search.first_stage.scan_rows8 import "
            "default_batch; p = fastscan.simd_paths(); print(p['amx'], p['vbmi'], default_batch())")

    def run(value: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**os.environ, "MOMENTSEARCH_SIMD": value})

    none = run("none")
    assert none.returncode == 0 and none.stdout.split() == ["False", "False", str(1 << 30)], none.stderr
    no_amx = run("no-amx")
    vnni = fastscan.simd_paths()["vnni"]
    assert no_amx.stdout.split()[0] == "False" and no_amx.stdout.split()[2] == str(12 if vnni else 1 << 30)
    bad = run("fast")
    assert bad.returncode != 0 and "MOMENTSEARCH_SIMD='fast': choose one of all, no-amx, none" in bad.stderr
