"""``momentsearch build-mvmr``: MVMR retrieval pools for any annotation file (Yang et al., Sec. 4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from momentsearch.api.mvmr import checkpoint_video_scores
from momentsearch.console import say
from momentsearch.data.loaders import load_corpus
from momentsearch.data.mvmr import load_mvmr_pools, write_mvmr_pools
from momentsearch.errors import ConfigError, MomentSearchError
from momentsearch.fileio import output_file, write_json
from momentsearch.relevance.pool_builder import (
    PoolConfig,
    build_pools,
    compare_pools,
    oracle_errors,
    positive_candidates,
    text_similarity,
)
from momentsearch.text.encoders import QueryFeatureCache, sentence_embeddings


def run_build_mvmr(dataset: Path, out: Path, cfg: PoolConfig, split: str | None = None,
                   scorer: Path | None = None, compare: Path | None = None, format: str | None = None,
                   progress: bool = True) -> dict[str, Any]:
    output_file(out)
    corpus = load_corpus(dataset, format)
    splits = corpus.splits
    split = split or ("test" if "test" in splits else (splits[0] if len(splits) == 1 else None))
    if split is None:
        raise ConfigError(f"{dataset} has the splits {splits}; choose one with --split")
    if splits and split not in splits:
        raise ConfigError(f"{dataset} has no split {split!r}; it has {splits}")
    part = corpus.split(split) if splits else corpus
    part = part.with_moments([m for m in part.moments if m.has_ground_truth])
    if len(part.videos) < cfg.n:
        raise ConfigError(f"split {split!r} has {len(part.videos)} videos, fewer than --n {cfg.n}")
    emb = sentence_embeddings(QueryFeatureCache(out.with_suffix(".minilm.h5")), [m.text for m in part.moments],
                              progress=progress)
    s_te, arg = text_similarity(part, emb, progress=progress)
    s_tv = checkpoint_video_scores(scorer, split, part) if scorer is not None else None
    pools, stats = build_pools(part, s_te, arg, cfg, s_tv)
    if not pools.pools:
        raise MomentSearchError(f"no query of {dataset} split {split} has {cfg.n} candidate videos; lower --n or "
                                "raise --t-neg")
    write_mvmr_pools(out, part, pools.pools, {q: ps[1:] for q, ps in pools.positives.items()})
    report: dict[str, Any] = {"dataset": str(dataset), "split": split, "scorer": str(scorer) if scorer else None,
                              "build": stats, "pools": pools.stats()}
    if compare is not None:
        theirs = load_mvmr_pools(compare, part)
        cands = positive_candidates(part, s_te, cfg, s_tv)
        report["released"] = {"file": str(compare), "pools": theirs.stats(), "full_pools": theirs.full().stats(),
                              "overlap": compare_pools(pools, theirs, cands)}
    bench_dir = dataset if dataset.is_dir() else None
    if bench_dir is not None and (bench_dir / "benchmark.yaml").exists():
        from momentsearch.data.synthetic import SyntheticBenchmark

        rel = SyntheticBenchmark.load(bench_dir).oracle(split).moment_relevance(
            min_relevance=0.5, query_ids=[m.query_id for m in part.moments])
        dense = rel.select(rel.query_ids, list(part.videos)).dense_video_relevance()
        report["oracle"] = oracle_errors(pools, dense, list(part.videos))
    write_json(out.with_suffix(".stats.json"), report)
    say(json.dumps({k: v for k, v in report.items() if k != "released"} |
                          ({"overlap": report["released"]["overlap"]} if compare else {}), indent=2))
    say(f"wrote {out} ({len(pools.pools)} pools) and {out.with_suffix('.stats.json')}")
    return report
