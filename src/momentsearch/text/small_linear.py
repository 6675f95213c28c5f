"""A float32 linear layer for a few rows (``_linear.c``, built by ``pip install .``), and its NumPy twin.

A served query is one sentence of about 10 tokens. At that size torch's ``F.linear`` (MKL) reaches about 55-70
GFLOP/s on this project's 2-core machine, where one AVX-512 core can do about 110: it packs the weight on every
call and the product is too small to split well. :class:`SmallLinear` packs a weight once (``W^T`` in panels of
32 columns) and multiplies rows by it in register tiles of 12 rows x 32 columns, on the calling thread;
:class:`~momentsearch.text.bert_fast.FastBert` uses it for up to :data:`MAX_ROWS` rows. The same function as
``F.linear`` up to float32 rounding: each output sums its K products in order in one float32 FMA chain, where MKL
sums in blocks (tested against a float64 product: within (K + 1) 2^-24 of the sum of the absolute products).

The packed weights are a second copy beside torch's (42.5 MB for MiniLM's 36 linear layers).

:func:`available` is False without the compiled module (no C compiler at install), on a CPU without AVX-512, or
with ``MOMENTSEARCH_SIMD=none``; callers then keep ``F.linear``.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import numpy as np
import torch

NR = 32  # columns a panel holds
# FastBert sends a product of more rows than this to torch's F.linear: from about 20 rows MKL, splitting it over
# the 2 cores, is as fast (12 x 384 x 1,536: 130 us here against MKL's 212; 24 rows: 247 against 213)
MAX_ROWS = 24

try:
    _ext: Any = importlib.import_module("momentsearch.text._linear")
except ImportError:  # pragma: no cover - a build without a C compiler
    _ext = None

_on = _ext is not None and bool(_ext.set_simd(os.environ.get("MOMENTSEARCH_SIMD", "").strip().lower() != "none"))


def available() -> bool:
    """Whether :class:`SmallLinear` can run here (the module built, AVX-512 present, MOMENTSEARCH_SIMD not none)."""
    return _on


def pack(weight: np.ndarray, bias: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """(N, K) weight and (N,) bias -> panels (ceil(N/32), K, 32) of ``W^T`` and the bias padded to a multiple of
    32, zeros past N (what ``_linear.linear`` reads)."""
    n, k = weight.shape
    p = -(-n // NR)
    w = np.zeros((p * NR, k), np.float32)
    w[:n] = weight
    b = np.zeros(p * NR, np.float32)
    if bias is not None:
        b[:n] = bias
    return np.ascontiguousarray(w.reshape(p, NR, k).transpose(0, 2, 1)), b


def reference(x: np.ndarray, panels: np.ndarray, bias: np.ndarray, n: int) -> np.ndarray:
    """The NumPy twin of ``_linear.linear`` on packed operands, in float64: ``x W^T + b`` for (M, K) rows ``x``."""
    w = panels.transpose(0, 2, 1).reshape(-1, panels.shape[1])[:n].astype(np.float64)
    return x.astype(np.float64) @ w.T + bias[:n]


class SmallLinear:
    """``F.linear(x, weight, bias)`` for float32 ``x`` (..., K), the weight packed once (fastest for a few rows:
    :data:`MAX_ROWS`). Raises where :func:`available` is False; check it first."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None):
        if not available():
            raise RuntimeError("the compiled small linear layer is not available here (small_linear.available())")
        self.n, self.k = weight.shape
        self.panels, self.bias = pack(weight.detach().float().numpy(),
                                      None if bias is None else bias.detach().float().numpy())

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != torch.float32 or x.shape[-1] != self.k:
            raise ValueError(f"expected float32 rows of {self.k} values, got {x.dtype} {tuple(x.shape)}")
        rows = x.reshape(-1, self.k).contiguous().numpy()
        m = rows.shape[0]
        if m == 0:
            return x.new_empty(*x.shape[:-1], self.n)
        out = np.empty((m, self.n), np.float32)
        _ext.linear(rows, m, self.k, self.panels, self.bias, self.n, out, 0, self.panels.shape[0])
        return torch.from_numpy(out).view(*x.shape[:-1], self.n)
