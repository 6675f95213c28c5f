"""Every trainable family's rankings on a synthetic benchmark's test split (random weights, seed 0), to show that a
refactor of the search path changed no ranking: run it from two checkouts, then compare.

    python benchmarks/rankings_fingerprint.py write runs/demo/benchmark /tmp/after.npz --queries 40
    (from the other checkout: the same command to /tmp/before.npz)
    python benchmarks/rankings_fingerprint.py compare /tmp/before.npz /tmp/after.npz

``compare`` prints, per family and ranking (VCMR, SVMR, VR), whether the videos, the spans and the scores are equal;
where the scores differ and the order does not, whether the new score is a per-query monotone map of the old
(log(old) + a constant: MINUTE's Eq. 13 score replaced exp(S - max S) in issue 74).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

SMALL = {"xml": {"hidden": 64, "n_heads": 4, "max_clips": 128}, "minute": {}, "mmn": {},
         "cet": {"hidden": 32, "layers": 1, "n_heads": 2}, "bet": {"hidden": 32, "layers": 1, "n_heads": 2}}


def write(bench: str, out: str, n_queries: int, families: list[str]) -> None:
    import torch

    from momentsearch.api.evaluator import dataset_query_features
    from momentsearch.data.dataset import DatasetConfig, open_dataset
    from momentsearch.evaluation.ranking import rank_split
    from momentsearch.models.family import InputDims
    from momentsearch.models.registry import create_family

    torch.set_num_threads(1)
    ds = open_dataset(DatasetConfig(benchmark=bench))
    corpus = ds.split("test")
    res: dict[str, np.ndarray] = {}
    with ds.features() as store:
        vis, sub = store.get(next(iter(corpus.videos)))
        qids = [m.query_id for m in corpus.moments if m.has_ground_truth][:n_queries]
        for name in families:
            torch.manual_seed(0)
            fam = create_family({"name": name, **SMALL.get(name, {})})
            model = fam.build(InputDims(vis.shape[1], 0 if sub is None else sub.shape[1], 384))
            queries = dataset_query_features(ds.config.query_features, ds.config.query_cache, fam.query_encoder(model))
            ranked, _ = rank_split(fam, model, corpus, store, queries, ds.clip_lengths(corpus), 100, 0.7,
                                   progress=False, query_ids=qids)
            for kind, r in ranked.items():
                for field in ("video_idx", "start", "end", "score"):
                    res[f"{name}/{kind}/{field}"] = getattr(r, field)
            print(name, {k: v.video_idx.shape for k, v in ranked.items()}, flush=True)
    np.savez(out, **res)


def compare(before: str, after: str) -> int:
    a, b = np.load(before), np.load(after)
    differ = 0
    for key in sorted({k.rsplit("/", 1)[0] for k in a.files}):
        same = {f: np.array_equal(a[f"{key}/{f}"], b[f"{key}/{f}"], equal_nan=True)
                for f in ("video_idx", "start", "end", "score")}
        line = f"{key}: videos {same['video_idx']}, spans {same['start'] and same['end']}, scores {same['score']}"
        if not same["score"]:
            old, new = a[f"{key}/score"], b[f"{key}/score"]
            ok = np.isfinite(old) & (old > 0)
            d = np.where(ok, new - np.log(np.where(ok, old, 1.0)), np.nan)
            line += f" (new - log(old) per query: spread {float(np.nanmax(np.nanmax(d, 1) - np.nanmin(d, 1))):.3g})"
        differ += not (same["video_idx"] and same["start"] and same["end"])
        print(line)
    print(f"{differ} ranking(s) differ")
    return 1 if differ else 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("benchmark")
    w.add_argument("out")
    w.add_argument("--queries", type=int, default=40)
    w.add_argument("--families", default="xml,minute,mmn,cet,bet")
    c = sub.add_parser("compare")
    c.add_argument("before")
    c.add_argument("after")
    args = ap.parse_args()
    if args.cmd == "write":
        write(args.benchmark, args.out, args.queries, args.families.split(","))
    else:
        sys.exit(compare(args.before, args.after))


if __name__ == "__main__":
    main()
