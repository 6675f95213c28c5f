"""Training from a YAML file (packaged or not) or a config object, resuming where a run stopped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from momentsearch.config import from_dict, read_yaml, resolve_config, to_dict
from momentsearch.training.config import TrainConfig
from momentsearch.training.trainer import Trainer


def load_train_config(path: str | Path, overrides: dict[str, Any] | None = None) -> TrainConfig:
    """A :class:`TrainConfig` from YAML; ``overrides`` replace top-level keys (``model`` and ``dataset``
    mappings are merged key by key)."""
    data = read_yaml(path)
    for k, v in (overrides or {}).items():
        data[k] = {**data.get(k, {}), **v} if isinstance(v, dict) and isinstance(data.get(k), dict) else v
    return from_dict(TrainConfig, data, str(resolve_config(path)))


def train(config: str | Path | TrainConfig, overrides: dict[str, Any] | None = None, resume: bool = True,
          progress: bool = True) -> Trainer:
    """Train (resuming from the run folder's ``last.pt`` unless ``resume`` is False); returns the trainer."""
    if isinstance(config, TrainConfig):
        cfg = from_dict(TrainConfig, {**to_dict(config), **(overrides or {})}) if overrides else config
    else:
        cfg = load_train_config(config, overrides)
    trainer = Trainer(cfg, progress=progress)
    if resume:
        trainer.resume()
    trainer.fit()
    return trainer
