"""Layers and batch plumbing that more than one family uses (XML, MINUTE): defined once here."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import fields, replace
from typing import Any, TypeVar

import torch
from torch import nn

from momentsearch.models.dropout import Dropout, TransformerLayer, attention, heads_qkv

NEG_INF = -1e10  # fill for padded positions before a softmax or a max

T = TypeVar("T", bound="TensorBatch")


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """The model in eval mode inside the block (indexing, mining), in the mode it had before after it."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def check_input_dims(cfg: Any) -> None:
    """A network is built from a config whose input dims are set (the family's build sets them)."""
    if cfg.visual_dim <= 0 or cfg.query_dim <= 0:
        raise ValueError(f"{type(cfg).__name__}.visual_dim and query_dim must be set (> 0); use cfg.with_inputs(...)")


class LinearLayer(nn.Sequential):
    """LayerNorm -> Dropout -> Linear -> ReLU (XML's input projection)."""

    def __init__(self, d_in: int, d_out: int, dropout: float):
        super().__init__(nn.LayerNorm(d_in), Dropout(dropout), nn.Linear(d_in, d_out), nn.ReLU())


class PositionalEncoding(nn.Module):
    """Trainable position embeddings added to (N, T, d), then LayerNorm and dropout."""

    def __init__(self, max_len: int, d: int, dropout: float):
        super().__init__()
        self.emb = nn.Embedding(max_len, d)
        self.norm = nn.LayerNorm(d)
        self.drop = Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] > self.emb.num_embeddings:
            raise ValueError(f"sequence of {x.shape[1]} exceeds max length {self.emb.num_embeddings}")
        pos = torch.arange(x.shape[1], device=x.device)
        return self.drop(self.norm(x + self.emb(pos)[None]))


def transformer_layer(d: int, heads: int, dropout: float) -> nn.TransformerEncoderLayer:
    return TransformerLayer(d, heads, dim_feedforward=d, dropout=dropout, batch_first=True)


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention of x (N, Lx, d) over y (N, Ly, d) (over x itself when y is None),
    keys where ``y_pad`` (N, Ly) is True masked out; dropout on the attention weights. The q, k, v
    projections are one (3d, d) weight (self-attention projects x once); the output projection is
    optional (``output``)."""

    def __init__(self, d: int, heads: int, dropout: float, output: bool = True):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.in_proj = nn.Linear(d, 3 * d)
        self.out_proj = nn.Linear(d, d) if output else None

    def forward(self, x: torch.Tensor, y: torch.Tensor | None = None, y_pad: torch.Tensor | None = None
                ) -> torch.Tensor:
        n, lx, d = x.shape
        q, k, v = heads_qkv(x, y, self.in_proj.weight, self.in_proj.bias, self.heads)
        mask = None if y_pad is None else ~y_pad[:, None, None, :]  # (N, 1, 1, Ly) True = attend
        out = attention(q, k, v, mask, self.dropout, self.training)
        out = out.transpose(1, 2).reshape(n, lx, d)
        return out if self.out_proj is None else self.out_proj(out)


class AttentionLayer(nn.Module):
    """Self-attention, a dense layer, dropout, then LayerNorm of the residual sum: BERT's attention
    block without its feed-forward block, XML's encoder layer in Lei et al.'s code. Called like
    ``nn.TransformerEncoderLayer``: ``layer(x, src_key_padding_mask=pad)``, pad (N, L) True = padding."""

    def __init__(self, d: int, heads: int, dropout: float):
        super().__init__()
        self.att = MultiHeadAttention(d, heads, dropout)
        self.drop = Dropout(dropout)
        self.norm = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.norm(x + self.drop(self.att(x, y_pad=src_key_padding_mask)))


def modular_pooling(scores: torch.Tensor, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Modular (learned attention) pooling (XML; MINUTE Eq. 14): scores (B, L, S) = W_c x over tokens
    x (B, L, d) with mask (B, L) True = real -> one vector per head, (B, S, d)."""
    att = scores.masked_fill(~mask[..., None], NEG_INF).softmax(dim=1)
    return torch.einsum("bls,bld->bsd", att, x)


def length_band(t: int, n_min: int, n_max: int, device: torch.device | None = None) -> torch.Tensor:
    """(T, T) bool over (start clip, end clip): n_min <= ed - st + 1 <= n_max (moment-length limits)."""
    idx = torch.arange(t, device=device)
    length = idx[None, :] - idx[:, None] + 1
    return (length >= n_min) & (length <= n_max)


def bert_init(module: nn.Module, std: float) -> None:
    """Weights as BERT's (and XML's reference code): normal(0, std), zero biases, unit LayerNorms."""
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, 0.0, std)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


class TensorBatch:
    """Mixin for a dataclass batch: ``to(device)`` and ``pin_memory()`` over its tensors (and lists of them)."""

    def _map(self: T, fn: Any) -> T:
        def conv(v: object) -> object:
            if isinstance(v, torch.Tensor):
                return fn(v)
            if isinstance(v, list) and v and isinstance(v[0], torch.Tensor):
                return [fn(x) for x in v]
            return v

        return replace(self, **{f.name: conv(getattr(self, f.name)) for f in fields(self)})  # type: ignore[arg-type]

    def to(self: T, device: torch.device, non_blocking: bool = False) -> T:
        return self if device.type == "cpu" else self._map(lambda t: t.to(device, non_blocking=non_blocking))

    def pin_memory(self: T) -> T:  # called by a DataLoader with pin_memory=True
        return self._map(lambda t: t.pin_memory())
