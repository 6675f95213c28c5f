"""The compiled linear layer for a few rows (``text/_linear.c``): equal to a float64 NumPy product up to float32
rounding for every row count up to 48 (tiles of 12 rows, sized evenly) and for 100 and column counts that are not a
multiple of the 32-column panel; a hand-computed product; clear errors; MOMENTSEARCH_SIMD=none turns it off.
MiniLM's forward through it is tested in test_bert_fast.py."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tests.conftest import HAS_AVX512

from momentsearch.text import small_linear
from momentsearch.text.small_linear import SmallLinear, pack, reference

# the kernel is AVX-512 only: on a CPU without it SmallLinear refuses and callers keep F.linear
needs_avx512 = pytest.mark.skipif(not HAS_AVX512, reason="this CPU lacks AVX-512F: the small linear layer has "
                                  "no portable path; F.linear runs instead (test_bert_fast.py)")


def test_the_extension_is_built_and_this_cpu_takes_it():
    # make test needs it: pip install builds it where a C compiler is (setup.py); it runs where the CPU has AVX-512
    from momentsearch.text import _linear  # noqa: F401  (an ImportError here: the build failed)

    assert small_linear.available() == HAS_AVX512, "the small linear layer must run exactly where AVX-512F is"
    if not HAS_AVX512:
        with pytest.raises(RuntimeError, match=r"not available here \(small_linear.available\(\)\)"):
            SmallLinear(torch.ones(2, 2), None)


@needs_avx512
def test_a_product_by_hand():
    w = torch.tensor([[3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    b = torch.tensor([0.5, 0.0, -1.0])
    got = SmallLinear(w, b)(torch.tensor([[1.0, 2.0], [-1.0, 0.5]]))
    assert got.tolist() == [[11.5, 17.0, 22.0], [-0.5, -2.0, -4.0]]  # 1*3 + 2*4 + 0.5 = 11.5; -7 + 4 - 1 = -4
    assert SmallLinear(w, None)(torch.tensor([[1.0, 2.0]])).tolist() == [[11.0, 17.0, 23.0]]


@needs_avx512
@pytest.mark.parametrize("k,n", [(384, 1536), (1536, 384), (100, 50), (7, 33), (1, 1)])
def test_equals_numpy_for_every_row_count(k: int, n: int):
    rng = np.random.default_rng(k * 1000 + n)
    w = rng.standard_normal((n, k)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    lin = SmallLinear(torch.from_numpy(w), torch.from_numpy(b))
    panels, bias = pack(w, b)
    assert panels.shape == (-(-n // 32), k, 32) and bias.shape == (panels.shape[0] * 32,)
    for m in [*range(1, 49), 100]:  # 1-12 rows: one tile; 13-24: two of 6-12; ... 48: four of 12; 100: nine
        x = rng.standard_normal((m, k)).astype(np.float32)
        got = lin(torch.from_numpy(x)).numpy()
        want = reference(x, panels, bias, n)
        # float32 rounding of a K-term sum: within K * 2^-24 of the sum of the absolute products
        bound = (np.abs(x).astype(np.float64) @ np.abs(w.T) + np.abs(b)) * (k + 1) * 2.0 ** -24
        assert got.shape == (m, n) and np.all(np.abs(got - want) <= bound + 1e-30), m
    x3 = torch.from_numpy(rng.standard_normal((2, 3, k)).astype(np.float32))  # (batch, tokens, K) keeps its shape
    assert torch.allclose(lin(x3), F.linear(x3, torch.from_numpy(w), torch.from_numpy(b)), rtol=1e-5, atol=1e-4)


@needs_avx512
def test_bad_input_gets_a_clear_error():
    lin = SmallLinear(torch.ones(4, 3), torch.zeros(4))
    with pytest.raises(ValueError, match="expected float32 rows of 3 values"):
        lin(torch.ones(2, 5))
    with pytest.raises(ValueError, match="expected float32"):
        lin(torch.ones(2, 3, dtype=torch.float64))
    assert lin(torch.ones(0, 3)).shape == (0, 4)  # no rows: no call
    from momentsearch.text import _linear

    x = np.ones((2, 3), np.float32)
    out = np.empty((1, 4), np.float32)  # too small for 2 rows
    with pytest.raises(ValueError, match="out holds 16 bytes, needs 32"):
        _linear.linear(x, 2, 3, lin.panels, lin.bias, 4, out, 0, 1)
    with pytest.raises(ValueError, match="p0 <= p1"):
        _linear.linear(x, 2, 3, lin.panels, lin.bias, 4, np.empty((2, 4), np.float32), 0, 2)


def test_simd_none_turns_it_off():
    code = "from momentsearch.text import small_linear as s; print(s.available())"
    env = {**os.environ, "MOMENTSEARCH_SIMD": "none"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
