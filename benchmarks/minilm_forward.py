"""Forwards of MiniLM for a served query at batch 1, against float32 through torch's MKL ``F.linear``
(:class:`~momentsearch.text.bert_fast.FastBert` with ``small=False``, served until 2026-12-03): what a query's
encoding saves, and what the answers lose (docs/served_100k.md).

    python benchmarks/minilm_forward.py --index /tmp/index100k [--queries 300]

* ``float32, small-row kernel`` (served): each linear layer's weight packed once for
  :class:`~momentsearch.text.small_linear.SmallLinear` (AVX-512 register tiles on the calling thread);
* ``float32, oneDNN prepacked``: the same float32 function, each linear layer's weight reordered once for
  oneDNN (``torch.ops.mkldnn._reorder_linear_weight``, inductor's private op) and run with its bias (and the
  feed-forward's GELU) fused (``_linear_pointwise``): equal up to float rounding (about 5e-6);
* ``bfloat16``: each linear layer's weight in bfloat16 and its input cast to it (float32 accumulation, bias,
  residuals and layer norms stay float32).

The forwards take turns query by query (the order rotated every query) over ``--queries`` distinct queries of
``query_cost.py``, each encoded afresh (the text cache emptied), k 10. Reported: the ``encode`` part's median
each way, and against the MKL forward's top-10 moment lists how many are identical, keep their first moment,
and the mean share of moments both hold (a moment: video, start and end). Writes ``results/minilm_forward.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import report  # noqa: E402


def bf16_forward(fast):  # noqa: ANN001, ANN201 - a FastBert in, its bfloat16 twin out
    import torch
    import torch.nn.functional as F

    from momentsearch.text.bert_fast import FastBert, linear_names

    class BF16Bert(FastBert):
        def linear(self, name, v, gelu=False):  # noqa: ANN001, ANN201
            y = F.linear(v.to(torch.bfloat16), self.w[name + ".weight"]).float() + self.w[name + ".bias"]
            return F.gelu(y) if gelu else y

    weights = {**fast.w, **{n + ".weight": fast.w[n + ".weight"].to(torch.bfloat16) for n in linear_names(fast.w)}}
    return BF16Bert(weights, fast.layers, fast.heads, fast.eps, small=False)


def onednn_forward(fast):  # noqa: ANN001, ANN201 - a FastBert in, its prepacked oneDNN twin out
    import torch

    from momentsearch.text.bert_fast import FastBert, linear_names

    linear = torch.ops.mkldnn._linear_pointwise

    class OneDNNBert(FastBert):
        def linear(self, name, v, gelu=False):  # noqa: ANN001, ANN201
            return linear(v, packed[name], self.w[name + ".bias"], "gelu" if gelu else "none", [None],
                          "none" if gelu else "")

    packed = {n: torch.ops.mkldnn._reorder_linear_weight(fast.w[n + ".weight"], 1) for n in linear_names(fast.w)}
    return OneDNNBert(fast.w, fast.layers, fast.heads, fast.eps, small=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--queries", type=int, default=300)
    args = ap.parse_args()
    import momentsearch
    from momentsearch.timing import PartClock
    from query_cost import QUERIES

    searcher = momentsearch.load(args.index, device="cpu")
    tokens = searcher.queries.encoder.tokens  # the family's MiniLMTokens' MiniLMTokenEncoder
    for text in QUERIES[:30]:  # warm: lazy caches, MiniLM loaded
        searcher.search_many([text], k=10)
    from momentsearch.text.bert_fast import FastBert

    fast = tokens._fast
    if fast.small is None:
        raise SystemExit("the small-row kernel is not available here (momentsearch.text.small_linear.available())")
    base = "float32, torch F.linear (MKL)"
    forwards = {base: FastBert(fast.w, fast.layers, fast.heads, fast.eps, small=False),
                "float32, small-row kernel (served)": fast, "float32, oneDNN prepacked": onednn_forward(fast),
                "bfloat16": bf16_forward(fast)}
    names = list(forwards)
    encode = {name: [] for name in forwards}
    lists = {name: [] for name in forwards}
    for i, text in enumerate(QUERIES[5000: 5000 + args.queries]):
        for name in names[i % len(names):] + names[: i % len(names)]:
            tokens._fast = forwards[name]
            searcher.queries._lru.clear()
            clock = PartClock()
            hits = searcher.search_many([text], k=10, clock=clock)[0]
            encode[name].append(1000 * clock.seconds["encode"])
            lists[name].append([(h.video_id, round(h.start, 2), round(h.end, 2)) for h in hits])
    tokens._fast = fast
    rows = []
    for name in names:
        pairs = list(zip(lists[base], lists[name], strict=True))
        rows.append({"MiniLM forward": name, "encode p50 ms": statistics.median(encode[name]),
                     "identical top-10 lists": sum(a == b for a, b in pairs),
                     "same first moment": sum(a[0] == b[0] for a, b in pairs),
                     "moments kept": statistics.mean(len(set(a) & set(b)) / max(len(a), 1) for a, b in pairs)})
    report("minilm_forward", rows, f"python benchmarks/minilm_forward.py --index {args.index} --queries {args.queries}",
           extra={"queries": args.queries})


if __name__ == "__main__":
    main()
