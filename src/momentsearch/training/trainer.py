"""One trainer for every model family: batches and loss from the family, Adam (or the family's
optimizer), a checkpoint every epoch, resume, per-epoch validation through the search engine
and the evaluation of ``momentsearch.evaluation``, the best checkpoint kept.

Randomness is re-seeded from (seed, epoch) at the start of every epoch — batch order, negative
sampling and dropout — so a run resumed from an epoch's checkpoint continues exactly as the
uninterrupted run would have. Torch's thread count and deterministic mode are set from the config
while ``fit`` runs and restored afterwards.

Started by ``torchrun``, the same config trains over several processes (:mod:`momentsearch.distributed`):
``batch_size`` stays the global batch, each rank encodes its share of every batch's rows, gradients
are averaged across ranks, and only rank 0 validates and writes checkpoints, history and plots.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from momentsearch.config import from_dict, to_dict
from momentsearch.console import say
from momentsearch.data.dataset import open_dataset
from momentsearch.device import autocast, autocast_dtype, resolve_device, torch_settings
from momentsearch.distributed import World
from momentsearch.errors import CheckpointError, ConfigError
from momentsearch.evaluation.ranking import rank_split
from momentsearch.evaluation.recall import evaluate_ranked
from momentsearch.evaluation.report import plot_recall_curves
from momentsearch.fileio import write_json
from momentsearch.models.dropout import dropout_masks
from momentsearch.models.family import InputDims, ModelFamily, Step, TrainingData
from momentsearch.models.registry import create_family
from momentsearch.serving.checkpoint import StoredCheckpoint
from momentsearch.text.queries import dataset_query_features
from momentsearch.training.checkpoint import save_checkpoint, stored_train_config
from momentsearch.training.config import TrainConfig
from momentsearch.training.schedule import lr_factor, model_config_at, set_model_config

FEATURE_MEMORY = 2 << 30  # bytes of training features kept in memory (FeatureStore.keep_in_memory)
PLOT_EVERY_S = 30.0  # training_curves.png is redrawn after the first epoch, then at most every 30 s, and at the end

SELECTION_KEYS = ("VCMR 0.5-r1", "VCMR 0.5-r10", "VCMR 0.5-r100", "VCMR 0.7-r10", "VR r10")


def selection_score(metrics: dict[str, dict[str, float]]) -> float:
    """Sum of recalls used to keep the best checkpoint (TVR's practice of summing R@k)."""
    flat = {f"{t} {k}": v for t, m in metrics.items() for k, v in m.items()}
    return float(sum(flat[k] for k in SELECTION_KEYS))


class _Collate(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Lets DataLoader workers run a family's collate on index lists."""

    def __init__(self, source: Any):
        self.source = source

    def __getitem__(self, idx: list[int]) -> Any:
        return self.source.collate(idx)


def _identity(x: Any) -> Any:
    return x


def _worker_init(_: int) -> None:
    info = torch.utils.data.get_worker_info()
    info.dataset.source.reopen()  # type: ignore[union-attr]


class Trainer:
    def __init__(self, cfg: TrainConfig, progress: bool = True):
        self.cfg = cfg = dataclasses.replace(cfg, dataset=cfg.dataset.resolved())
        self.world = World.from_env()
        self.progress = progress and self.world.is_main
        self.device = self.world.init(resolve_device(cfg.device))
        self.amp = autocast_dtype(cfg.amp, self.device)
        self.out = Path(cfg.out_dir)
        self.dataset = open_dataset(cfg.dataset)
        self.store = self.dataset.features()
        self.store.keep_in_memory(FEATURE_MEMORY)  # every epoch reads every training video: read each once
        self.family = create_family(cfg.model)
        self.queries = dataset_query_features(self.dataset.config.query_features, self.dataset.config.query_cache,
                                              self.family.query_encoder())  # what search will encode with
        dims = InputDims(self.store.visual.dim, self.store.subtitle.dim if self.store.subtitle is not None else 0,
                         self.queries.dim)
        with torch_settings(cfg.num_threads, cfg.deterministic, self.device):
            torch.manual_seed(cfg.seed)
            self.model = self.family.build(dims).to(self.device)
            if cfg.init_from:
                init_weights(self.model, self.family, cfg.init_from)
            self.optimizer = self.family.optimizer(self.model, cfg.lr)
            self.base_model_cfg = self.family.cfg  # after build: dims filled in; schedules start from it
            train = self.dataset.split(cfg.train_split)
            self.train_data = self.family.batches(TrainingData(train, self.store, self.queries,
                                                               self.dataset.clip_lengths(train)))
        self.scaler = torch.amp.GradScaler("cuda") if self.amp == torch.float16 else None
        val = self.dataset.split(cfg.val_split)
        rng = np.random.default_rng(cfg.seed)
        val_ids = [m.query_id for m in val.moments if m.has_ground_truth]
        self.val_ids = sorted(rng.choice(val_ids, min(cfg.val_max_queries, len(val_ids)), replace=False).tolist())
        keep = set(self.val_ids)
        self.val_corpus = val.with_moments([m for m in val.moments if m.query_id in keep])
        self.history: list[dict[str, Any]] = []
        self.start_epoch = 0

    @property
    def ckpt_dir(self) -> Path:
        return self.out / "checkpoints"

    def resume(self) -> bool:
        last = self.ckpt_dir / "last.pt"
        if not last.exists():
            return False
        stored = StoredCheckpoint.read(last)
        diff = resume_mismatch(stored.header.train_config or {}, self.cfg)
        if diff is not None:
            raise CheckpointError(f"{last} was trained with another config (differs in {diff}); give this run "
                                  "its own folder with --out-dir (--no-resume would overwrite that run's checkpoints)")
        if stored.optimizer is None:
            raise CheckpointError(f"{last}: holds no optimizer state (a packed model?), so the run cannot resume; "
                                  "give this run its own folder with --out-dir")
        self.model.load_state_dict(stored.model)
        self.optimizer.load_state_dict(stored.optimizer)
        self.history = stored.header.history
        self.start_epoch = stored.header.epoch + 1
        return True

    def _batches(self, idx_lists: list[list[int]]) -> Iterator[Any]:
        if self.cfg.num_workers == 0 and self.device.type == "cpu":
            return (self.train_data.collate(idx) for idx in idx_lists)
        loader = torch.utils.data.DataLoader(
            _Collate(self.train_data), sampler=idx_lists, batch_size=None, collate_fn=_identity,
            num_workers=self.cfg.num_workers, pin_memory=self.device.type == "cuda",
            worker_init_fn=_worker_init if self.cfg.num_workers else None,
            generator=torch.Generator().manual_seed(0))  # its seed draw must not advance the global RNG (dropout)
        return iter(loader)

    def train_epoch(self, epoch: int) -> dict[str, float]:
        cfg = self.cfg
        self.model.train()
        gen = torch.Generator().manual_seed(cfg.seed * 100_003 + epoch)
        torch.manual_seed(cfg.seed * 100_003 + epoch)  # dropout
        step = Step(epoch, gen)
        t0 = time.perf_counter()
        lr = cfg.lr * lr_factor(epoch, cfg.lr_milestones, cfg.lr_gamma)
        for g in self.optimizer.param_groups:
            g["lr"] = lr
        set_model_config(self.family, self.model, model_config_at(self.base_model_cfg, cfg.weight_schedule, epoch))
        prepared = self.family.prepare_epoch(self.model, self.train_data, step, self.device)
        self.model.train()
        sums: dict[str, float] = {}
        n, norm_max = 0, 0.0
        idx_lists = list(self.train_data.sampler(cfg.batch_size, gen))
        bar = tqdm(self._batches(idx_lists), total=len(idx_lists), desc=f"epoch {epoch + 1}/{cfg.epochs}",
                   unit="batch", disable=not self.progress, leave=False)
        for batch in bar:
            batch = batch.to(self.device, non_blocking=True)
            with autocast(self.device, self.amp), dropout_masks(cfg.dropout_masks):
                loss, parts = self.family.loss(self.model, batch, step)
            self.optimizer.zero_grad()
            if self.scaler is not None:
                self.scaler.scale(loss).backward()
                self.world.average_gradients(self.model)
                self.scaler.unscale_(self.optimizer)
                norm = self._grad_norm()
                self.scaler.step(self.optimizer)
                self.scaler.update()
            else:
                loss.backward()
                self.world.average_gradients(self.model)
                norm = self._grad_norm()
                self.optimizer.step()
            size = len(batch.query_ids)
            for k, v in {**parts, "grad_norm": norm}.items():
                sums[k] = sums.get(k, 0.0) + v * size
            norm_max = max(norm_max, norm)
            n += size
            bar.set_postfix(loss=f"{parts['loss']:.4f}")
        seconds = time.perf_counter() - t0
        return {**{k: v / n for k, v in sums.items()}, **prepared, "grad_norm_max": norm_max, "lr": lr,
                "train_seconds": seconds, "queries_per_second": n / seconds}

    def _grad_norm(self) -> float:
        """The gradients' total 2-norm before clipping; clipped to ``max_grad_norm`` when that is > 0."""
        params = [p for p in self.model.parameters() if p.grad is not None]
        if self.cfg.max_grad_norm > 0:
            return float(torch.nn.utils.clip_grad_norm_(params, self.cfg.max_grad_norm))
        return float(torch.nn.utils.get_total_norm([p.grad for p in params])) if params else 0.0

    def validate(self) -> dict[str, dict[str, float]]:
        ranked, _ = rank_split(self.family, self.model, self.val_corpus, self.store, self.queries,
                               self.dataset.clip_lengths(self.val_corpus), self.cfg.k_videos, self.cfg.nms_threshold,
                               progress=False, device=self.device)
        return evaluate_ranked(ranked["VCMR"], self.val_corpus, ("VCMR",)) | evaluate_ranked(
            ranked["VR"], self.val_corpus, ("VR",))

    def fit(self, until: int | None = None) -> list[dict[str, Any]]:
        """Train the remaining epochs, or those up to epoch ``until``: a later ``fit`` carries on in memory
        exactly as one uninterrupted run (a checkpoint taken in between is the run stopped there). Under
        torchrun every rank calls it; the process group is left after the last epoch, or on an error."""
        end = self.cfg.epochs if until is None else until
        if not self.start_epoch <= end <= self.cfg.epochs:
            raise ValueError(f"until must be in {self.start_epoch}..{self.cfg.epochs} (epochs done..epochs), got {end}")
        try:
            with torch_settings(self.cfg.num_threads, self.cfg.deterministic, self.device):
                self.world.broadcast_parameters(self.model)
                history = self._fit(end)
        except BaseException:
            self.world.close()
            raise
        if end == self.cfg.epochs:
            self.world.close()
        return history

    def _fit(self, end: int) -> list[dict[str, Any]]:
        if self.world.is_main:
            self.ckpt_dir.mkdir(parents=True, exist_ok=True)
            write_json(self.out / "train_config.json", to_dict(self.cfg))
        self.features_identity = self.dataset.feature_identity()
        best = max((h["selection"] for h in self.history), default=-1.0)
        plotted = -float("inf")
        for epoch in range(self.start_epoch, end):
            stats = self.train_epoch(epoch)
            if not self.world.is_main:  # rank 0 validates and writes; the others wait for its checkpoint
                self.history.append({"epoch": epoch + 1, **stats})
                self.world.barrier()
                continue
            metrics = self.validate()
            sel = selection_score(metrics)
            row = {"epoch": epoch + 1, **stats, "val": metrics, "selection": sel}
            self.history.append(row)
            save_checkpoint(self.ckpt_dir / "last.pt", self.family, self.model, self.optimizer, epoch, self.cfg,
                            self.history, self.features_identity)
            if sel > best or self.cfg.checkpoint == "last":
                best = max(best, sel)
                save_checkpoint(self.ckpt_dir / "best.pt", self.family, self.model, None, epoch, self.cfg,
                                self.history, self.features_identity)
            if self.progress:
                terms = ", ".join(f"{k} {v:.4f}" for k, v in stats.items() if k.startswith("loss_"))
                say(f"epoch {epoch + 1}: loss {stats['loss']:.4f} ({terms}), val VCMR 0.5-r1 "
                      f"{metrics['VCMR']['0.5-r1']:.2f}, 0.5-r10 "
                      f"{metrics['VCMR']['0.5-r10']:.2f}, VR r10 {metrics['VR']['r10']:.2f}, "
                      f"{stats['queries_per_second']:.0f} queries/s")
            write_json(self.out / "history.json", self.history)
            if epoch + 1 == end or time.monotonic() - plotted >= PLOT_EVERY_S:  # drawing costs ~4 % of an XML epoch
                plot_training(self.history, self.out / "training_curves.png", self.family.name)
                plotted = time.monotonic()
            self.world.barrier()
        self.start_epoch = end
        return self.history


def plot_training(history: list[dict[str, Any]], path: Path, family: str = "") -> None:
    epochs = [h["epoch"] for h in history]
    curves = {
        "training loss (x100)": {"loss": [100 * h["loss"] for h in history]},
        "validation recall (%)": {k: [h["val"][k.split()[0]][k.split()[1]] for h in history] for k in SELECTION_KEYS},
    }
    plot_recall_curves(curves, epochs, path, title=f"{family.upper()} training".strip(), log_x=False,
                       x_label="epoch", y_max=None)


def init_weights(model: nn.Module, family: ModelFamily, path: str) -> None:
    """``model`` starts from the weights of the checkpoint at ``path`` (fine-tuning); a checkpoint of another
    family or another network shape is refused with what differs."""
    stored = StoredCheckpoint.read(path)
    if stored.header.family != family.name:
        raise CheckpointError(f"init_from {path}: a checkpoint of family {stored.header.family!r}, this run trains "
                              f"{family.name!r}")
    own = model.state_dict()
    theirs = stored.model
    missing, extra = sorted(set(own) - set(theirs)), sorted(set(theirs) - set(own))
    shapes = sorted(k for k in set(own) & set(theirs) if tuple(own[k].shape) != tuple(theirs[k].shape))
    if missing or extra or shapes:
        mine = to_dict(family.cfg)
        differ = {k: (v, mine.get(k)) for k, v in stored.header.model_config.items() if mine.get(k) != v}
        raise CheckpointError(f"init_from {path}: its network differs from this run's; model config (theirs, "
                              f"this run's): {differ}; {len(shapes)} tensors of other shape (e.g. {shapes[:2]}), "
                              f"{len(missing)} missing, {len(extra)} unexpected")
    model.load_state_dict(theirs)


def resume_mismatch(saved: dict[str, Any], cfg: TrainConfig) -> list[str] | None:
    """None when a run stored with train config ``saved`` can continue as ``cfg``; else the options that
    differ. More epochs may be asked for, and where it runs (device, amp, workers, folder) does not change
    the run."""
    saved, now = _with_defaults(saved), to_dict(cfg)
    for d in (saved, now):
        for k in ("epochs", "device", "amp", "num_workers", "out_dir"):
            d.pop(k, None)
    return None if saved == now else sorted(k for k in now if saved.get(k) != now[k])


def _with_defaults(saved: dict[str, Any]) -> dict[str, Any]:
    """A stored train config as this version reads it: an option added since it was saved takes its
    default, so that a checkpoint from before the option resumes as the same run. A config this
    version cannot read (a removed option) is compared as stored, and differs."""
    try:
        return to_dict(from_dict(TrainConfig, stored_train_config(dict(saved)), "stored train config"))
    except ConfigError:
        return dict(saved)
