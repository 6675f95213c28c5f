"""Dropout whose masks are hashed from a seed (``_dropout.c``, built by ``pip install .``), and its torch twin.

Training chooses the masks with :class:`~momentsearch.training.config.TrainConfig`'s ``dropout_masks``:

* ``torch`` (the default): torch's own dropout. On a CPU that is not Intel its ``bernoulli_`` draws each mask
  element serially through mt19937 (about 9 ns an element on this project's AMD EPYC), and attention dropout sends
  ``scaled_dot_product_attention`` to its unfused path: a third of a MINUTE localizer epoch went to those masks.
* ``hashed``: element i of a call is kept when an integer hash of (seed, i) clears ``round(p 2^32)``, the seed one
  draw from torch's global generator per call (so ``torch.manual_seed`` fixes a run, and a resumed run draws as an
  uninterrupted one). The same Bernoulli(1 - p) masks in distribution, not torch's numbers; the same numbers on any
  CPU and on CUDA (torch's own differ between Intel and AMD). The backward pass recomputes the mask from the seed.
  Attention then runs as softmax(q k^T / sqrt(d_h) + mask), dropout, times v, in torch ops.

The hash, in ``_dropout.c``'s words: h = f(f(f(lo ^ k0) ^ k1) ^ hi), f = lowbias32, lo and hi the halves of i, k0
and k1 those of splitmix64(seed). :func:`keep_mask` is the same hash in int64 tensor ops, for CUDA, other dtypes, and a
build without a C compiler (:func:`compiled` says which runs here).
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn

MODES = ("torch", "hashed")
_M32 = 0xFFFFFFFF

try:
    _ext: Any = importlib.import_module("momentsearch.models._dropout")
except ImportError:  # pragma: no cover - a build without a C compiler
    _ext = None
if _ext is not None:
    _ext.set_simd("none" if os.environ.get("MOMENTSEARCH_SIMD", "").strip().lower() == "none" else "all")

_mode = "torch"


def compiled() -> bool:
    """Whether float32 CPU tensors take the compiled loop (else the torch twin: the same masks, slower)."""
    return _ext is not None


def masks() -> str:
    """The dropout masks in force: ``torch`` or ``hashed``."""
    return _mode


@contextlib.contextmanager
def dropout_masks(mode: str) -> Iterator[None]:
    """Within the block, this module's layers draw ``mode`` masks (``torch`` or ``hashed``)."""
    global _mode
    if mode not in MODES:
        raise ValueError(f"dropout_masks must be one of {MODES}, got {mode!r}")
    before, _mode = _mode, mode
    try:
        yield
    finally:
        _mode = before


def threshold(p: float) -> int:
    """The 32-bit threshold an element's hash must reach to be kept: round(p 2^32), at most 2^32 - 1."""
    return min(_M32, round(p * 2.0**32))


def keys(seed: int) -> tuple[int, int]:
    """(k0, k1): the low and high 32 bits of splitmix64(seed)."""
    m64 = 0xFFFFFFFFFFFFFFFF
    z = (seed + 0x9E3779B97F4A7C15) & m64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m64
    z ^= z >> 31
    return z & _M32, z >> 32


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """(x * c) mod 2^32 for int64 x in [0, 2^32), without overflowing int64 (16-bit halves of c)."""
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & _M32


def _lowbias32(x: torch.Tensor) -> torch.Tensor:
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def keep_mask(n: int, seed: int, p: float, start: int = 0, device: torch.device | None = None) -> torch.Tensor:
    """(n,) bool: which of elements start..start+n-1 a call with ``seed`` keeps (the torch twin of ``_dropout.c``)."""
    i = torch.arange(start, start + n, dtype=torch.int64, device=device)
    k0, k1 = keys(seed & 0xFFFFFFFFFFFFFFFF)
    h = _lowbias32(_lowbias32(_lowbias32((i & _M32) ^ k0) ^ k1) ^ (i >> 32))
    return h >= threshold(p)


def _apply(x: torch.Tensor, seed: int, p: float) -> torch.Tensor:
    scale = 1.0 / (1.0 - p)
    if _ext is not None and x.dtype == torch.float32 and x.device.type == "cpu":
        x = x.detach().contiguous()
        out = torch.empty_like(x)
        _ext.apply(x.numpy(), out.numpy(), 0, seed, threshold(p), scale)
        return out
    keep = keep_mask(x.numel(), seed, p, device=x.device).view(x.shape)
    return torch.where(keep, x * scale, torch.zeros((), dtype=x.dtype, device=x.device))


class _HashedDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, seed: int, p: float) -> torch.Tensor:  # type: ignore[override]
        ctx.seed, ctx.p = seed, p
        return _apply(x, seed, p)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:  # type: ignore[override]
        return _apply(grad, ctx.seed, ctx.p), None, None  # the mask recomputed from the seed


def draw_seed() -> int:
    """One 64-bit seed from torch's global CPU generator."""
    return int(torch.randint(-(2**63), 2**63 - 1, (), dtype=torch.int64)) & 0xFFFFFFFFFFFFFFFF


def hashed_dropout(x: torch.Tensor, p: float, seed: int | None = None) -> torch.Tensor:
    """Dropout of x with a hashed mask: x / (1 - p) where kept, 0 elsewhere (a new seed drawn when none is given)."""
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout p must lie in [0, 1), got {p}")
    if p == 0.0:
        return x
    return _HashedDropout.apply(x, draw_seed() if seed is None else seed, p)


class Dropout(nn.Dropout):
    """``nn.Dropout`` (no state of its own, so checkpoints are unchanged) drawing the masks in force."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if _mode == "hashed" and self.training and self.p > 0 and not self.inplace:
            return hashed_dropout(x, self.p)
        return super().forward(x)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, p: float,
              training: bool) -> torch.Tensor:
    """Scaled dot-product attention (N, H, L, d_h) with dropout p on the weights in training. ``mask``: bool,
    True = attend, or additive float, broadcast to (N, H, Lq, Lk). With torch masks (or no dropout) this is
    ``scaled_dot_product_attention``; with hashed masks the same function in torch ops."""
    if not training or p == 0.0 or _mode != "hashed":
        return nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p if training else 0.0)
    s = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    return torch.matmul(hashed_dropout(s.softmax(-1), p), v)


def additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """An ``nn.MultiheadAttention`` mask, bool True = not attended or additive float, as an additive one."""
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, float("-inf"))
    return mask.to(dtype)


def heads_qkv(x: torch.Tensor, y: torch.Tensor | None, weight: torch.Tensor, bias: torch.Tensor | None,
              heads: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q from x (N, Lx, d), k and v from y (N, Ly, d) — from x itself when y is None, projected once — through one
    packed (3d, d) projection, each split into heads: (N, H, L, d / H)."""
    n, _, d = x.shape
    if y is None:
        q, k, v = nn.functional.linear(x, weight, bias).chunk(3, dim=-1)
    else:
        q = nn.functional.linear(x, weight[:d], None if bias is None else bias[:d])
        k, v = nn.functional.linear(y, weight[d:], None if bias is None else bias[d:]).chunk(2, dim=-1)
    return tuple(t.reshape(n, -1, heads, d // heads).transpose(1, 2) for t in (q, k, v))  # type: ignore[return-value]


def multihead_attention(mha: nn.MultiheadAttention, x: torch.Tensor, y: torch.Tensor,
                        key_padding_mask: torch.Tensor | None = None,
                        attn_mask: torch.Tensor | None = None) -> torch.Tensor:
    """``mha(x, y, y, key_padding_mask=..., attn_mask=..., need_weights=False)[0]`` for a batch-first
    ``nn.MultiheadAttention`` with packed projections, drawing the masks in force."""
    if not (mha.training and mha.dropout > 0 and _mode == "hashed"):
        return mha(x, y, y, key_padding_mask=key_padding_mask, attn_mask=attn_mask, need_weights=False)[0]
    if not mha.batch_first or mha.in_proj_weight is None:
        raise ValueError("hashed dropout masks need a batch_first nn.MultiheadAttention with packed projections")
    n, lx, d = x.shape
    h = mha.num_heads
    q, k, v = heads_qkv(x, None if x is y else y, mha.in_proj_weight, mha.in_proj_bias, h)
    mask = None if key_padding_mask is None else additive(key_padding_mask, q.dtype)[:, None, None, :]
    if attn_mask is not None:  # (Lx, Ly) or (N * H, Lx, Ly)
        extra = additive(attn_mask, q.dtype)
        extra = extra.reshape(n, h, lx, -1) if extra.dim() == 3 else extra
        mask = extra if mask is None else mask + extra
    out = attention(q, k, v, mask, mha.dropout, True).transpose(1, 2).reshape(n, lx, d)
    return mha.out_proj(out)


class TransformerLayer(nn.TransformerEncoderLayer):
    """``nn.TransformerEncoderLayer`` (the same parameters and state dict; its fused path at inference) whose
    dropouts, attention's included, draw the masks in force."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        p = self.dropout.p
        self.dropout, self.dropout1, self.dropout2 = Dropout(p), Dropout(p), Dropout(p)

    def _sa_block(self, x: torch.Tensor, attn_mask: torch.Tensor | None, key_padding_mask: torch.Tensor | None,
                  is_causal: bool = False) -> torch.Tensor:
        if _mode != "hashed" or not self.training or is_causal:
            return super()._sa_block(x, attn_mask, key_padding_mask, is_causal)
        return self.dropout1(multihead_attention(self.self_attn, x, x, key_padding_mask, attn_mask))
