"""A run's folder name: a hash of the values its training config sets apart from the defaults, so that equal
conditions of different experiments share one run, and a setting added later at its default leaves a stored
run where it was."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from momentsearch.config import to_dict

HASH_IGNORED = ("device", "amp", "num_workers")  # where a run trains does not make it another run
_MISSING = object()


def _set_apart(d: Any, defaults: Any) -> Any:
    """The parts of ``d`` that differ from ``defaults`` (nested dicts compared key by key; _MISSING: none)."""
    if isinstance(d, dict) and isinstance(defaults, dict):
        out = {}
        for k, v in d.items():
            diff = _set_apart(v, defaults.get(k, _MISSING))
            if diff is not _MISSING:
                out[k] = diff
        return out if out else _MISSING
    return _MISSING if d == defaults else d


def _defaults(cls: type) -> dict[str, Any]:
    """A config dataclass's default values, as ``to_dict`` writes them (fields without a default left out)."""
    import dataclasses

    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = to_dict(f.default) if dataclasses.is_dataclass(f.default) else f.default
        elif f.default_factory is not dataclasses.MISSING:
            v = f.default_factory()
            out[f.name] = to_dict(v) if dataclasses.is_dataclass(v) else v
    return out


def run_digest(d: dict[str, Any]) -> str:
    """A hash of the values a run's training config sets apart from the defaults (``TrainConfig``'s, and its
    model family's config's): a setting at its default, written or not, and an option added later at its
    default, leave the run (and its folder) as it was; where a run trains (device, amp, workers) is not hashed."""
    from momentsearch.data.dataset import DatasetConfig
    from momentsearch.models.registry import get_family
    from momentsearch.training.config import TrainConfig

    name = (d.get("model") or {}).get("name", "xml")
    defaults = {**_defaults(TrainConfig), "dataset": _defaults(DatasetConfig),
                "model": _defaults(get_family(name).config_class)}
    h = {k: v for k, v in d.items() if k not in HASH_IGNORED}
    apart = _set_apart(h, {k: v for k, v in defaults.items() if k not in HASH_IGNORED})
    apart = {} if apart is _MISSING else apart
    apart.setdefault("model", {})["name"] = name  # the family always names the run
    return hashlib.sha1(json.dumps(apart, sort_keys=True, default=str).encode()).hexdigest()[:8]
