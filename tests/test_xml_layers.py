"""XML's encoder layers: the reference's attention-only layer (hand-computed), the cross-attention
without an output projection, and checkpoints from before the option existed."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch import nn

from momentsearch.config import from_dict
from momentsearch.errors import ConfigError
from momentsearch.models.family import InputDims
from momentsearch.models.layers import AttentionLayer, MultiHeadAttention
from momentsearch.models.registry import create_family
from momentsearch.models.xml import XMLConfig
from momentsearch.models.xml.network import XML
from momentsearch.serving.checkpoint import load_checkpoint
from momentsearch.training.checkpoint import save_checkpoint


def test_attention_layer_is_self_attention_dense_layernorm() -> None:
    """BERT's attention block, computed by hand: softmax(q k^T / sqrt(d_h)) v per head over the real
    keys, one dense layer, then LayerNorm(x + .)."""
    torch.manual_seed(0)
    d, h, n, t = 8, 2, 2, 5
    layer = AttentionLayer(d, h, dropout=0.1).eval()
    for p in layer.parameters():
        nn.init.normal_(p, std=0.5)
    x = torch.randn(n, t, d)
    pad = torch.tensor([[False] * 5, [False, False, False, True, True]])
    out = layer(x, src_key_padding_mask=pad)

    w, b = layer.att.in_proj.weight, layer.att.in_proj.bias
    expected = torch.empty(n, t, d)
    for i in range(n):
        real = ~pad[i]
        q, k, v = (x[i] @ w[j * d:(j + 1) * d].T + b[j * d:(j + 1) * d] for j in range(3))
        heads = []
        for j in range(h):
            s = slice(j * d // h, (j + 1) * d // h)
            scores = q[:, s] @ k[real][:, s].T / math.sqrt(d // h)
            heads.append(scores.softmax(-1) @ v[real][:, s])
        ctx = torch.cat(heads, dim=-1)
        dense = ctx @ layer.att.out_proj.weight.T + layer.att.out_proj.bias
        expected[i] = nn.functional.layer_norm(x[i] + dense, (d,), layer.norm.weight, layer.norm.bias)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)

    x2 = x.clone()
    x2[1, 3:] = 100.0  # what sits in padded positions never reaches a real one
    torch.testing.assert_close(layer(x2, src_key_padding_mask=pad)[1, :3], out[1, :3])


def test_cross_attention_equals_torch_multihead_attention() -> None:
    """With an output projection and the same weights, MultiHeadAttention(x, y, pad) is
    nn.MultiheadAttention's output, and so are the gradients of its inputs."""
    torch.manual_seed(1)
    d, h = 12, 3
    ref = nn.MultiheadAttention(d, h, batch_first=True).eval()
    ours = MultiHeadAttention(d, h, dropout=0.0, output=True).eval()
    ours.in_proj.weight.data.copy_(ref.in_proj_weight.data)
    ours.in_proj.bias.data.copy_(ref.in_proj_bias.data)
    assert ours.out_proj is not None
    ours.out_proj.load_state_dict(ref.out_proj.state_dict())
    x = torch.randn(3, 4, d, requires_grad=True)
    y = torch.randn(3, 6, d, requires_grad=True)
    pad = torch.zeros(3, 6, dtype=torch.bool)
    pad[0, 4:] = True
    pad[2, 1:] = True
    a = ours(x, y, pad)
    b = ref(x, y, y, key_padding_mask=pad, need_weights=False)[0]
    torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)
    ga = torch.autograd.grad(a.square().sum(), (x, y))
    gb = torch.autograd.grad(b.square().sum(), (x, y))
    for u, v in zip(ga, gb, strict=True):
        torch.testing.assert_close(u, v, atol=1e-5, rtol=1e-4)


def test_attention_layers_drop_the_feed_forward_and_cross_projection() -> None:
    d = 16
    base = XMLConfig(hidden=d, n_heads=4).with_inputs(visual_dim=10, subtitle_dim=6, query_dim=7)
    att = XML(base)
    tr = XML(XMLConfig(hidden=d, n_heads=4, encoder_layer="transformer").with_inputs(10, 6, 7))
    assert not any(isinstance(m, nn.TransformerEncoderLayer | nn.MultiheadAttention) for m in att.modules())
    n_att, n_tr = (sum(p.numel() for p in m.parameters()) for m in (att, tr))
    # 5 encoder layers (query, 2 x H1, 2 x H2) lose a feed-forward block (2 linears d->d) and a
    # LayerNorm; the 2 cross-attentions lose their output projection
    assert n_tr - n_att == 5 * (2 * (d * d + d) + 2 * d) + 2 * (d * d + d)
    with pytest.raises(ConfigError, match="encoder_layer must be attention or transformer"):
        from_dict(XMLConfig, {"name": "xml", "encoder_layer": "ffn"})


def test_checkpoint_from_before_encoder_layer_loads_as_transformer(tmp_path: Path) -> None:
    family = create_family(XMLConfig(hidden=16, n_heads=2, encoder_layer="transformer"))
    model = family.build(InputDims(visual=10, subtitle=6, query=7))
    path = tmp_path / "old.pt"
    save_checkpoint(path, family, model, None, 0, None, [])
    state = torch.load(path, weights_only=True)
    del state["model_config"]["encoder_layer"]  # as written before the option existed
    torch.save(state, path)
    ck = load_checkpoint(path)
    assert ck.family.cfg.encoder_layer == "transformer"
    assert isinstance(ck.model.query_encoder, nn.TransformerEncoderLayer)
    for (k, a), (_, b) in zip(model.state_dict().items(), ck.model.state_dict().items(), strict=True):
        assert torch.equal(a, b), k
