"""MVMR pools built here (``momentsearch build-mvmr``'s library calls) against the released ones and
against the synthetic oracle; prints tables and writes benchmarks/results/mvmr_pools.json.

    python benchmarks/mvmr_pools.py [--shared ../shared/data] [--benchmark runs/experiments/benchmarks/experiment]
                                    [--scorer CHECKPOINT] [--skip-activitynet]

* Charades-STA test (n 50, k 5) and TACoS test (n 5, k 5): pool statistics beside the released
  files', and how the released extra positives coincide with ours (t+ 0.9, t- 0.5, text filter only:
  no video features here, so no s_tv).
* ActivityNet Captions (2D-TAN test.json, the paper's val_2; n 50, k 5): our pools beside Table 3
  (the authors' file for it is not in the snapshot).
* The synthetic benchmark: at each (t+, t-), the share of extra positives the oracle says are not
  (fully) relevant, and of negatives it says are relevant; with --scorer, also with s_tv from a model.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from momentsearch.data.loaders import load_corpus
from momentsearch.data.mvmr import PAPER_TABLE3, load_mvmr_pools
from momentsearch.fileio import write_json
from momentsearch.relevance.pool_builder import (
    PoolConfig,
    build_pools,
    compare_pools,
    oracle_errors,
    positive_candidates,
    text_similarity,
)
from momentsearch.text.encoders import QueryFeatureCache, sentence_embeddings

COLS = ("n_queries", "n_videos", "moment_len_s", "video_len_s", "positives_per_query", "query_words", "pool_size",
        "max_positives")


def similarity(corpus, cache: Path):
    emb = sentence_embeddings(QueryFeatureCache(cache), [m.text for m in corpus.moments])
    return text_similarity(corpus, emb)


def real(shared: Path, name: str, ann: str, released: str | None, n: int, cache_dir: Path) -> dict:
    corpus = load_corpus(shared / ann)
    corpus = corpus.with_moments([m for m in corpus.moments if m.has_ground_truth])
    t0 = time.time()
    s_te, arg = similarity(corpus, cache_dir / f"{name}.minilm.h5")
    cfg = PoolConfig(n=n, k=5)
    pools, build = build_pools(corpus, s_te, arg, cfg)
    out = {"annotations": ann, "build": build, "ours": pools.stats(), "ours_full": pools.full().stats(),
           "paper_table3": PAPER_TABLE3[name], "seconds": time.time() - t0}
    if released:
        theirs = load_mvmr_pools(shared / released, corpus)
        out["released"] = theirs.stats()
        out["released_full"] = theirs.full().stats()
        out["overlap"] = compare_pools(pools, theirs, positive_candidates(corpus, s_te, cfg))
    return out


def synthetic(bench: Path, scorer: Path | None, cache_dir: Path) -> list[dict]:
    from momentsearch.api.mvmr import checkpoint_video_scores
    from momentsearch.data.synthetic import SyntheticBenchmark

    b = SyntheticBenchmark.load(bench)
    corpus = b.corpus.split("test")
    s_te, arg = similarity(corpus, cache_dir / "synthetic.minilm.h5")
    rel = b.oracle("test").moment_relevance(min_relevance=0.5, query_ids=[m.query_id for m in corpus.moments])
    truth = rel.select(rel.query_ids, list(corpus.videos)).dense_video_relevance()
    s_tv = checkpoint_video_scores(scorer, "test", corpus) if scorer else None
    rows = []
    for use in ([False, True] if s_tv is not None else [False]):
        for t_pos in (0.7, 0.8, 0.9):
            for t_neg in (0.3, 0.5):
                pools, build = build_pools(corpus, s_te, arg, PoolConfig(n=50, k=5, t_pos=t_pos, t_neg=t_neg),
                                           s_tv if use else None)
                err = oracle_errors(pools, truth, list(corpus.videos))
                rows.append({"t_pos": t_pos, "t_neg": t_neg, "scorer": use, "pooled": build["n_pooled"],
                             "positives_per_query": pools.stats()["positives_per_query"], **err})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--benchmark", type=Path, default=Path("runs/experiments/benchmarks/experiment"))
    ap.add_argument("--scorer", type=Path, default=None)
    ap.add_argument("--skip-activitynet", action="store_true")
    ap.add_argument("--cache", type=Path, default=Path("runs/mvmr_pools"))
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "mvmr_pools.json")
    a = ap.parse_args()
    a.cache.mkdir(parents=True, exist_ok=True)
    res: dict = {"real": {}}
    res["real"]["charades"] = real(a.shared, "charades", "charades_sta/charades_sta_test.txt",
                                   "mvmr/charades_test_mvmr.json", 50, a.cache)
    res["real"]["tacos"] = real(a.shared, "tacos", "tacos/test.json", "mvmr/tacos_test_mvmr.json", 5, a.cache)
    if not a.skip_activitynet:
        res["real"]["activitynet"] = real(a.shared, "activitynet", "activitynet_captions/test.json", None, 50, a.cache)
    if (a.benchmark / "benchmark.yaml").exists():
        res["synthetic"] = {"benchmark": str(a.benchmark), "scorer": str(a.scorer) if a.scorer else None,
                            "rows": synthetic(a.benchmark, a.scorer, a.cache)}
    write_json(a.out, res)
    w = sys.stdout.write
    for name, r in res["real"].items():
        w(f"\n## {name} ({r['annotations']}), pools of {r['build']['n']}\n\n| | ours | ours, full pools | released | "
          "released, full | paper Table 3 |\n|---|---:|---:|---:|---:|---:|\n")
        for c in COLS:
            cell = (lambda d: "–" if d is None else (f"{d[c]:,}" if isinstance(d[c], int) else f"{d[c]:.2f}"))
            w(f"| {c} | {cell(r['ours'])} | {cell(r['ours_full'])} | {cell(r.get('released'))} | "
              f"{cell(r.get('released_full'))} | {cell(r['paper_table3'])} |\n")
        if "overlap" in r:
            w("\noverlap: " + json.dumps({k: round(v, 3) if isinstance(v, float) else v
                                          for k, v in r["overlap"].items()}) + "\n")
    if "synthetic" in res:
        w("\n## synthetic oracle: errors of the pools at each threshold\n\n| t+ | t- | s_tv | pooled | positives/q | "
          "extra positives < 1 | < 0.5 | negatives >= 0.5 | >= 1 |\n|---:|---:|---|---:|---:|---:|---:|---:|---:|\n")
        for r in res["synthetic"]["rows"]:
            w(f"| {r['t_pos']} | {r['t_neg']} | {'model' if r['scorer'] else '–'} | {r['pooled']} | "
              f"{r['positives_per_query']:.2f} | {100 * r['false_positive_rate_below_1']:.1f}% | "
              f"{100 * r['false_positive_rate_below_0.5']:.1f}% | {100 * r['false_negative_rate_at_0.5']:.2f}% | "
              f"{100 * r['false_negative_rate_at_1']:.3f}% |\n")
    w(f"\nwrote {a.out}\n")


if __name__ == "__main__":
    main()
