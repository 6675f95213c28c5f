"""``momentsearch train / evaluate / search``: XML from a YAML config to ranked moments."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import typer

from momentsearch.config import load_yaml_config
from momentsearch.data.batching import pad_tokens
from momentsearch.data.synthetic import SyntheticBenchmark
from momentsearch.data.relevance import MomentRelevance
from momentsearch.evaluation import Submission, evaluate_submission, instance_bounds, multi_positive_recall
from momentsearch.evaluation.bounds import GEOMETRIC_MEAN_KS, geometric_mean
from momentsearch.evaluation.ndcg import ranked_ndcg
from momentsearch.evaluation.report import flatten, markdown_table, print_table
from momentsearch.fileio import atomic_open, write_json
from momentsearch.search.engine import SearchEngine, XMLLocalizer, XMLRetriever
from momentsearch.search.index import VideoIndex, build_index
from momentsearch.search.run import rank_split
from momentsearch.text.encoders import QueryFeatureCache
from momentsearch.training.config import XMLTrainConfig
from momentsearch.training.trainer import Trainer, load_checkpoint

EVAL_COLUMNS = ["VCMR 0.5-r1", "VCMR 0.5-r10", "VCMR 0.5-r100", "VCMR 0.7-r1", "VCMR 0.7-r10", "VCMR 0.7-r100",
                "SVMR 0.5-r1", "SVMR 0.5-r5", "SVMR 0.7-r1", "VR r1", "VR r10", "VR r100", "MP-VCMR 0.5-r1",
                "MP-VCMR 0.5-r10", "MP-VR r1", "nDCG VR", "nDCG VCMR 0.5", "lower VCMR 0.5-gmean",
                "VCMR 0.5-gmean", "upper VCMR 0.5-gmean"]


def bounds_gmean(vcmr: dict[str, float], iou: str = "0.5") -> float:
    """The standard VCMR geometric mean of R@{1,5,10} at one tIoU (the bounds' reference point)."""
    return geometric_mean([vcmr[f"{iou}-r{k}"] for k in GEOMETRIC_MEAN_KS])


def run_train(config: Path, overrides: dict[str, Any] | None = None, resume: bool = True,
              progress: bool = True) -> Trainer:
    cfg = load_yaml_config(XMLTrainConfig, config)
    if overrides:
        cfg = dataclasses.replace(cfg, **overrides)
    trainer = Trainer(cfg, progress=progress)
    if resume and trainer.resume():
        typer.echo(f"resumed from {trainer.ckpt_dir / 'last.pt'} at epoch {trainer.start_epoch + 1}")
    trainer.fit()
    best = max(trainer.history, key=lambda h: h["selection"])
    typer.echo(f"best epoch {best['epoch']}: val {flatten(best['val'])}; checkpoints in {trainer.ckpt_dir}")
    return trainer


def run_evaluate(checkpoint: Path, split: str = "test", out: Path | None = None, progress: bool = True,
                 relevance: Path | None = None, equivalent: float = 0.8) -> dict[str, float]:
    """Evaluate and report; returns the flat metrics row (see :func:`evaluate_checkpoint`)."""
    return evaluate_checkpoint(checkpoint, split, out, progress, relevance, equivalent)[0]


def graded_metrics(ranked: dict[str, Any], rel: MomentRelevance, equivalent: float) -> dict[str, Any]:
    """nDCG (paper gain and authors' linear gain) and instance-based bounds against one graded table."""
    return {
        "ndcg": ranked_ndcg(ranked["VR"], ranked["VCMR"], rel),
        "ndcg_linear": ranked_ndcg(ranked["VR"], ranked["VCMR"], rel, gain="linear", cutoff="n_relevant"),
        "bounds": instance_bounds(ranked["VCMR"], rel, min_relevance=equivalent, ks=(1, 5, 10, 100),
                                  video_pred=ranked["VR"]),
    }


def evaluate_checkpoint(checkpoint: Path, split: str = "test", out: Path | None = None, progress: bool = True,
                        relevance: Path | None = None, equivalent: float = 0.8,
                        ) -> tuple[dict[str, float], dict[str, Any]]:
    """Rank the split, write predictions.json, metrics.json and metrics.md; return (row, rankings).

    Besides the standard metrics: multi-positive recall, nDCG and the instance-based bounds (Wray
    et al. Fig. 5) against the synthetic oracle (moments as relevant as the annotated one are
    equivalent) and, with ``relevance`` (a table from ``momentsearch relevance`` over the same
    benchmark), against that text proxy, moments >= ``equivalent`` counting as equivalent.
    """
    model, cfg, _ = load_checkpoint(checkpoint)
    bench = SyntheticBenchmark.load(cfg.benchmark)
    corpus = bench.corpus.split(split)
    out = out or checkpoint.parent.parent / f"eval_{split}"
    with bench.features() as store:
        queries = QueryFeatureCache(Path(cfg.benchmark) / "features" / "queries_minilm.h5")
        ranked, index = rank_split(model, corpus, store, queries, bench.config.clip_length, cfg.k_videos,
                                   cfg.nms_threshold, progress=progress)
    sub = Submission.from_ranked(ranked)
    sub.write(out / "predictions.json")
    metrics: dict[str, Any] = evaluate_submission(sub, corpus)
    graded = bench.oracle(split).moment_relevance(min_relevance=0.5)
    exact = graded.threshold(1.0)
    mp = multi_positive_recall(ranked["VCMR"], exact)
    mp_vr = multi_positive_recall(ranked["VR"], exact)
    metrics["multi_positive"] = {"VCMR": mp["VCMR"], "VR": mp_vr["VR"], "min_relevance": 1.0}
    metrics["ndcg"] = ranked_ndcg(ranked["VR"], ranked["VCMR"], graded)
    metrics["bounds_oracle"] = instance_bounds(ranked["VCMR"], exact, min_relevance=1.0, ks=(1, 5, 10, 100),
                                               video_pred=ranked["VR"])
    if relevance is not None:
        proxy = MomentRelevance.load(relevance).select([m.query_id for m in corpus.moments], list(corpus.videos))
        metrics["proxy"] = {"file": str(relevance), "equivalent": equivalent, **graded_metrics(ranked, proxy, equivalent)}
    b = metrics["bounds_oracle"]
    row = {**flatten({t: metrics[t] for t in ("VCMR", "SVMR", "VR")}),
           **flatten({"MP-VCMR": mp["VCMR"], "MP-VR": mp_vr["VR"]}), **metrics["ndcg"],
           "VCMR 0.5-gmean": bounds_gmean(metrics["VCMR"]), "upper VCMR 0.5-gmean": b["VCMR@0.5"]["upper-gmean"],
           "lower VCMR 0.5-gmean": b["VCMR@0.5"]["lower-gmean"]}
    write_json(out / "metrics.json", {"checkpoint": str(checkpoint), "split": split, "n_queries": len(corpus),
                                      "n_videos": len(corpus.videos), "metrics": metrics})
    md = (f"# XML on {cfg.benchmark}, split {split}\n\n{len(corpus)} queries, {len(corpus.videos)} videos; "
          f"checkpoint `{checkpoint}`.\n\n" + markdown_table({"XML": row}, EVAL_COLUMNS) + "\n")
    print_table({"XML": row}, EVAL_COLUMNS, title=f"XML, split {split}")
    if "proxy" in metrics:
        p = metrics["proxy"]
        prow = {**p["ndcg"], **{f"{k} (linear)": v for k, v in p["ndcg_linear"].items()},
                **{f"VCMR 0.5 {k}": v for k, v in p["bounds"]["VCMR@0.5"].items() if "gmean" in k},
                **{f"VR {k}": v for k, v in p["bounds"]["VR"].items() if "gmean" in k},
                "equivalent moments / query": p["bounds"]["n_equivalent"]}
        print_table({"XML": prow}, list(prow), title=f"against {relevance} (equivalent >= {equivalent})")
        md += (f"\nAgainst the text proxy `{relevance}` (equivalent at >= {equivalent}):\n\n"
               + markdown_table({"XML": prow}, list(prow)) + "\n")
    with atomic_open(out / "metrics.md") as fh:
        fh.write(md)
    typer.echo(f"predictions and metrics written to {out}")
    return row, ranked


def load_or_build_index(checkpoint: Path, split: str, progress: bool = True) -> tuple[Any, XMLTrainConfig, VideoIndex]:
    """The split's index, cached beside the checkpoint and rebuilt when the checkpoint is newer."""
    model, cfg, _ = load_checkpoint(checkpoint)
    folder = checkpoint.parent.parent / f"index_{split}_{checkpoint.stem}"
    manifest = folder / "manifest.json"
    if manifest.exists() and manifest.stat().st_mtime >= checkpoint.stat().st_mtime:
        return model, cfg, VideoIndex.load(folder)
    bench = SyntheticBenchmark.load(cfg.benchmark)
    with bench.features() as store:
        index = build_index(model, store, list(bench.corpus.split(split).videos.values()),
                            bench.config.clip_length, progress=progress)
    index.save(folder)
    return model, cfg, index


def mmss(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 60:02d}:{s % 60:02d}"


def run_search(checkpoint: Path, text: str, k: int = 10, split: str = "test",
               progress: bool = True) -> list[tuple[str, float, float, float]]:
    if not text.strip():
        raise typer.BadParameter("the query is empty: type a few words, e.g. \"a person opens the fridge\"")
    model, cfg, index = load_or_build_index(checkpoint, split, progress)
    queries = QueryFeatureCache(Path(cfg.benchmark) / "features" / "queries_minilm.h5")
    tokens, mask = pad_tokens([queries.get(text)], model.cfg.max_tokens)
    engine = SearchEngine(XMLRetriever(model, index), XMLLocalizer(model, index), index, k_videos=cfg.k_videos,
                          n_moments=k, nms_threshold=cfg.nms_threshold)
    res = engine.search(["q"], tokens, mask).vcmr
    out = []
    for j in range(res.k):
        v = int(res.video_idx[0, j])
        if v < 0:
            break
        out.append((index.video_ids[v], float(res.start[0, j]), float(res.end[0, j]), float(res.score[0, j])))
    return out


def print_results(text: str, results: list[tuple[str, float, float, float]]) -> None:
    typer.echo(f"query: {text}")
    for r, (vid, st, ed, sc) in enumerate(results, start=1):
        typer.echo(f"{r:>3}. {vid}  {mmss(st)}-{mmss(ed)}  score {sc:.4g}")
