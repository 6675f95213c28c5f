"""Model families by name: ``model: {name: xml}`` in YAML, ``create_family(...)`` in code.

Built-in families register when their package is imported; families from other packages register
through the ``momentsearch.families`` entry-point group (``name = "pkg.module:FamilyClass"``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from momentsearch.errors import ConfigError
from momentsearch.models.family import ModelFamily
from momentsearch.plugins import Registry

BUILTIN = ("momentsearch.models.xml", "momentsearch.models.minute", "momentsearch.models.mmn",
           "momentsearch.models.span", "momentsearch.models.clip")
_REGISTRY: Registry = Registry("name", "momentsearch.families", BUILTIN, unique=True)
FAMILIES: dict[str, type[ModelFamily]] = _REGISTRY.classes


def register(cls: type[ModelFamily]) -> type[ModelFamily]:
    """Class decorator: make a family available under ``cls.name``."""
    try:
        return _REGISTRY.register(cls)
    except ValueError as e:
        raise ValueError(f"model family {e}") from None


def family_names() -> list[str]:
    return _REGISTRY.names()


def get_family(name: str) -> type[ModelFamily]:
    _REGISTRY.load()
    if name not in FAMILIES:
        raise ConfigError(f"unknown model family {name!r}; known families: {sorted(FAMILIES)}")
    return FAMILIES[name]


def family_config(data: Mapping[str, Any] | Any, where: str = "model") -> Any:
    """The typed config of the family that ``data['name']`` names (a config object passes through)."""
    from momentsearch.config import from_dict

    if not isinstance(data, Mapping):
        get_family(getattr(data, "name", ""))  # a typed config: check that its family exists
        return data
    if "name" not in data:
        raise ConfigError(f"{where}: say which model family with `name:` (one of {family_names()})")
    if not isinstance(data["name"], str):
        raise ConfigError(f"{where}.name: a family name (one of {family_names()}), got {str(data['name'])[:40]}")
    fam = get_family(data["name"])
    return check_sizes(from_dict(fam.config_class, dict(data), where), where)


# Network sizes every family shares by name: what no network can be built with is refused here, naming
# the field, rather than by a layer's constructor deep inside ``build``.
AT_LEAST_ONE = ("hidden", "n_heads", "max_clips", "max_tokens", "num_clips", "conv_kernel", "kernel_size", "layers",
                "mlp_layers", "query_layers", "joint_dim", "context_length",
                "localizer_batch_size")
NON_NEGATIVE = ("visual_dim", "subtitle_dim", "query_dim", "hard_pool_size", "n_negatives", "hard_negative_start_epoch",
                "queries_per_video", "retriever_epochs", "weight_decay", "margin")
MAX_SIZE = 8192  # any of AT_LEAST_ONE (beyond every paper's: TVR's 100 clips, MMN's 512 channels)
MAX_INPUT_DIM = 65536  # visual_dim, subtitle_dim, query_dim
MAX_COUNT = 2**20  # the other NON_NEGATIVE integers (negatives, pools, epochs)


def check_sizes(cfg: Any, where: str) -> Any:
    """Sizes no network can be built with, or none in memory: a ConfigError naming the key, before
    ``build`` would fail inside a layer's constructor or try to allocate terabytes."""
    for name in AT_LEAST_ONE:
        v = getattr(cfg, name, None)
        if isinstance(v, int) and not 1 <= v <= MAX_SIZE:
            raise ConfigError(f"{where}.{name}: must lie in [1, {MAX_SIZE}], got {v}")
    for name in NON_NEGATIVE:
        v = getattr(cfg, name, None)
        top = MAX_INPUT_DIM if name.endswith("_dim") else MAX_COUNT
        if isinstance(v, int) and not isinstance(v, bool) and v > top:
            raise ConfigError(f"{where}.{name}: must be <= {top}, got {v}")
        if isinstance(v, (int, float)) and v < 0:
            raise ConfigError(f"{where}.{name}: must be >= 0, got {v}")
    dropout = getattr(cfg, "dropout", None)
    if isinstance(dropout, float) and not 0 <= dropout < 1:
        raise ConfigError(f"{where}.dropout: must lie in [0, 1), got {dropout}")
    hidden, heads = getattr(cfg, "hidden", None), getattr(cfg, "n_heads", None)
    if isinstance(hidden, int) and isinstance(heads, int) and hidden % heads:
        raise ConfigError(f"{where}.hidden: {hidden} must be a multiple of n_heads ({heads})")
    return cfg


def stored_family_config(data: Mapping[str, Any]) -> dict[str, Any]:
    """A family config as a checkpoint stored it, read as this version reads it (see
    ``ModelFamily.stored_config``); an unknown family passes through for the caller to report."""
    name = data.get("name")
    if name not in family_names():
        return dict(data)
    return get_family(str(name)).stored_config(dict(data))


def create_family(cfg: Mapping[str, Any] | Any) -> ModelFamily:
    """A family instance from its config (typed, or a mapping with ``name``), like timm's ``create_model``."""
    typed = family_config(cfg)
    return get_family(typed.name)(typed)
