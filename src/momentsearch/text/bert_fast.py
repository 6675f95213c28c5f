"""A BERT encoder's forward pass in a few fused torch calls, for the query encoder's small batches.

transformers' ``BertModel`` spends most of a short query's forward pass in Python (masks, output objects, hooks,
dropout that does nothing at inference): a served query is one sentence of about 10 tokens, whose matrix products
take a fraction of that. :class:`FastBert` reads the same weights and computes the same function with
``F.linear``, ``F.scaled_dot_product_attention``, ``F.layer_norm`` and ``F.gelu`` only: the last hidden states,
equal to ``BertModel``'s up to float rounding (tested: within 1e-5 on all-MiniLM-L6-v2, padded batches included).
A product of at most ``small_linear.MAX_ROWS`` token rows (a query) goes to :class:`SmallLinear`, its
weight packed once, where it is compiled for this CPU (``small_linear.available()``): about 2x torch's ``F.linear``
at batch 1 (``benchmarks/minilm_forward.py``); larger batches keep ``F.linear``.
:meth:`FastBert.of` returns None for a model it does not cover (another architecture, position embedding or
activation), and the caller keeps transformers' forward.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from momentsearch.text.small_linear import MAX_ROWS, SmallLinear, available


def linear_names(weights: dict[str, torch.Tensor]) -> list[str]:
    """The encoder's linear layers in a BERT state dict (each ``NAME.weight`` 2-D under ``encoder.layer.``): 6 a
    layer (query, key, value, attention output, intermediate, output)."""
    return [k[: -len(".weight")] for k, v in weights.items()
            if k.startswith("encoder.layer.") and k.endswith(".weight") and v.dim() == 2]


class FastBert:
    """``(input_ids (B, T), attention_mask (B, T)) -> last hidden states (B, T, D)`` of a BERT encoder."""

    def __init__(self, weights: dict[str, torch.Tensor], layers: int, heads: int, eps: float, small: bool = True):
        self.w, self.layers, self.heads, self.eps = weights, layers, heads, eps
        self.dim = weights["embeddings.word_embeddings.weight"].shape[1]
        emb = weights["embeddings.word_embeddings.weight"]
        # each linear layer's weight packed for a few rows (None: F.linear for every size); the kernel is the CPU's,
        # for float32
        self.small: dict[str, SmallLinear] | None = None
        if small and available() and emb.device.type == "cpu" and emb.dtype == torch.float32:
            self.small = {n: SmallLinear(weights[n + ".weight"], weights.get(n + ".bias")) for n in linear_names(weights)}

    @classmethod
    def of(cls, model: Any) -> FastBert | None:
        """The fast forward of ``model`` (a transformers ``BertModel`` in eval mode), or None where it differs
        from what this computes."""
        cfg = getattr(model, "config", None)
        if (type(model).__name__ != "BertModel" or cfg is None or getattr(cfg, "hidden_act", None) != "gelu"
                or getattr(cfg, "position_embedding_type", "absolute") != "absolute" or getattr(cfg, "is_decoder", False)
                or getattr(cfg, "add_cross_attention", False)):
            return None
        weights = {k: v.detach() for k, v in model.state_dict().items()}
        need = [f"encoder.layer.{i}.{n}" for i in range(cfg.num_hidden_layers) for n in (
            "attention.self.query.weight", "attention.output.dense.weight", "intermediate.dense.weight",
            "output.dense.weight", "output.LayerNorm.weight")]
        if any(k not in weights for k in need + ["embeddings.word_embeddings.weight"]):
            return None
        return cls(weights, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.layer_norm_eps)

    def __call__(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                 token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        w, d, h, eps = self.w, self.dim, self.heads, self.eps
        b, t = input_ids.shape
        types = w["embeddings.token_type_embeddings.weight"]
        x = (w["embeddings.word_embeddings.weight"][input_ids] + w["embeddings.position_embeddings.weight"][:t]
             + (types[0] if token_type_ids is None else types[token_type_ids]))
        x = F.layer_norm(x, (d,), w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], eps)
        # a padded batch: keys past a text's end are not attended to (a text alone needs no mask)
        mask = None if bool(attention_mask.all()) else attention_mask.bool()[:, None, None, :]

        def norm(name: str, v: torch.Tensor) -> torch.Tensor:
            return F.layer_norm(v, (d,), w[name + ".weight"], w[name + ".bias"], eps)

        lin = self.linear
        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q, k, v = (lin(p + f"attention.self.{n}", x).view(b, t, h, -1).transpose(1, 2)
                       for n in ("query", "key", "value"))
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2).reshape(b, t, d)
            x = norm(p + "attention.output.LayerNorm", x + lin(p + "attention.output.dense", a))
            x = norm(p + "output.LayerNorm", x + lin(p + "output.dense", lin(p + "intermediate.dense", x, gelu=True)))
        return x

    def linear(self, name: str, v: torch.Tensor, gelu: bool = False) -> torch.Tensor:
        """The linear layer ``name`` (its ``.weight`` and ``.bias``) of ``v``, then GELU when ``gelu`` (the
        feed-forward's first layer); another forward of the same network overrides this alone
        (``benchmarks/minilm_forward.py``)."""
        if self.small is not None and v.numel() <= MAX_ROWS * v.shape[-1] and v.dtype == torch.float32:
            y = self.small[name](v)
        else:
            y = F.linear(v, self.w[name + ".weight"], self.w[name + ".bias"])
        return F.gelu(y) if gelu else y
