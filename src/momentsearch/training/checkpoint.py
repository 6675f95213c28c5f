"""Checkpoints: the family, its config, the training config and the versions beside the weights.

A checkpoint is a plain dict of tensors, numbers, strings, lists and dicts, so it loads with
``torch.load(weights_only=True)``: opening one never runs code from the file. A checkpoint of
another format version, of a family this installation does not know, or of another version of
its family gives a :class:`CheckpointError` that says which.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from momentsearch import __version__
from momentsearch.config import from_dict, to_dict
from momentsearch.errors import CheckpointError, ConfigError
from momentsearch.models.family import ModelFamily
from momentsearch.models.registry import create_family, family_names
from momentsearch.training.config import TrainConfig

FORMAT = "momentsearch-checkpoint"
FORMAT_VERSION = 2


def save_checkpoint(path: Path, family: ModelFamily, model: nn.Module, optimizer: torch.optim.Optimizer | None,
                    epoch: int, cfg: TrainConfig, history: list[dict[str, Any]]) -> None:
    from momentsearch.fileio import atomic_path

    state = {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "family": family.name, "family_version": family.version, "model_config": to_dict(family.cfg),
        "versions": {"momentsearch": __version__, "torch": str(torch.__version__)},
        "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "epoch": epoch, "train_config": to_dict(cfg), "history": history,
        # the dataset's paths relative to the checkpoint's folder: a moved run folder still finds them
        "dataset_relative": cfg.dataset.relative_to(path.parent),
    }
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def read_state(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if not p.is_file():
        raise CheckpointError(f"{p}: checkpoint not found")
    try:
        state = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch raises many kinds for a corrupt or unsafe file
        raise CheckpointError(f"{p}: not a readable momentsearch checkpoint ({type(e).__name__}: "
                              f"{str(e).splitlines()[0][:200]})") from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        old = isinstance(state, dict) and "model_config" in state and "family" not in state
        raise CheckpointError(
            f"{p}: written by momentsearch 0.1 (checkpoint format 1, no model family); this version reads format "
            f"{FORMAT_VERSION}: retrain with `momentsearch train`" if old else f"{p}: not a momentsearch checkpoint")
    if state.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"{p}: checkpoint format {state.get('format_version')}, this momentsearch "
                              f"({__version__}) reads format {FORMAT_VERSION}")
    return state


@dataclass
class Checkpoint:
    path: Path
    family: ModelFamily
    model: nn.Module
    train_config: TrainConfig
    state: dict[str, Any]

    @property
    def fingerprint(self) -> str:
        """Identifies these weights (an index built from them records it)."""
        st = self.path.stat()
        return hashlib.sha1(f"{self.path.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:16]


def family_of(state: dict[str, Any], where: str) -> ModelFamily:
    name = state.get("family")
    if name not in family_names():
        raise CheckpointError(f"{where}: a checkpoint of model family {name!r}, which this installation does "
                              f"not have (it has {family_names()})")
    try:
        family = create_family(state["model_config"])
    except ConfigError as e:
        raise CheckpointError(f"{where}: its model config does not load: {e}") from None
    if state.get("family_version") != family.version:
        raise CheckpointError(f"{where}: written by version {state.get('family_version')} of family {name!r}; "
                              f"this momentsearch has version {family.version}: retrain, or use the momentsearch "
                              f"{state.get('versions', {}).get('momentsearch', '?')} that wrote it")
    return family


def load_checkpoint(path: str | Path) -> Checkpoint:
    """The model (eval mode, on the CPU), its family and training config from a checkpoint file."""
    p = Path(path)
    state = read_state(p)
    family = family_of(state, str(p))
    cfg = from_dict(TrainConfig, state["train_config"], str(p))
    cfg = dataclasses.replace(cfg, dataset=cfg.dataset.relocated(state.get("dataset_relative", {}), p.parent))
    model = family.restore()
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as e:
        raise CheckpointError(f"{p}: the weights do not fit family {family.name!r}'s network: "
                              f"{str(e).splitlines()[0][:300]}") from None
    model.eval()
    return Checkpoint(p, family, model, cfg, state)
