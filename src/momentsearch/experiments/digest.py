"""A run's folder name: a hash of the values its training config sets apart from the defaults, so that equal
conditions of different experiments share one run, and a setting added later at its default leaves a stored
run where it was."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from momentsearch.config import to_dict

HASH_IGNORED = ("device", "amp", "num_workers")  # where a run trains does not make it another run
# settings whose default changed: hashed against the old default, so that a run made before (which behaved as
# the old default) is not taken for a run of the new one, and one that asks for the old behaviour finds it
CHANGED_DEFAULTS: dict[tuple[str, ...], Any] = {("model", "relevance", "exclusion"): "batch",  # issue 75
                                                 ("model", "length_passes"): 1}  # MINUTE's, 2026-12-03
# ... where the setting changes what is trained: the exclusion only matters with a pair table
APPLIES: dict[tuple[str, ...], Any] = {
    ("model", "relevance", "exclusion"): lambda d: ((d.get("model") or {}).get("relevance") or {}).get(
        "method", "none") != "none"}
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


def _with_new_defaults(d: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """``d`` with each setting of :data:`CHANGED_DEFAULTS` that it leaves out written at today's default, and
    ``defaults`` with the old one, so the hash sees a setting whose behaviour changed."""
    import copy

    d = copy.deepcopy(d)
    for path, old in CHANGED_DEFAULTS.items():
        if not APPLIES.get(path, lambda _: True)(d):
            continue
        node, dnode = d, defaults
        for key in path[:-1]:
            if not isinstance(dnode.get(key), dict):
                break
            node = node.setdefault(key, {}) if isinstance(node.get(key, {}), dict) else {}
            dnode = dnode[key]
        else:
            if path[-1] in dnode:
                node.setdefault(path[-1], dnode[path[-1]])
                dnode[path[-1]] = old
    return d


def run_digest(d: dict[str, Any]) -> str:
    """A hash of the values a run's training config sets apart from the defaults (``TrainConfig``'s, and its
    model family's config's): a setting at its default, written or not, and an option added later at its
    default, leave the run (and its folder) as it was; where a run trains (device, amp, workers) is not hashed."""
    from momentsearch.data.dataset import DatasetConfig
    from momentsearch.models.registry import get_family
    from momentsearch.training.config import TrainConfig

    name = (d.get("model") or {}).get("name", "xml")
    family_defaults = _defaults(get_family(name).config_class)
    defaults = {**_defaults(TrainConfig), "dataset": _defaults(DatasetConfig), "model": family_defaults}
    d = _with_new_defaults(d, defaults)
    h = {k: v for k, v in d.items() if k not in HASH_IGNORED}
    apart = _set_apart(h, {k: v for k, v in defaults.items() if k not in HASH_IGNORED})
    apart = {} if apart is _MISSING else apart
    apart.setdefault("model", {})["name"] = name  # the family always names the run
    return hashlib.sha1(json.dumps(apart, sort_keys=True, default=str).encode()).hexdigest()[:8]
