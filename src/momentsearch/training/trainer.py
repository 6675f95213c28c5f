"""Train XML: hinge ranking loss both ways + start/end NLL, Adam, a checkpoint every epoch,
resume, per-epoch validation with the evaluation of ``momentsearch.evaluation``, best kept.

Randomness is re-seeded from (seed, epoch) at the start of every epoch — batch order, negative
sampling and dropout — so a run resumed from an epoch's checkpoint continues exactly as the
uninterrupted run would have.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from momentsearch.config import from_dict, to_dict
from momentsearch.data.features import FeatureStore
from momentsearch.data.synthetic import SyntheticBenchmark
from momentsearch.evaluation.recall import evaluate_ranked
from momentsearch.evaluation.report import plot_recall_curves
from momentsearch.fileio import atomic_path, write_json
from momentsearch.models.xml import XML, XMLConfig
from momentsearch.search.run import rank_split
from momentsearch.text.encoders import MINILM_DIM, QueryFeatureCache
from momentsearch.training.config import XMLTrainConfig
from momentsearch.training.data import MomentBatches
from momentsearch.training.objective import batch_loss
from momentsearch.training.pairs import training_pairs

SELECTION_KEYS = ("VCMR 0.5-r1", "VCMR 0.5-r10", "VCMR 0.5-r100", "VCMR 0.7-r10", "VR r10")


def selection_score(metrics: dict[str, dict[str, float]]) -> float:
    """Sum of recalls used to keep the best checkpoint (TVR's practice of summing R@k)."""
    flat = {f"{t} {k}": v for t, m in metrics.items() for k, v in m.items()}
    return float(sum(flat[k] for k in SELECTION_KEYS))


def save_checkpoint(path: Path, model: XML, optimizer: torch.optim.Optimizer | None, epoch: int,
                    cfg: XMLTrainConfig, history: list[dict[str, Any]]) -> None:
    state = {
        "model": model.state_dict(), "model_config": dataclasses.asdict(model.cfg),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "epoch": epoch, "train_config": to_dict(cfg), "history": history,
    }
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_checkpoint(path: str | Path) -> tuple[XML, XMLTrainConfig, dict[str, Any]]:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{p}: checkpoint not found")
    try:
        state = torch.load(p, map_location="cpu", weights_only=False)
    except Exception as e:  # noqa: BLE001 - torch raises many kinds for a corrupt file
        raise ValueError(f"{p}: not a readable checkpoint ({e})") from None
    model = XML(XMLConfig(**state["model_config"]))
    model.load_state_dict(state["model"])
    model.eval()
    return model, from_dict(XMLTrainConfig, state["train_config"], str(p)), state


class Trainer:
    def __init__(self, cfg: XMLTrainConfig, progress: bool = True):
        self.cfg = cfg
        self.progress = progress
        torch.set_num_threads(cfg.num_threads)
        torch.use_deterministic_algorithms(cfg.deterministic)
        self.out = Path(cfg.out_dir)
        self.bench = SyntheticBenchmark.load(cfg.benchmark)
        self.store: FeatureStore = self.bench.features()
        use_sub = cfg.use_subtitle and self.store.has_subtitle
        self.queries = QueryFeatureCache(Path(cfg.benchmark) / "features" / "queries_minilm.h5")
        self.clip_length = self.bench.config.clip_length
        mcfg = cfg.model.with_inputs(self.store.visual.dim, self.store.subtitle.dim if use_sub else 0,  # type: ignore[union-attr]
                                     MINILM_DIM)
        torch.manual_seed(cfg.seed)
        self.model = XML(mcfg)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=cfg.lr)
        self.train_data = MomentBatches(self.bench.corpus.split(cfg.train_split), self.store, self.queries,
                                        self.clip_length, mcfg.max_clips, mcfg.max_tokens, use_sub)
        if cfg.relevance.uses_pairs:
            self.train_data.attach_pairs(training_pairs(cfg.relevance, self.train_data.query_ids))
        self.val_corpus = self.bench.corpus.split(cfg.val_split)
        rng = np.random.default_rng(cfg.seed)
        val_ids = [m.query_id for m in self.val_corpus.moments if m.has_ground_truth]
        self.val_ids = sorted(rng.choice(val_ids, min(cfg.val_max_queries, len(val_ids)), replace=False).tolist())
        self.val_corpus = self.val_corpus.with_moments([m for m in self.val_corpus.moments if m.query_id in set(self.val_ids)])
        self.history: list[dict[str, Any]] = []
        self.start_epoch = 0

    @property
    def ckpt_dir(self) -> Path:
        return self.out / "checkpoints"

    def resume(self) -> bool:
        last = self.ckpt_dir / "last.pt"
        if not last.exists():
            return False
        state = torch.load(last, map_location="cpu", weights_only=False)
        saved, now = dict(state["train_config"]), to_dict(self.cfg)
        saved.pop("epochs"), now.pop("epochs")  # more epochs may be asked for: that is what resuming is for
        if saved != now:
            diff = sorted(k for k in now if saved.get(k) != now[k])
            raise ValueError(f"{last} was trained with another config (differs in {diff}); "
                             "use another out_dir, or --no-resume to start over")
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.history = state["history"]
        self.start_epoch = state["epoch"] + 1
        return True

    def train_epoch(self, epoch: int) -> dict[str, float]:
        cfg = self.cfg
        self.model.train()
        gen = torch.Generator().manual_seed(cfg.seed * 100_003 + epoch)
        torch.manual_seed(cfg.seed * 100_003 + epoch)  # dropout
        pool = None if epoch < cfg.hard_negative_start_epoch else cfg.hard_pool_size
        sums: dict[str, float] = {}
        n = 0
        t0 = time.perf_counter()
        total = math.ceil(len(self.train_data) / cfg.batch_size)
        bar = tqdm(self.train_data.epoch(cfg.batch_size, gen, cfg.queries_per_video), total=total, desc=f"epoch {epoch + 1}/{cfg.epochs}",
                   unit="batch", disable=not self.progress, leave=False)
        for batch in bar:
            loss, parts = batch_loss(self.model, batch, cfg, pool, gen)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            for k, v in parts.items():
                sums[k] = sums.get(k, 0.0) + v * len(batch.query_ids)
            n += len(batch.query_ids)
            bar.set_postfix(loss=f"{parts['loss']:.4f}")
        seconds = time.perf_counter() - t0
        return {**{k: v / n for k, v in sums.items()}, "train_seconds": seconds, "queries_per_second": n / seconds}

    def validate(self) -> dict[str, dict[str, float]]:
        ranked, _ = rank_split(self.model, self.val_corpus, self.store, self.queries, self.clip_length,
                               self.cfg.k_videos, self.cfg.nms_threshold, progress=False)
        return evaluate_ranked(ranked["VCMR"], self.val_corpus, ("VCMR",)) | evaluate_ranked(
            ranked["VR"], self.val_corpus, ("VR",))

    def fit(self) -> list[dict[str, Any]]:
        self.ckpt_dir.mkdir(parents=True, exist_ok=True)
        write_json(self.out / "train_config.json", to_dict(self.cfg))
        best = max((h["selection"] for h in self.history), default=-1.0)
        for epoch in range(self.start_epoch, self.cfg.epochs):
            stats = self.train_epoch(epoch)
            metrics = self.validate()
            sel = selection_score(metrics)
            row = {"epoch": epoch + 1, **stats, "val": metrics, "selection": sel}
            self.history.append(row)
            save_checkpoint(self.ckpt_dir / "last.pt", self.model, self.optimizer, epoch, self.cfg, self.history)
            if sel > best:
                best = sel
                save_checkpoint(self.ckpt_dir / "best.pt", self.model, None, epoch, self.cfg, self.history)
            if self.progress:
                print(f"epoch {epoch + 1}: loss {stats['loss']:.4f} (vr {stats['loss_vr']:.4f}, "
                      f"tl {stats['loss_tl']:.3f}), val VCMR 0.5-r10 {metrics['VCMR']['0.5-r10']:.2f}, "
                      f"VR r10 {metrics['VR']['r10']:.2f}, {stats['queries_per_second']:.0f} queries/s", flush=True)
            write_json(self.out / "history.json", self.history)
            plot_training(self.history, self.out / "training_curves.png")
        return self.history


def plot_training(history: list[dict[str, Any]], path: Path) -> None:
    epochs = [h["epoch"] for h in history]
    curves = {
        "training loss (x100)": {"loss": [100 * h["loss"] for h in history]},
        "validation recall (%)": {k: [h["val"][k.split()[0]][k.split()[1]] for h in history] for k in SELECTION_KEYS},
    }
    plot_recall_curves(curves, epochs, path, title="XML training", log_x=False, x_label="epoch", y_max=None)

