"""Schedules over epochs, for every family: the learning rate by milestones, and any float setting of
the model's config (a loss weight, a temperature) from a given epoch on.

    lr_milestones: [8, 11]            # x lr_gamma at the start of epochs 8 and 11 (0-based)
    lr_gamma: 0.1
    weight_schedule:                  # model config key -> [[from epoch (0-based), value], ...]
      lambda_rmm: [[7, 0.01]]         # MMN's released recipe lowers the contrastive weight after 7 epochs

The trainer sets the learning rate and the model config at the start of every epoch from the values
the run started with, so a resumed run continues on the same schedule. A family's own adjustment (MMN's
hard stage at lr x ``hard_negative_lr_scale``) applies on top.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from torch import nn

from momentsearch.readers import is_finite_number


def lr_factor(epoch: int, milestones: Sequence[int], gamma: float) -> float:
    """gamma ^ (the number of milestones at or before ``epoch``)."""
    return gamma ** sum(1 for m in milestones if epoch >= m)


def check_weight_schedule(model_cfg: Any, schedule: Mapping[str, Any], where: str = "weight_schedule") -> None:
    """Each key a float field of the model config, each entry [epoch >= 0, finite value], epochs rising."""
    hints = typing.get_type_hints(type(model_cfg))
    floats = sorted(f.name for f in dataclasses.fields(model_cfg) if hints.get(f.name) is float)
    for key, points in schedule.items():
        if key not in floats:
            raise ValueError(f"{where}.{key}: not a float setting of the {type(model_cfg).__name__}; "
                             f"those are {floats}")
        if not isinstance(points, list) or not points:
            raise ValueError(f"{where}.{key}: expected a list of [epoch, value] pairs")
        last = -1
        for p in points:
            if (not isinstance(p, (list, tuple)) or len(p) != 2 or not all(
                    is_finite_number(x) for x in p)
                    or not float(p[0]).is_integer()):  # a typed config reads the epoch as a float: 7.0
                raise ValueError(f"{where}.{key}: each entry must be [epoch (an integer), value (a finite number)], "
                                 f"got {p!r}")
            if p[0] <= last:
                raise ValueError(f"{where}.{key}: epochs must be >= 0 and rise, got {p[0]} after {last}")
            last = p[0]


def model_config_at(base: Any, schedule: Mapping[str, Sequence[Sequence[float]]], epoch: int) -> Any:
    """``base`` with each scheduled key at its value for ``epoch`` (the last entry whose epoch has come)."""
    values = {}
    for key, points in schedule.items():
        reached = [v for e, v in points if epoch >= e]
        if reached:
            values[key] = float(reached[-1])
    return dataclasses.replace(base, **values) if values else base


def set_model_config(family: Any, model: nn.Module, cfg: Any) -> None:
    """The family's config and the network's copy of it (MMN's loss reads the network's) become ``cfg``."""
    family.cfg = cfg
    if type(getattr(model, "cfg", None)) is type(cfg):
        model.cfg = cfg
