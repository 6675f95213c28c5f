"""XML training speed beside its reference implementation, side by side in one run.

    python benchmarks/xml_reference.py --benchmark DIR --reference TVRETRIEVAL_DIR [--threads 1]

DIR is a synthetic benchmark (`momentsearch generate --preset default --out DIR`). TVRETRIEVAL_DIR is
a checkout of Lei et al.'s code, https://github.com/jayleicn/TVRetrieval at commit 34777b4: the
script imports ``baselines.crossmodal_moment_localization.model_xml.XML`` from it (it needs the
``easydict`` package). None of that code is in this repository.

What is timed, for every implementation on the same batches, with the same thread count:
one training step = forward, loss, backward and an Adam step (lr 1e-4), on the first random batches
of 128 queries of an epoch over the whole training split (XML's paper settings: d 256, 4 heads, dropout 0.1, random in-batch negatives,
start/end NLL weight 0.01; no gradient clipping). The batches are collated before timing (the same
tensors feed both: the reference gets each query's own video, as its collate gives it).
The implementations take turns, round after round; a row reports the median over rounds.

* ``momentsearch`` rows: ``XMLConfig(encoder_layer=...)`` through the family's ``loss`` and
  ``optimizer`` (what the trainer runs);
* ``reference``: the reference's ``XML.forward`` (model and loss) with ``torch.optim.Adam``. Its own
  optimizer, BertAdam (a Python loop over parameters with warmup), lives in an ``optimization.py``
  that is not needed to measure the model; with ``--anomaly`` also a row under
  ``torch.autograd.detect_anomaly()``, which the reference's ``train.py`` wraps every epoch in.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, peak_rss_mib, report  # noqa: E402
from momentsearch.data.synthetic import SyntheticBenchmark  # noqa: E402
from momentsearch.models.family import InputDims, Step, TrainingData  # noqa: E402
from momentsearch.models.registry import create_family  # noqa: E402
from momentsearch.models.xml import XMLConfig  # noqa: E402
from momentsearch.models.xml.batches import Batch  # noqa: E402
from momentsearch.text.queries import CachedTextFeatures  # noqa: E402

REFERENCE_COMMIT = "34777b4bf9814feb04ded89668e2b0b4e432cc1b"
LR = 1e-4


def load_reference(root: Path) -> tuple[type, dict]:
    """The reference's XML class and its base config, imported from a TVRetrieval checkout."""
    if not (root / "baselines" / "crossmodal_moment_localization" / "model_xml.py").is_file():
        sys.exit(f"{root}: no baselines/crossmodal_moment_localization/model_xml.py; pass --reference the "
                 f"root of a TVRetrieval checkout (commit {REFERENCE_COMMIT[:7]})")
    sys.path.insert(0, str(root))
    try:
        mod = importlib.import_module("baselines.crossmodal_moment_localization.model_xml")
    except ModuleNotFoundError as e:
        sys.exit(f"importing the reference failed: {e} (it needs `pip install easydict`)")
    return mod.XML, mod.xml_base_config


def reference_inputs(b: Batch) -> dict[str, torch.Tensor | None]:
    """The reference's forward arguments for our batch: each query with its own video's clips."""
    col = b.video_col
    mask = b.clip_mask[col].float()
    return dict(query_feat=b.tokens, query_mask=b.token_mask.float(),
                video_feat=b.streams[0][col], video_mask=mask, sub_feat=b.streams[1][col], sub_mask=mask,
                tef_feat=None, tef_mask=None, st_ed_indices=torch.stack([b.st, b.ed], dim=1))


Inputs = tuple[Batch, dict[str, torch.Tensor | None]]  # our batch, and the same batch as the reference's arguments
Stepper = Callable[[Inputs], None]


def ours(encoder_layer: str, data: TrainingData) -> tuple[Stepper, int]:
    family = create_family(XMLConfig(encoder_layer=encoder_layer))
    store = data.store
    torch.manual_seed(0)
    model = family.build(InputDims(store.visual.dim, store.subtitle.dim, CachedTextFeatures.dim))
    model.train()
    opt = family.optimizer(model, LR)
    step = Step(0, torch.Generator().manual_seed(0))  # epoch 0: random in-batch negatives

    def run(inputs: Inputs) -> None:
        loss, _ = family.loss(model, inputs[0], step)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return run, sum(p.numel() for p in model.parameters())


def reference(xml_cls: type, base: dict, dims: InputDims, anomaly: bool = False) -> tuple[Stepper, int]:
    cfg = XMLConfig()
    conf = type(base)(base)  # an EasyDict copy
    conf.update(hidden_size=cfg.hidden, n_heads=cfg.n_heads, input_drop=cfg.dropout, drop=cfg.dropout,
                visual_input_size=dims.visual, sub_input_size=dims.subtitle, query_input_size=dims.query,
                max_ctx_l=cfg.max_clips, max_desc_l=cfg.max_tokens, margin=cfg.margin, lw_st_ed=cfg.lambda_tl,
                use_hard_negative=False, initializer_range=cfg.init_std, ctx_mode="video_sub")
    torch.manual_seed(0)
    model = xml_cls(conf)
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=LR)

    def run(inputs: Inputs) -> None:
        with torch.autograd.set_detect_anomaly(anomaly):
            loss, _ = model(**inputs[1])
            opt.zero_grad()
            loss.backward()
        opt.step()

    return run, sum(p.numel() for p in model.parameters())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--benchmark", type=Path, required=True)
    ap.add_argument("--reference", type=Path, required=True, help="root of a TVRetrieval checkout")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batches", type=int, default=6, help="timed batches per round and implementation")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--layers", default="transformer,attention", help="momentsearch's encoder_layer values")
    ap.add_argument("--anomaly", action="store_true", help="also the reference under detect_anomaly")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    xml_cls, base = load_reference(args.reference)

    bench = SyntheticBenchmark.load(args.benchmark)
    store = bench.features()
    sub = bench.corpus.split("train")  # random batches over the whole split, as in an epoch
    queries = CachedTextFeatures(bench.root / "features" / "queries_minilm.h5")
    data = TrainingData(sub, store, queries, {v: bench.config.clip_length for v in sub.videos})
    dims = InputDims(store.visual.dim, store.subtitle.dim, CachedTextFeatures.dim)
    family = create_family(XMLConfig())
    family.build(dims)  # sets the input dims: two streams
    source = family.batches(data)
    gen = torch.Generator().manual_seed(0)
    batches: list[Inputs] = []
    for idx in source.sampler(128, gen):
        if len(idx) == 128:
            b = source.collate(idx)
            batches.append((b, reference_inputs(b)))
        if len(batches) == args.batches + 1:
            break
    impls: dict[str, tuple[Stepper, int]] = {f"momentsearch ({layer})": ours(layer, data)
                                             for layer in args.layers.split(",")}
    impls[f"reference ({REFERENCE_COMMIT[:7]})"] = reference(xml_cls, base, dims)
    if args.anomaly:
        impls["reference, detect_anomaly (as its train.py)"] = reference(xml_cls, base, dims, anomaly=True)
    for run, _ in impls.values():  # warm-up
        run(batches[0])
    timed = batches[1:]
    rates: dict[str, list[float]] = {k: [] for k in impls}
    for r in range(args.rounds):
        for name, (run, _) in impls.items():
            t = time.perf_counter()
            for inputs in timed:
                run(inputs)
            rates[name].append(len(timed) * 128 / (time.perf_counter() - t))
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in rates.items()), flush=True)
    ref = statistics.median(rates[f"reference ({REFERENCE_COMMIT[:7]})"])
    rows = []
    for name, (_, n_params) in impls.items():
        med = statistics.median(rates[name])
        rows.append({"implementation": name, "parameters": n_params, "queries/s (median)": med,
                     "min": min(rates[name]), "max": max(rates[name]), "x reference": med / ref})
    clips = np.mean([float(b.clip_mask.sum(1).float().mean()) for b, _ in timed])
    print(f"\n{args.threads} thread(s); {len(timed)} batches x {args.rounds} rounds; {clips:.0f} clips per video "
          f"on average; reference {REFERENCE_COMMIT}; peak RSS {peak_rss_mib():.0f} MiB")
    report("xml_reference", rows, command_line())


if __name__ == "__main__":
    main()
