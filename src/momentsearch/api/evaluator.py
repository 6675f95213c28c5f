"""Evaluate a checkpoint on any split of its dataset: rank every annotated query (VCMR, SVMR, VR),
score it with TVR's conventions, and, where the dataset grades relevance, add multi-positive
recall, nDCG and instance-based bounds. Writes predictions.json (TVR's submission format),
metrics.json and metrics.md when given a folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from momentsearch.data.corpus import Corpus, Moment, clean_span
from momentsearch.data.dataset import open_dataset
from momentsearch.data.loaders.tvr_ranking import load_tvr_ranking
from momentsearch.data.relevance import MomentRelevance
from momentsearch.device import resolve_device, torch_settings
from momentsearch.errors import MomentSearchError
from momentsearch.evaluation import Submission, evaluate_submission, instance_bounds, multi_positive_recall
from momentsearch.evaluation.bounds import GEOMETRIC_MEAN_KS, geometric_mean
from momentsearch.evaluation.ndcg import ranked_ndcg, two_way_video_ndcg
from momentsearch.evaluation.ndcg_iou import DEFAULT_NDCG_IOUS, DEFAULT_NDCG_KS, GroundTruth, ndcg_iou, ndcg_iou_key
from momentsearch.evaluation.ranking import rank_split
from momentsearch.evaluation.recall import per_query_hits
from momentsearch.evaluation.report import flatten, fmt, markdown_table
from momentsearch.fileio import atomic_open, write_json
from momentsearch.search.ranked import RankedMoments
from momentsearch.serving.checkpoint import load_checkpoint
from momentsearch.text.queries import dataset_query_features
from momentsearch.training.checkpoint import require_train_config

EVAL_COLUMNS = ["VCMR 0.5-r1", "VCMR 0.5-r10", "VCMR 0.5-r100", "VCMR 0.7-r1", "VCMR 0.7-r10", "VCMR 0.7-r100",
                "SVMR 0.5-r1", "SVMR 0.5-r5", "SVMR 0.7-r1", "VR r1", "VR r10", "VR r100", "MP-VCMR 0.5-r1",
                "MP-VCMR 0.5-r10", "MP-VR r1", "nDCG VR", "nDCG VCMR 0.5", "nDCG VR 2-way", "nDCG VCMR 0.5 S>0",
                "lower VCMR 0.5-gmean", "VCMR 0.5-gmean", "upper VCMR 0.5-gmean"]


@dataclass
class Evaluation:
    row: dict[str, float]  # flat metrics, e.g. row["VCMR 0.5-r1"]
    metrics: dict[str, Any]  # nested, as metrics.json holds them
    ranked: dict[str, RankedMoments]  # "VCMR", "SVMR", "VR"
    markdown: str
    proxy_row: dict[str, float] | None = None


def bounds_gmean(vcmr: dict[str, float], iou: str = "0.5") -> float:
    """The standard VCMR geometric mean of R@{1,5,10} at one tIoU (the bounds' reference point)."""
    return geometric_mean([vcmr[f"{iou}-r{k}"] for k in GEOMETRIC_MEAN_KS])


def graded_metrics(ranked: dict[str, RankedMoments], rel: MomentRelevance, equivalent: float) -> dict[str, Any]:
    """nDCG (paper gain and authors' linear gain) and instance-based bounds against one graded table."""
    return {
        "ndcg": ranked_ndcg(ranked["VR"], ranked["VCMR"], rel),
        "ndcg_linear": ranked_ndcg(ranked["VR"], ranked["VCMR"], rel, gain="linear", cutoff="n_relevant"),
        "bounds": instance_bounds(ranked["VCMR"], rel, min_relevance=equivalent, ks=(1, 5, 10, 100),
                                  video_pred=ranked["VR"]),
    }


def every_s_ndcg(ranked: dict[str, RankedMoments], oracle: Any) -> dict[str, float]:
    """Wray et al.'s Eq. 3 (both directions) with Eq. 2's gain and discount, without its |R_q| cut-off
    (``evaluation.ndcg``), against the oracle's every S > 0 (the "nDCG VR" and "nDCG VCMR 0.5" columns cut its
    grades at 0.5): text <-> video averaged over both directions, and moment nDCG (one direction: a moment has
    no ranking of queries)."""
    every = oracle.moment_relevance(min_relevance=1e-6)
    return {"nDCG VR 2-way": two_way_video_ndcg(ranked["VR"], every),
            "nDCG VCMR 0.5 S>0": ranked_ndcg(ranked["VR"], ranked["VCMR"], every)["nDCG VCMR 0.5"]}


def ndcg_iou_table(row: dict[str, float]) -> str:
    """NDCG@K,IoU as a small markdown table: K down, IoU across."""
    ious = list(DEFAULT_NDCG_IOUS)
    lines = ["| NDCG@K,IoU | " + " | ".join(f"IoU {t:g}" for t in ious) + " |", "|---|" + "---:|" * len(ious)]
    for k in DEFAULT_NDCG_KS:
        lines.append(f"| K={k} | " + " | ".join(fmt(row[ndcg_iou_key(k, t)]) for t in ious) + " |")
    return "\n".join(lines) + "\n"


def ranking_queries(corpus: Corpus, path: str | Path) -> tuple[Corpus, GroundTruth, dict[str, int]]:
    """A TVR-Ranking file's queries as a corpus over ``corpus``'s videos (each query placed on its most
    relevant moment there, which only SVMR uses) and their moments on those videos, as the file has
    them (grade 0 included), for NDCG@K,IoU. Queries with no moment on these videos are left out."""
    data = load_tvr_ranking(path)
    gt = {q: [m for m in ms if m[0] in corpus.videos] for q, ms in data.moments.items()}
    gt = {q: ms for q, ms in gt.items() if ms}
    moments = []
    for qid, ms in gt.items():
        video, st, ed, _ = max(ms, key=lambda m: m[3])  # the first of the highest grade
        span, _ = clean_span(st, ed, corpus.videos[video].duration)
        moments.append(Moment(qid, data.queries[qid], video, (span,)))
    if not moments:
        raise MomentSearchError(f"{path}: none of its moments is on a video of this split "
                                f"({len(corpus.videos)} videos, e.g. {list(corpus.videos)[:3]})")
    stats = {**data.stats, "n_queries_on_split": len(gt)}
    return Corpus(corpus.videos, moments, name=f"{corpus.name}+{Path(path).name}"), gt, stats


def evaluate(checkpoint: str | Path, split: str = "test", out: str | Path | None = None, progress: bool = True,
             relevance: str | Path | None = None, equivalent: float = 0.8, device: str = "auto",
             num_threads: int | None = None, ranking: str | Path | None = None,
             ndcg_rule: str = "reference") -> Evaluation:
    """Rank ``split`` with the checkpoint's model and score it.

    Against the synthetic oracle (when the dataset is a synthetic benchmark): multi-positive recall,
    nDCG and the instance-based bounds of Wray et al. Fig. 5 (moments as relevant as the annotated
    one are equivalent), and TVR-Ranking's NDCG@K,IoU against the oracle's grades. With ``relevance``
    (a table of ``momentsearch relevance`` over the same corpus): nDCG and bounds against that text
    proxy, moments >= ``equivalent`` being equivalent. With ``ranking`` (a TVR-Ranking file): its
    queries are ranked over the split's videos and scored with NDCG@K,IoU against its grades (by
    TVR-Ranking's reference rules, or with ``ndcg_rule="paper"`` the paper's reading; see
    :mod:`momentsearch.evaluation.ndcg_iou`).
    Torch runs with the training config's thread count and deterministic mode unless ``num_threads``
    says otherwise.
    """
    ckpt = load_checkpoint(checkpoint)
    cfg = require_train_config(ckpt)
    dev = resolve_device(device)
    dataset = open_dataset(cfg.dataset)
    corpus = dataset.split(split)
    threads = cfg.num_threads if num_threads is None else num_threads
    with torch_settings(threads, cfg.deterministic, dev), dataset.features() as store:
        queries = dataset_query_features(dataset.config.query_features, dataset.config.query_cache,
                                         ckpt.family.query_encoder(ckpt.model))
        clip_lengths = dataset.clip_lengths(corpus)
        ranked, index = rank_split(ckpt.family, ckpt.model.to(dev), corpus, store, queries, clip_lengths,
                                   cfg.k_videos, cfg.nms_threshold, progress=progress, device=dev)
        if ranking is not None:
            rcorpus, rrel, rstats = ranking_queries(corpus, ranking)
            rranked, _ = rank_split(ckpt.family, ckpt.model, rcorpus, store, queries, clip_lengths, cfg.k_videos,
                                    cfg.nms_threshold, progress=progress, device=dev, index=index)
    sub = Submission.from_ranked(ranked)
    metrics: dict[str, Any] = evaluate_submission(sub, corpus)
    row = flatten({t: metrics[t] for t in ("VCMR", "SVMR", "VR")})
    row["VCMR 0.5-gmean"] = bounds_gmean(metrics["VCMR"])
    if dataset.benchmark is not None:
        graded = dataset.benchmark.oracle(split).moment_relevance(min_relevance=0.5)
        exact = graded.threshold(1.0)
        mp = multi_positive_recall(ranked["VCMR"], exact)
        mp_vr = multi_positive_recall(ranked["VR"], exact)
        metrics["multi_positive"] = {"VCMR": mp["VCMR"], "VR": mp_vr["VR"], "min_relevance": 1.0}
        metrics["ndcg"] = ranked_ndcg(ranked["VR"], ranked["VCMR"], graded)
        metrics["ndcg_every"] = every_s_ndcg(ranked, dataset.benchmark.oracle(split))
        metrics["bounds_oracle"] = b = instance_bounds(ranked["VCMR"], exact, min_relevance=1.0, ks=(1, 5, 10, 100),
                                                       video_pred=ranked["VR"])
        row |= {**flatten({"MP-VCMR": mp["VCMR"], "MP-VR": mp_vr["VR"]}), **metrics["ndcg"], **metrics["ndcg_every"],
                "upper VCMR 0.5-gmean": b["VCMR@0.5"]["upper-gmean"],
                "lower VCMR 0.5-gmean": b["VCMR@0.5"]["lower-gmean"]}
        metrics["ndcg_iou"] = graded_ndcg = ndcg_iou(ranked["VCMR"], graded, rule=ndcg_rule)
        row |= {k: float("nan") if v is None else v for k, v in graded_ndcg.items() if k != "n_queries"}
    name = ckpt.family.name.upper()
    md = (f"# {name} on {dataset.name}, split {split}\n\n{len(corpus)} queries, {len(corpus.videos)} videos; "
          f"checkpoint `{checkpoint}`.\n\n" + markdown_table({name: row}, [c for c in EVAL_COLUMNS if c in row]) + "\n")
    if "ndcg_iou" in metrics:
        md += "\nTVR-Ranking's NDCG@K,IoU against the oracle's grades (4 x relevance, >= 0.5):\n\n" + ndcg_iou_table(row)
    if ranking is not None:
        metrics["ranking"] = {"file": str(ranking), "stats": rstats, **ndcg_iou(rranked["VCMR"], rrel, rule=ndcg_rule)}
        md += (f"\nTVR-Ranking's NDCG@K,IoU against `{ranking}` ({metrics['ranking']['n_queries']} queries with a "
               f"moment on this split; {ndcg_rule} rule):\n\n" + ndcg_iou_table(metrics["ranking"]))
    proxy_row = None
    if relevance is not None:
        proxy = MomentRelevance.load(relevance).select([m.query_id for m in corpus.moments], list(corpus.videos))
        metrics["proxy"] = p = {"file": str(relevance), "equivalent": equivalent,
                                **graded_metrics(ranked, proxy, equivalent)}
        proxy_row = {**p["ndcg"], **{f"{k} (linear)": v for k, v in p["ndcg_linear"].items()},
                     **{f"VCMR 0.5 {k}": v for k, v in p["bounds"]["VCMR@0.5"].items() if "gmean" in k},
                     **{f"VR {k}": v for k, v in p["bounds"]["VR"].items() if "gmean" in k},
                     "equivalent moments / query": p["bounds"]["n_equivalent"]}
        md += (f"\nAgainst the text proxy `{relevance}` (equivalent at >= {equivalent}):\n\n"
               + markdown_table({name: proxy_row}, list(proxy_row)) + "\n")
    if out is not None:
        o = Path(out)
        sub.write(o / "predictions.json")
        write_json(o / "metrics.json", {"checkpoint": str(checkpoint), "family": ckpt.family.name, "split": split,
                                        "n_queries": len(corpus), "n_videos": len(corpus.videos), "metrics": metrics})
        with atomic_open(o / "metrics.md") as fh:
            fh.write(md)
        write_json(o / "per_query.json", per_query_hits(ranked, corpus))  # each query's hits (issue 75 part 4)
    return Evaluation(row, metrics, ranked, md, proxy_row)
