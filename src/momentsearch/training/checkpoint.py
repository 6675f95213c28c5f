"""Checkpoints while training: writing them with the typed training config, and reading that config back.

Reading a checkpoint to search with it is :mod:`momentsearch.serving.checkpoint` (no trainer needed);
this module adds what training and evaluation need on top: :func:`save_checkpoint` from a
:class:`~momentsearch.training.config.TrainConfig`, and :func:`train_config_of` / :func:`require_train_config`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch
from torch import nn

from momentsearch.config import from_dict, to_dict
from momentsearch.errors import CheckpointError
from momentsearch.models.family import ModelFamily
from momentsearch.models.registry import stored_family_config
from momentsearch.serving.checkpoint import Checkpoint, write_checkpoint
from momentsearch.training.config import TrainConfig


def save_checkpoint(path: Path, family: ModelFamily, model: nn.Module, optimizer: torch.optim.Optimizer | None,
                    epoch: int, cfg: TrainConfig | None, history: list[dict[str, Any]],
                    features: dict[str, Any] | None = None) -> None:
    """``cfg`` None: a model packed without a training run. ``features``: the identity of the visual
    features the model reads (encoder name, version, config, dim)."""
    write_checkpoint(path, family, model, optimizer, epoch, to_dict(cfg) if cfg is not None else None,
                     cfg.dataset.relative_to(path.parent) if cfg is not None else {}, history, features)


def stored_train_config(data: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's train config with its model config read as this version reads it."""
    model = data.get("model")
    return {**data, "model": stored_family_config(model)} if isinstance(model, dict) else data


def train_config_of(ckpt: Checkpoint) -> TrainConfig | None:
    """The run's typed config, its dataset's paths found from the checkpoint's folder (None: packed)."""
    if ckpt.run is None:
        return None
    cfg = from_dict(TrainConfig, stored_train_config(ckpt.run), str(ckpt.path))
    return dataclasses.replace(cfg, dataset=cfg.dataset.relocated(ckpt.header.dataset_relative,
                                                                  ckpt.path.parent))


def require_train_config(ckpt: Checkpoint) -> TrainConfig:
    cfg = train_config_of(ckpt)
    if cfg is None:
        raise CheckpointError(f"{ckpt.path}: packed without a training run, so it names no dataset; index a corpus "
                              "with `momentsearch index CHECKPOINT --corpus DIR --out INDEX` and search that")
    return cfg
