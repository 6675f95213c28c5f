"""``momentsearch train / evaluate / search``: XML from a YAML config to ranked moments."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import typer

from momentsearch.config import load_yaml_config
from momentsearch.data.batching import pad_tokens
from momentsearch.data.synthetic import SyntheticBenchmark
from momentsearch.evaluation import Submission, evaluate_submission, multi_positive_recall
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
                "MP-VCMR 0.5-r10", "MP-VR r1", "nDCG VR", "nDCG VCMR 0.5"]


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


def run_evaluate(checkpoint: Path, split: str = "test", out: Path | None = None,
                 progress: bool = True) -> dict[str, float]:
    """Evaluate and report; returns the flat metrics row (see :func:`evaluate_checkpoint`)."""
    return evaluate_checkpoint(checkpoint, split, out, progress)[0]


def evaluate_checkpoint(checkpoint: Path, split: str = "test", out: Path | None = None,
                        progress: bool = True) -> tuple[dict[str, float], dict[str, Any]]:
    """Rank the split, write predictions.json, metrics.json and metrics.md; return (row, rankings)."""
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
    row = {**flatten({t: metrics[t] for t in ("VCMR", "SVMR", "VR")}),
           **flatten({"MP-VCMR": mp["VCMR"], "MP-VR": mp_vr["VR"]}), **metrics["ndcg"]}
    write_json(out / "metrics.json", {"checkpoint": str(checkpoint), "split": split, "n_queries": len(corpus),
                                      "n_videos": len(corpus.videos), "metrics": metrics})
    with atomic_open(out / "metrics.md") as fh:
        fh.write(f"# XML on {cfg.benchmark}, split {split}\n\n{len(corpus)} queries, {len(corpus.videos)} videos; "
                 f"checkpoint `{checkpoint}`.\n\n" + markdown_table({"XML": row}, EVAL_COLUMNS) + "\n")
    print_table({"XML": row}, EVAL_COLUMNS, title=f"XML, split {split}")
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
