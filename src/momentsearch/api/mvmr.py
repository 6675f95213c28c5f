"""Evaluate a checkpoint under the MVMR protocol: each pooled query ranks the moments of its pool's
videos only (:mod:`momentsearch.evaluation.mvmr`), beside the NLVL numbers on its gold video.

    import momentsearch
    result = momentsearch.evaluate_mvmr("runs/xml/checkpoints/best.pt", "pools.json")
    print(result.row["MVMR 0.5-r1"], result.row["NLVL 0.5-r1"])
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from momentsearch.api.split_search import load_split
from momentsearch.data.corpus import Corpus
from momentsearch.data.dataset import open_dataset
from momentsearch.data.mvmr import MVMRPools, load_mvmr_pools
from momentsearch.device import resolve_device, torch_settings
from momentsearch.errors import MomentSearchError
from momentsearch.evaluation.mvmr import mvmr_metrics, mvmr_per_query, protocol_nms
from momentsearch.evaluation.ranking import rank_split
from momentsearch.evaluation.report import flatten, markdown_table
from momentsearch.fileio import atomic_open, write_json
from momentsearch.search.ranked import RankedMoments
from momentsearch.serving.checkpoint import load_checkpoint
from momentsearch.text.queries import dataset_query_features
from momentsearch.training.checkpoint import require_train_config


@dataclass
class MVMREvaluation:
    row: dict[str, float]  # e.g. row["MVMR 0.5-r1"], row["NLVL 0.5-r1"], row["MVMR-VR r1"]
    metrics: dict[str, Any]
    ranked: dict[str, RankedMoments]
    markdown: str


def checkpoint_video_scores(checkpoint: str | Path, split: str, corpus: Corpus) -> np.ndarray:
    """s_tv from a trained model: its retriever's score of every (query, video) of the split, in the
    corpus' query and video order."""
    searcher = load_split(checkpoint, split)
    col = {v: i for i, v in enumerate(searcher.video_ids)}
    missing = [v for v in corpus.videos if v not in col]
    if missing:
        raise MomentSearchError(f"{checkpoint}: its index of split {split!r} lacks {len(missing)} videos of the "
                                f"annotations, e.g. {missing[:3]}: the scorer must be trained on this dataset")
    scores = searcher.video_scores([m.text for m in corpus.moments])
    return scores[:, [col[v] for v in corpus.videos]]


def mvmr_row(metrics: dict[str, Any]) -> dict[str, float]:
    return flatten({k: metrics[k] for k in ("MVMR", "NLVL", "MVMR-VR") if k in metrics})


def top_of_pools(pools: MVMRPools, scores: np.ndarray, corpus: Corpus, top_videos: int) -> MVMRPools:
    """Each pool cut to its ``top_videos`` videos by ``scores`` ((Q, V) in the corpus' query and video
    order, e.g. :func:`checkpoint_video_scores` of a video retriever): the paper's Table 2 pipeline.
    Positives stay as they are (gold first), so a gold video the retriever drops is a miss."""
    if top_videos < 1:
        raise MomentSearchError(f"top_videos must be >= 1, got {top_videos}")
    qrow = {m.query_id: i for i, m in enumerate(corpus.moments)}
    vcol = {v: i for i, v in enumerate(corpus.videos)}
    cut = {}
    for q, pool in pools.pools.items():
        s = scores[qrow[q], [vcol[v] for v in pool]]
        cut[q] = [pool[i] for i in np.argsort(-s, kind="stable")[:top_videos]]
    return replace(pools, name=f"{pools.name} (top {top_videos} by a video retriever)", pools=cut)


def evaluate_mvmr(checkpoint: str | Path, pools: str | Path | MVMRPools, split: str = "test",
                  out: str | Path | None = None, progress: bool = True, device: str = "auto",
                  num_threads: int | None = None, video_retriever: str | Path | None = None,
                  top_videos: int = 5, all_pools: bool = False, nms_threshold: float | None = None,
                  candidates_per_video: int | None = None) -> MVMREvaluation:
    """Rank every pooled query of ``split`` within its pool and score it with the MVMR protocol, as the
    authors do: only full pools (``all_pools=True`` also scores the smaller ones a file may hold; the
    number left out is in ``metrics["pools_left_out"]``); temporal NMS at the authors' threshold for the
    dataset (:func:`~momentsearch.evaluation.mvmr.protocol_nms`: 0.4 TACoS, else 0.5) whatever the
    family's own, unless ``nms_threshold`` is given; every proposal of each video's map ranked before
    NMS (``candidates_per_video`` keeps only that many per video instead).
    With ``video_retriever`` (a checkpoint of any family trained on the same data), each pool is
    first cut to its ``top_videos`` videos by that model's video scores (the paper's Table 2)."""
    ckpt = load_checkpoint(checkpoint)
    cfg = require_train_config(ckpt)
    dev = resolve_device(device)
    dataset = open_dataset(cfg.dataset)
    corpus = dataset.split(split)
    pooled = pools if isinstance(pools, MVMRPools) else load_mvmr_pools(pools, corpus)
    n_file = len(pooled.pools)
    if not all_pools:
        pooled = pooled.full()
    nms = protocol_nms(pooled) if nms_threshold is None else nms_threshold
    split_queries = {m.query_id for m in corpus.moments}
    outside = [q for q in pooled.pools if q not in split_queries]
    if outside:
        raise MomentSearchError(f"{len(outside)} pooled queries are not queries of split {split!r} of "
                                f"{dataset.name}, e.g. {outside[:3]}: build the pools over that split")
    if video_retriever is not None:
        pooled = top_of_pools(pooled, checkpoint_video_scores(video_retriever, split, corpus), corpus, top_videos)
    threads = cfg.num_threads if num_threads is None else num_threads
    with torch_settings(threads, cfg.deterministic, dev), dataset.features() as store:
        queries = dataset_query_features(dataset.config.query_features, dataset.config.query_cache,
                                         ckpt.family.query_encoder(ckpt.model))
        ranked, index = rank_split(ckpt.family, ckpt.model.to(dev), corpus, store, queries,
                                   dataset.clip_lengths(corpus), pooled.pool_size, nms,
                                   query_ids=list(pooled.pools), progress=progress, device=dev,
                                   n_moments=100, pools=pooled.pools, candidates_per_video=candidates_per_video)
    metrics = mvmr_metrics(ranked, pooled, index.video_ids)
    metrics |= {"pools_in_file": n_file, "pools_left_out": n_file - len(pooled.pools), "nms_threshold": nms,
                "candidates_per_video": candidates_per_video or "all"}
    row = mvmr_row(metrics)
    name = ckpt.family.name.upper()
    left = (f" ({metrics['pools_left_out']} smaller pools of the file left out, as the paper does)"
            if metrics["pools_left_out"] else "")
    md = (f"# {name} under the MVMR protocol, {dataset.name} split {split}\n\n{metrics['n_queries']} pooled queries{left}, "
          f"pools of {pooled.pool_size} videos, {metrics['positives_per_query']:.2f} positive moments per query, "
          f"NMS {nms:g} per video over every proposal; "
          f"checkpoint `{checkpoint}`.\n\n" + markdown_table({name: row}, list(row)) + "\n")
    if out is not None:
        o = Path(out)
        write_json(o / "mvmr_metrics.json", {"checkpoint": str(checkpoint), "family": ckpt.family.name,
                                             "split": split, "pools": pooled.name, "metrics": metrics})
        with atomic_open(o / "mvmr_metrics.md") as fh:
            fh.write(md)
        write_json(o / "per_query.json", mvmr_per_query(ranked, pooled, index.video_ids))  # issue 75 part 4
    return MVMREvaluation(row, metrics, ranked, md)
