"""The training config: the trainer's own settings, a dataset, and a model family's config.

YAML files under ``momentsearch/configs/<family>/`` fill it::

    dataset: {benchmark: runs/demo/benchmark}     # or annotation and feature files, see data.dataset
    out_dir: runs/xml
    epochs: 100
    device: auto                                  # auto | cpu | cuda | cuda:N
    model: {name: xml, hidden: 256, ...}          # the family and its own typed config
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from momentsearch.data.dataset import DatasetConfig
from momentsearch.models.dropout import MODES
from momentsearch.models.registry import family_config
from momentsearch.serving.checkpoint import K_VIDEOS, NMS_THRESHOLD
from momentsearch.training.schedule import check_weight_schedule


@dataclass(frozen=True)
class TrainConfig:
    dataset: DatasetConfig
    model: Any  # the family's typed config; YAML gives a mapping with `name`
    out_dir: str = "runs/train"
    train_split: str = "train"
    val_split: str = "val"
    seed: int = 0
    epochs: int = 100
    batch_size: int = 128
    lr: float = 1e-4
    val_max_queries: int = 1000  # validation on a fixed subset, for speed
    k_videos: int = K_VIDEOS  # videos the localizer sees per query (validation and evaluation)
    nms_threshold: float = NMS_THRESHOLD
    # where and how it runs
    device: str = "auto"  # auto (CUDA when there is one) | cpu | cuda | cuda:N
    amp: str = "auto"  # autocast on CUDA: auto (bf16 where supported, else fp16) | bf16 | fp16 | none; CPU: none
    num_workers: int = 0  # DataLoader worker processes for batches (0: in the training process)
    num_threads: int = 0  # torch CPU threads while training; 0 leaves torch's setting (one per core)
    deterministic: bool = True  # torch.use_deterministic_algorithms while training: bit-identical reruns and resumes
    # dropout masks (models.dropout): torch's own, or hashed from a seed (the same distribution, other numbers;
    # 1.5x faster MINUTE localizer epochs on an AMD CPU, where torch draws its masks serially)
    dropout_masks: str = "torch"
    # schedules (training.schedule): lr x lr_gamma from each milestone epoch (0-based) on; model config
    # floats from given epochs on; gradients clipped to this norm (0: not clipped; the norm is logged)
    lr_milestones: list[int] = field(default_factory=list)
    lr_gamma: float = 0.1
    weight_schedule: dict[str, list[list[float]]] = field(default_factory=dict)
    max_grad_norm: float = 0.0
    # fine-tuning: a checkpoint whose model weights start this run (same family and network; the optimizer,
    # epochs and schedules start afresh), e.g. RMMN's CM-ANS stage on a trained model (Yang et al. Sec. 5.2)
    init_from: str = ""
    # which model best.pt (the one evaluated, and the one init_from reads) holds: the epoch of the best validation
    # selection score (best), or simply the last epoch (last: a fixed budget with no selection on validation)
    checkpoint: str = "best"

    def __post_init__(self) -> None:
        object.__setattr__(self, "model", family_config(self.model, "model"))
        if self.epochs < 1 or self.batch_size < 2:
            raise ValueError("epochs must be >= 1 and batch_size >= 2 (negatives come from the batch)")
        if self.lr <= 0:
            raise ValueError("lr must be > 0")
        if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", self.device):
            raise ValueError(f"device must be auto, cpu, cuda or cuda:N, got {self.device!r}")
        if self.amp not in ("auto", "bf16", "fp16", "none"):
            raise ValueError(f"amp must be auto, bf16, fp16 or none, got {self.amp!r}")
        if self.num_workers < 0 or self.num_threads < 0 or self.k_videos < 1:
            raise ValueError("num_workers and num_threads must be >= 0, k_videos >= 1")
        if any(m < 0 for m in self.lr_milestones) or not 0 < self.lr_gamma <= 1 or self.max_grad_norm < 0:
            raise ValueError("lr_milestones must be >= 0, lr_gamma in (0, 1], max_grad_norm >= 0")
        if self.dropout_masks not in MODES:
            raise ValueError(f"dropout_masks must be one of {MODES}, got {self.dropout_masks!r}")
        if self.checkpoint not in ("best", "last"):
            raise ValueError(f"checkpoint must be best or last, got {self.checkpoint!r}")
        check_weight_schedule(self.model, self.weight_schedule)


__all__ = ["TrainConfig"]
