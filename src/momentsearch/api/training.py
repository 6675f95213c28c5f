"""Training from a YAML file (packaged or not) or a config object, resuming where a run stopped."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from momentsearch.config import from_dict, merge, read_yaml, resolve_config, to_dict
from momentsearch.distributed import World
from momentsearch.training.config import TrainConfig
from momentsearch.training.lock import run_lock
from momentsearch.training.trainer import Trainer


def load_train_config(path: str | Path | TrainConfig, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """A :class:`TrainConfig` from YAML (or a config object) with ``overrides`` merged in at every depth
    (:func:`momentsearch.config.merge`): ``{"model": {"relevance": {"theta": 0.5}}}`` changes that one
    value. The same merge serves ``momentsearch train --set``, experiment conditions and this API."""
    if isinstance(path, TrainConfig):
        return from_dict(TrainConfig, merge(to_dict(path), overrides), "config") if overrides else path
    return from_dict(TrainConfig, merge(read_yaml(path), overrides), str(resolve_config(path)))


def train(config: str | Path | TrainConfig, overrides: dict[str, Any] | None = None, resume: bool = True,
          progress: bool = True) -> Trainer:
    """Train (resuming from the run folder's ``last.pt`` unless ``resume`` is False); returns the trainer.
    The run folder is locked while it trains (:func:`momentsearch.training.lock.run_lock`; under torchrun by
    rank 0, the rank that writes): a second training of the same folder stops at once with ``RunBusyError``."""
    cfg = load_train_config(config, overrides)
    with run_lock(cfg.out_dir) if World.from_env().is_main else contextlib.nullcontext():
        trainer = Trainer(cfg, progress=progress)
        if resume:
            trainer.resume()
        trainer.fit()
    return trainer
