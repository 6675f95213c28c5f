"""Hashed dropout masks (models/_dropout.c and its torch twin): the same bits on every path, Bernoulli(1 - p) masks
that do not repeat across seeds or neighbours, a backward pass with the forward's mask, layers equal to torch's
when no element is dropped, and training that resumes exactly."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from tests.conftest import CPU_FLAGS
from tests.test_xml_training import tiny_cfg
from torch import nn

from momentsearch.models import dropout as D
from momentsearch.models.layers import AttentionLayer, transformer_layer
from momentsearch.models.xml.network import CrossAttention

M32 = 0xFFFFFFFF


def lowbias32_int(x: int) -> int:
    """Wellons' lowbias32 in plain Python integers: a third implementation of the hash, by its definition."""
    x ^= x >> 16
    x = (x * 0x7FEB352D) & M32
    x ^= x >> 15
    x = (x * 0x846CA68B) & M32
    return x ^ (x >> 16)


def splitmix64_int(z: int) -> int:
    m = 2**64 - 1
    z = (z + 0x9E3779B97F4A7C15) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def kept_int(i: int, seed: int, p: float) -> bool:
    key = splitmix64_int(seed)
    k0, k1 = key & M32, key >> 32
    return lowbias32_int(lowbias32_int(lowbias32_int((i & M32) ^ k0) ^ k1) ^ (i >> 32)) >= round(p * 2**32)


def test_hash_by_its_definition() -> None:
    assert lowbias32_int(0) == 0 and lowbias32_int(1) == 0x688990C0  # 1 -> 0x10001 -> ... (worked through by hand once)
    seed = 0x0123456789ABCDEF
    starts = [0, 2**32 - 3]  # the second crosses into hi = 1
    for start in starts:
        twin = D.keep_mask(6, seed, 0.3, start=start).tolist()
        assert twin == [kept_int(start + j, seed, 0.3) for j in range(6)]
    assert D.threshold(0.1) == 429496730 and D.threshold(0.9999999999) == M32
    assert splitmix64_int(0) == 0xE220A8397B1DCDAF  # splitmix64's first output from state 0 (Vigna's reference)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_compiled_loop_equals_the_twin_bit_for_bit(p: float) -> None:
    assert D.compiled(), "the compiled loop is not built: pip install . (or python setup.py build_ext --inplace)"
    x = torch.randn(3, 1001)  # not a multiple of any vector width
    x[0, :8] = -x[0, :8].abs()  # dropped negatives are +0.0, as in the twin, not -0.0
    avx512 = {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= CPU_FLAGS  # what _dropout.c asks of the CPU
    have = "avx512" if avx512 else "avx2" if "avx2" in CPU_FLAGS else "plain"
    paths = []
    try:
        for want in ("none", "avx2", "all"):  # each loop this CPU has: the same bits
            paths.append(D._ext.set_simd(want))
            for seed in (1, 2**64 - 1, 0x9E3779B97F4A7C15):
                keep = D.keep_mask(x.numel(), seed, p).view(x.shape)
                twin = torch.where(keep, x * (1.0 / (1.0 - p)), torch.zeros(()))
                got = D._apply(x, seed, p)
                assert torch.equal(got.view(torch.int32), twin.view(torch.int32)), (want, seed)
            for start in (2**32 - 1500, 2**33 - 7):  # runs crossing into the next high half of the index
                out = torch.empty(3003)
                D._ext.apply(x.view(-1).numpy(), out.numpy(), start, 7, D.threshold(p), 1.0)
                keep = D.keep_mask(3003, 7, p, start=start)
                assert torch.equal(out, torch.where(keep, x.view(-1), torch.zeros(()))), (want, start)
    finally:
        D._ext.set_simd("all")
    assert paths[0] == "plain" and paths[-1] == have and paths[1] == ("plain" if have == "plain" else "avx2")
    with pytest.raises(ValueError, match="one length"):
        D._ext.apply(torch.ones(5).numpy(), torch.empty(4).numpy(), 0, 7, 1, 1.0)
    with pytest.raises(ValueError, match="below 2\\^63"):  # an index past int64 is refused, not wrapped
        D._ext.apply(torch.ones(4).numpy(), torch.empty(4).numpy(), 2**63 - 2, 7, 1, 1.0)
    with pytest.raises(ValueError, match="'none', 'avx2', 'all'"):
        D._ext.set_simd("avx")


def test_masks_are_bernoulli_and_do_not_repeat() -> None:
    n, p = 1_000_000, 0.1
    a = D.keep_mask(n, 12345, p).numpy()
    b = D.keep_mask(n, 12346, p).numpy()  # the next seed
    se = np.sqrt(p * (1 - p) / n)  # 3e-4
    assert abs(a.mean() - (1 - p)) < 5 * se
    # neighbours and the next seed's mask independent: P(both kept) = (1 - p)^2 within 5 standard errors
    both = (1 - p) ** 2
    se2 = np.sqrt(both * (1 - both) / n)
    for lag in (1, 16, 1000):
        assert abs((a[:-lag] & a[lag:]).mean() - both) < 5 * se2, lag
    for shift in (0, 1):
        assert abs((a[shift:] & b[: n - shift]).mean() - both) < 5 * se2, shift


def test_backward_uses_the_forwards_mask_and_p_is_checked() -> None:
    x = torch.rand(200, 30) + 0.5
    x.requires_grad_(True)
    y = D.hashed_dropout(x, 0.3, seed=99)
    y.backward(torch.full_like(y, 2.0))
    kept = y.detach() != 0
    assert 0.6 < kept.float().mean() < 0.8
    assert torch.allclose(x.grad, kept * (2.0 / 0.7))
    assert torch.allclose(y.detach(), x.detach() * kept / 0.7)
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        D.hashed_dropout(x, 1.0)
    with pytest.raises(ValueError, match="dropout_masks must be one of"):
        with D.dropout_masks("bernoulli"):
            pass
    with pytest.raises(ValueError, match="dropout_masks must be one of"):
        dataclasses.replace(tiny_cfg(Path("b"), Path("o"), 1), dropout_masks="bernoulli")


def test_dropout_module_draws_the_masks_in_force_from_torchs_seed() -> None:
    drop = D.Dropout(0.5).train()
    x = torch.ones(4000)

    def draw(mode: str) -> torch.Tensor:
        torch.manual_seed(0)
        with D.dropout_masks(mode):
            return drop(x)

    hashed, torch_masks = draw("hashed"), draw("torch")
    assert torch.equal(hashed, draw("hashed")) and D.masks() == "torch"  # the seed fixes it; the mode is restored
    assert set(hashed.unique().tolist()) == {0.0, 2.0} and not torch.equal(hashed, torch_masks)
    assert torch.equal(drop.eval()(x), x)


def _zero_dropout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hashed masks that keep every element: the hashed path's arithmetic alone."""
    monkeypatch.setattr(D, "hashed_dropout", lambda x, p, seed=None: x)


def test_hashed_layers_compute_torchs_function(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(0)
    x, y = torch.randn(3, 7, 16), torch.randn(3, 5, 16)
    pad_x = torch.tensor([[False] * 7, [False] * 4 + [True] * 3, [False] + [True] * 6])
    pad_y = torch.tensor([[False] * 5, [False] * 2 + [True] * 3, [False] * 4 + [True]])
    layers = [(transformer_layer(16, 4, 0.1), lambda m: m(x, src_key_padding_mask=pad_x)),
              (AttentionLayer(16, 4, 0.1), lambda m: m(x, src_key_padding_mask=pad_x)),
              (CrossAttention(16, 4, 0.1, projection=True), lambda m: m(x, y, pad_y)),
              (CrossAttention(16, 4, 0.1, projection=False), lambda m: m(x, y, pad_y))]
    _zero_dropout(monkeypatch)
    for layer, call in layers:
        layer.train()
        with D.dropout_masks("hashed"):
            hashed = call(layer)
        for m in layer.modules():  # torch's path with nothing dropped
            if isinstance(m, nn.Dropout):
                m.p = 0.0
            if isinstance(m, nn.MultiheadAttention):
                m.dropout = 0.0
            if hasattr(m, "heads") and isinstance(getattr(m, "dropout", None), float):
                m.dropout = 0.0
        reference = call(layer)
        assert torch.allclose(hashed[~pad_x], reference[~pad_x], atol=1e-5), type(layer).__name__


def test_training_keeps_features_in_memory_read_only(tiny_benchmark: Path) -> None:
    from momentsearch.data.dataset import DatasetConfig, open_dataset

    store = open_dataset(DatasetConfig(benchmark=str(tiny_benchmark))).features()
    vid = store.visual.keys()[0]
    first = store.get(vid)
    store.keep_in_memory(first[0].nbytes + first[1].nbytes)  # room for exactly this video
    kept = store.get(vid)
    assert store.get(vid)[0] is kept[0] and not kept[0].flags.writeable
    assert np.array_equal(kept[0], first[0]) and np.array_equal(kept[1], first[1])
    other = store.visual.keys()[1]
    assert store.get(other)[0] is not store.get(other)[0]  # past the budget: read each time, as before
    store.keep_in_memory(0)
    assert store.get(vid)[0] is not store.get(vid)[0]


def test_torch_masks_are_torchs_own_layers_bit_for_bit() -> None:
    """Under the default masks the layers draw and compute as torch's: runs made before hashed masks existed
    resume and continue unchanged."""
    torch.manual_seed(0)
    ours = transformer_layer(16, 4, 0.1).train()
    theirs = nn.TransformerEncoderLayer(16, 4, dim_feedforward=16, dropout=0.1, batch_first=True).train()
    theirs.load_state_dict(ours.state_dict())
    assert list(ours.state_dict()) == list(theirs.state_dict())
    x = torch.randn(3, 7, 16)
    pad = torch.tensor([[False] * 7, [False] * 4 + [True] * 3, [False] + [True] * 6])
    outs = []
    for layer in (ours, theirs):
        torch.manual_seed(1)
        outs.append(layer(x, src_key_padding_mask=pad))
    assert D.masks() == "torch" and torch.equal(outs[0], outs[1])
    torch.manual_seed(2)
    a = D.Dropout(0.3).train()(x)
    torch.manual_seed(2)
    assert torch.equal(a, nn.Dropout(0.3).train()(x))
