"""``momentsearch evaluate-predictions``."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from momentsearch.data.loaders import load_corpus
from momentsearch.evaluation import Submission, evaluate_submission
from momentsearch.evaluation.report import flatten, print_table
from momentsearch.fileio import write_json


def run_evaluate_predictions(
    predictions: Path,
    ground_truth: Path,
    format: str | None,
    iou: tuple[float, ...],
    ks: tuple[int, ...],
    as_json: bool,
    out: Path | None,
) -> dict[str, object]:
    corpus = load_corpus(ground_truth, format)
    submission = Submission.read(predictions)
    metrics = evaluate_submission(submission, corpus, iou, ks)
    if out is not None:
        write_json(out, metrics)
    if as_json:
        typer.echo(json.dumps(metrics, indent=2))
    else:
        for task in ("VCMR", "SVMR", "VR"):
            if task in metrics:
                flat = flatten({task: metrics[task]})
                print_table({predictions.name: flat}, list(flat), title=task)
    return metrics
