"""Checkpoints: the family, its config, the training run's config and the versions beside the weights.

Reading one needs no trainer: :class:`Checkpoint` keeps the run's config as stored (``run``) and reads
from it only what search needs (``search_settings``, ``dataset``); ``training.checkpoint`` gives the
typed training config and writes checkpoints while training. A checkpoint is a plain dict of tensors, numbers, strings, lists and dicts, so it loads with
``torch.load(weights_only=True)``: opening one never runs code from the file. A checkpoint of
another format version, of a family this installation does not know, or of another version of
its family gives a :class:`CheckpointError` that says which.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
from torch import nn

from momentsearch.config import from_dict, to_dict
from momentsearch.data.dataset import DatasetConfig
from momentsearch.errors import CheckpointError, ConfigError
from momentsearch.models.family import ModelFamily
from momentsearch.models.registry import create_family, family_names, stored_family_config
from momentsearch.serving.index_info import K_VIDEOS, NMS_THRESHOLD, SearchSettings
from momentsearch.version import __version__

FORMAT = "momentsearch-checkpoint"
FORMAT_VERSION = 2




@dataclass(frozen=True)
class CheckpointHeader:
    """Everything a checkpoint file holds but its tensors: the format's one typed record.

    ``train_config``: the training run's config as a dict (None: a model packed without a training run);
    ``dataset_relative``: its dataset's paths relative to the checkpoint's folder (a moved run folder still
    finds them); ``features``: the identity of the visual features the model reads (encoder name, version,
    config, dim); ``text_encoder``: the query encoder's identity (``text.query_encoders``)."""
    family: str
    model_config: dict[str, Any]
    family_version: Any = None
    versions: dict[str, Any] = field(default_factory=dict)
    epoch: int = 0
    train_config: dict[str, Any] | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    dataset_relative: dict[str, Any] = field(default_factory=dict)
    features: dict[str, Any] | None = None
    text_encoder: dict[str, Any] | str | None = None


@dataclass
class StoredCheckpoint:
    """One checkpoint file: its header, its weights and (while training) the optimizer's state; one reader
    (:meth:`read`) and one writer (:meth:`write`)."""
    header: CheckpointHeader
    model: dict[str, torch.Tensor]
    optimizer: dict[str, Any] | None = None

    @classmethod
    def read(cls, path: str | Path) -> StoredCheckpoint:
        p = Path(path)
        if not p.is_file():
            raise CheckpointError(f"{p}: checkpoint not found")
        try:
            state = torch.load(p, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - torch raises many kinds for a corrupt or unsafe file
            first = (str(e).splitlines() or [""])[0][:200]
            raise CheckpointError(f"{p}: not a readable momentsearch checkpoint ({type(e).__name__}: {first}); "
                                  f"{_what_it_is(p)}") from None
        if not isinstance(state, dict) or not _equals(state.get("format"), FORMAT):
            old = isinstance(state, dict) and "model_config" in state and "family" not in state
            raise CheckpointError(
                f"{p}: written by momentsearch 0.1 (checkpoint format 1, no model family); this version reads format "
                f"{FORMAT_VERSION}: retrain with `momentsearch train`" if old else f"{p}: not a momentsearch checkpoint")
        if not _equals(state.get("format_version"), FORMAT_VERSION):
            raise CheckpointError(f"{p}: checkpoint format {str(state.get('format_version'))[:40]}, this momentsearch "
                                  f"({__version__}) reads format {FORMAT_VERSION}")
        _check_fields(state, p)
        header = CheckpointHeader(**{f.name: state[f.name] for f in fields(CheckpointHeader) if f.name in state})
        return cls(header, state["model"], state.get("optimizer"))

    def write(self, path: Path) -> None:
        """``path``, atomically: a plain dict of tensors, numbers, strings, lists and dicts."""
        from momentsearch.fileio import atomic_path

        state = {"format": FORMAT, "format_version": FORMAT_VERSION, **asdict(self.header), "model": self.model,
                 "optimizer": self.optimizer}
        with atomic_path(path) as tmp:
            torch.save(state, tmp)


def write_checkpoint(path: Path, family: ModelFamily, model: nn.Module, optimizer: torch.optim.Optimizer | None,
                     epoch: int, run: dict[str, Any] | None, dataset_relative: dict[str, Any],
                     history: list[dict[str, Any]], features: dict[str, Any] | None = None) -> None:
    """A checkpoint of ``model`` as ``family`` (the fields: :class:`CheckpointHeader`)."""
    header = CheckpointHeader(family.name, to_dict(family.cfg), family.version,
                              {"momentsearch": __version__, "torch": str(torch.__version__)}, epoch, run, history,
                              dataset_relative, features, family.text_encoder)
    StoredCheckpoint(header, {k: v.detach().cpu() for k, v in model.state_dict().items()},
                     optimizer.state_dict() if optimizer is not None else None).write(path)


def _equals(value: Any, expected: Any) -> bool:
    """``value == expected`` for a value of any type (a tensor's == is not a bool)."""
    return type(value) is type(expected) and value == expected


FIELDS: dict[str, tuple[type, ...]] = {  # what each field of a checkpoint must be (None where it may be)
    "family": (str,), "model_config": (dict,), "model": (dict,), "train_config": (dict, type(None)),
    "history": (list,), "features": (dict, type(None)), "dataset_relative": (dict,), "epoch": (int,),
    "optimizer": (dict, type(None)), "text_encoder": (dict, str, type(None)), "versions": (dict,),
}
REQUIRED = ("family", "model_config", "model")


def _check_fields(state: dict[str, Any], p: Path) -> None:
    for key, kinds in FIELDS.items():
        if (key in state or key in REQUIRED) and not isinstance(state.get(key), kinds):
            raise CheckpointError(f"{p}: field {key!r} is a {type(state.get(key)).__name__}, expected "
                                  f"{' or '.join(k.__name__ for k in kinds)}: not a checkpoint momentsearch wrote")
    for name, t in state["model"].items():
        if not isinstance(name, str) or not isinstance(t, torch.Tensor):
            raise CheckpointError(f"{p}: weight {str(name)[:80]!r} is a {type(t).__name__}, not a tensor")
        if t.is_floating_point() and not bool(torch.isfinite(t).all()):
            raise CheckpointError(f"{p}: weight {name!r} holds NaN or inf: the model diverged or the file is corrupt")


def _what_it_is(p: Path) -> str:
    """A guess at what a file that is not a checkpoint is, for the error."""
    try:
        with open(p, "rb") as fh:
            head = fh.read(512)
    except OSError:
        return "it cannot be read"
    if not head:
        return "the file is empty"
    if head.startswith(b"PK\x03\x04"):
        return "it is a zip archive (torch's format) that is truncated or damaged, or not torch's"
    if head.startswith(b"\x93NUMPY"):
        return "it is a NumPy .npy array, not a checkpoint"
    if head.startswith(b"\x80"):
        return "it is a Python pickle of something a checkpoint does not hold (refused: it could run code)"
    if head.startswith(b"\x89HDF"):
        return "it is an HDF5 file (features?), not a checkpoint"
    try:
        head.decode("utf-8")
        return "it is a text file, not a checkpoint"
    except UnicodeDecodeError:
        return "its bytes are not any format momentsearch writes"


def pack_checkpoint(path: str | Path, family: ModelFamily, model: nn.Module, features: dict[str, Any]) -> Path:
    """A checkpoint without a training run: a family that needs no training (``clip``), or a network
    as built. ``features``: the identity of the visual features it reads."""
    p = Path(path)
    write_checkpoint(p, family, model, None, 0, None, {}, [], features)
    return p


@dataclass
class Checkpoint:
    path: Path
    family: ModelFamily
    model: nn.Module
    stored: StoredCheckpoint
    _fingerprint: str | None = None

    @property
    def header(self) -> CheckpointHeader:
        return self.stored.header

    @property
    def run(self) -> dict[str, Any] | None:
        """The training run's config as stored (None: packed without a training run)."""
        return self.header.train_config

    @property
    def fingerprint(self) -> str:
        """Identifies these weights by content (family, config and every tensor), wherever the file lies."""
        if self._fingerprint is None:
            h = hashlib.sha1(f"{self.family.name}:{self.family.version}".encode())
            h.update(repr(sorted(self.header.model_config.items(), key=str)).encode())
            for k, v in sorted(self.stored.model.items()):
                h.update(k.encode())
                h.update(v.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
            self._fingerprint = h.hexdigest()[:16]
        return self._fingerprint

    @property
    def features(self) -> dict[str, Any] | None:
        """What made the features the model was trained on (None: a checkpoint from before this was recorded)."""
        return self.header.features

    def search_settings(self) -> SearchSettings:
        """How the run searched (k_videos, nms_threshold), or the defaults for a packed model."""
        run = self.run or {}
        k, nms = run.get("k_videos", K_VIDEOS), run.get("nms_threshold", NMS_THRESHOLD)  # how its run searched
        if not (type(k) is int and k >= 1 and type(nms) in (int, float) and 0 <= nms <= 1):
            raise CheckpointError(f"{self.path}: its run config holds k_videos {str(k)[:40]!r} and nms_threshold "
                                  f"{str(nms)[:40]!r}; expected an int >= 1 and a number in [0, 1]")
        return SearchSettings(k, float(nms))

    def dataset(self) -> DatasetConfig | None:
        """The dataset the run trained on, its paths found from the checkpoint's folder (None: packed)."""
        run = self.run
        if run is None:
            return None
        if not isinstance(run.get("dataset"), dict):
            raise CheckpointError(f"{self.path}: its run config names no dataset")
        cfg = from_dict(DatasetConfig, run["dataset"], f"{self.path} (dataset)")
        return cfg.relocated(self.header.dataset_relative, self.path.parent)

    def require_dataset(self) -> DatasetConfig:
        cfg = self.dataset()
        if cfg is None:
            raise CheckpointError(f"{self.path}: packed without a training run, so it names no dataset; index a corpus "
                                  "with `momentsearch index CHECKPOINT --corpus DIR --out INDEX` and search that")
        return cfg


def family_of(header: CheckpointHeader, where: str) -> ModelFamily:
    name = header.family
    if name not in family_names():
        raise CheckpointError(f"{where}: a checkpoint of model family {name!r}, which this installation does "
                              f"not have (it has {family_names()})")
    try:
        family = create_family(stored_family_config(header.model_config))
    except ConfigError as e:
        raise CheckpointError(f"{where}: its model config does not load: {e}") from None
    if not _equals(header.family_version, family.version):
        raise CheckpointError(f"{where}: written by version {header.family_version} of family {name!r}; "
                              f"this momentsearch has version {family.version}: retrain, or use the momentsearch "
                              f"{header.versions.get('momentsearch', '?')} that wrote it")
    return family


def load_checkpoint(path: str | Path) -> Checkpoint:
    """The model (eval mode, on the CPU) and its family from a checkpoint file; the run's config stays as
    stored (``training.checkpoint.train_config_of`` reads it typed)."""
    p = Path(path)
    stored = StoredCheckpoint.read(p)
    family = family_of(stored.header, str(p))
    try:
        model = family.restore()
    except Exception as e:  # noqa: BLE001 - a config value no network can be built with (a stored config checks less)
        raise CheckpointError(f"{p}: its model config builds no network ({type(e).__name__}: {str(e)[:200]})") from None
    try:
        model.load_state_dict(stored.model)
    except RuntimeError as e:
        raise CheckpointError(f"{p}: the weights do not fit family {family.name!r}'s network: "
                              f"{str(e).splitlines()[0][:300]}") from None
    model.eval()
    return Checkpoint(p, family, model, stored)
