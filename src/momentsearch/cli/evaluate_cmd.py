"""``momentsearch evaluate-predictions``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from momentsearch.data.loaders import load_corpus
from momentsearch.data.loaders.tvr_ranking import load_tvr_ranking
from momentsearch.errors import PredictionError
from momentsearch.evaluation import Submission, evaluate_submission
from momentsearch.evaluation.ndcg_iou import ndcg_iou
from momentsearch.evaluation.report import flatten, print_table
from momentsearch.fileio import json_safe, write_json


def run_evaluate_predictions(
    predictions: Path,
    ground_truth: Path | None,
    format: str | None,
    iou: tuple[float, ...],
    ks: tuple[int, ...],
    as_json: bool,
    out: Path | None,
    ranking: Path | None = None,
    ndcg_rule: str = "reference",
) -> dict[str, object]:
    submission = Submission.read(predictions)
    metrics: dict[str, Any] = {}
    if ground_truth is not None:
        metrics = evaluate_submission(submission, load_corpus(ground_truth, format), iou, ks)
    if ranking is not None:
        if "VCMR" not in submission.tasks:
            raise PredictionError(f"{predictions}: NDCG@K,IoU needs VCMR predictions, and the file has none")
        data = load_tvr_ranking(ranking)
        try:
            metrics["NDCG@K,IoU"] = ndcg_iou(submission.tasks["VCMR"], data.moments, rule=ndcg_rule)
        except KeyError as e:
            raise PredictionError(f"{predictions}: {e.args[0]} (queries of {ranking})") from None
    if out is not None:
        write_json(out, metrics)
    if as_json:
        typer.echo(json.dumps(json_safe(metrics), indent=2, allow_nan=False))
    else:
        for task in ("VCMR", "SVMR", "VR"):
            if task in metrics:
                flat = flatten({task: metrics[task]})
                print_table({predictions.name: flat}, list(flat), title=task)
        if "NDCG@K,IoU" in metrics:
            nd = metrics["NDCG@K,IoU"]
            print_table({predictions.name: nd}, [k for k in nd if k != "n_queries"],
                        title=f"NDCG@K,IoU against {ranking} ({nd['n_queries']} queries, {ndcg_rule} rule)")
    return metrics
