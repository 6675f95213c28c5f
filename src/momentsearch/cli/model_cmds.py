"""``momentsearch train / evaluate / search``: thin layers over :mod:`momentsearch.api`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from momentsearch.api import EVAL_COLUMNS, Evaluation, evaluate, train
from momentsearch.evaluation.report import flatten, print_table
from momentsearch.training.trainer import Trainer


def run_train(config: Path, overrides: dict[str, Any] | None = None, resume: bool = True,
              progress: bool = True) -> Trainer:
    trainer = train(config, overrides, resume=resume, progress=progress)
    if not trainer.world.is_main:  # under torchrun, rank 0 reports
        return trainer
    best = max(trainer.history, key=lambda h: h["selection"])
    typer.echo(f"best epoch {best['epoch']}: val {flatten(best['val'])}; checkpoints in {trainer.ckpt_dir}")
    return trainer


def print_train_config(config: Path, overrides: dict[str, Any] | None = None) -> None:
    """The config ``train`` would run, as YAML: the family's defaults filled in, the overrides applied."""
    import yaml

    from momentsearch.api.training import load_train_config
    from momentsearch.config import to_dict

    typer.echo(yaml.safe_dump(to_dict(load_train_config(config, overrides)), sort_keys=False).rstrip())


def run_evaluate(checkpoint: Path, split: str = "test", out: Path | None = None, progress: bool = True,
                 relevance: Path | None = None, equivalent: float = 0.8, device: str = "auto",
                 ranking: Path | None = None, mvmr_pools: Path | None = None, video_retriever: Path | None = None,
                 top_videos: int = 5, ndcg_rule: str = "reference") -> Evaluation:
    out = out or checkpoint.parent.parent / f"eval_{split}"
    ev = evaluate(checkpoint, split, out, progress, relevance, equivalent, device, ranking=ranking, ndcg_rule=ndcg_rule)
    name = checkpoint.stem
    print_table({name: ev.row}, [c for c in EVAL_COLUMNS if c in ev.row], title=f"{checkpoint}, split {split}")
    if ev.proxy_row is not None:
        print_table({name: ev.proxy_row}, list(ev.proxy_row), title=f"against {relevance} (equivalent >= {equivalent})")
    if "ranking" in ev.metrics:
        r = ev.metrics["ranking"]
        print_table({name: r}, [k for k in r if k.startswith("NDCG@")],
                    title=f"NDCG@K,IoU against {ranking} ({r['n_queries']} queries)")
    if mvmr_pools is not None:
        from momentsearch.api import evaluate_mvmr

        mv = evaluate_mvmr(checkpoint, mvmr_pools, split, out, progress, device, video_retriever=video_retriever,
                           top_videos=top_videos)
        m = mv.metrics
        front = f", top {top_videos} by {video_retriever}" if video_retriever is not None else ""
        left = f" ({m['pools_left_out']} smaller pools left out)" if m["pools_left_out"] else ""
        print_table({name: mv.row}, list(mv.row), title=f"MVMR protocol: {m['n_queries']} full pools{left} of "
                    f"{m['pool_size']} videos{front}, {m['positives_per_query']:.2f} positive moments per query, "
                    f"NMS {m['nms_threshold']:g} over every proposal")
    typer.echo(f"predictions and metrics written to {out}")
    return ev
