"""Typed configs: dataclasses filled from YAML, with errors for unknown keys and wrong types."""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

from momentsearch.errors import ConfigError

T = TypeVar("T")
CONFIG_DIR = Path(__file__).resolve().parent / "configs"  # shipped inside the package


def resolve_config(path: str | Path) -> Path:
    """A YAML path as given, else the packaged config of that name: ``configs/xml/demo.yaml``,
    ``xml/demo.yaml`` and ``xml/demo`` all name ``momentsearch/configs/xml/demo.yaml``, so a
    non-editable install finds its configs from any directory."""
    p = Path(path)
    if p.is_file():
        return p
    parts = p.parts[1:] if p.parts[:1] == ("configs",) else p.parts
    if parts:
        cand = CONFIG_DIR.joinpath(*parts)
        for c in (cand, cand.with_suffix(".yaml")):
            if c.is_file():
                return c
    return p


def _coerce(value: Any, tp: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, where)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if errors else f"{where}: bad value {value!r}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return from_dict(tp, value, where)
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {value!r}")
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
        if origin is tuple:
            if len(value) != len(args):
                raise ConfigError(f"{where}: expected {len(args)} values, got {len(value)}")
            return tuple(_coerce(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args, strict=True)))
        return [_coerce(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return {k: _coerce(v, args[1], f"{where}.{k}") for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {value!r}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    return value


def from_dict(cls: type[T], data: dict[str, Any], where: str = "config") -> T:
    """Build dataclass ``cls`` from a mapping; unknown keys and wrong types raise ConfigError."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; known keys are {sorted(names)}")
    kwargs = {k: _coerce(v, hints[k], f"{where}.{k}") for k, v in data.items()}
    try:
        obj = cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"{where}: {e}") from None
    return obj


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML mapping from ``path`` (or the packaged config of that name, see :func:`resolve_config`)."""
    p = resolve_config(path)
    if not p.is_file():
        raise ConfigError(f"{p}: config file not found (packaged configs: {sorted(str(c.relative_to(CONFIG_DIR)) for c in CONFIG_DIR.rglob('*.yaml'))[:12]})")
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{p}: invalid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a mapping at the top level")
    return data


def load_yaml_config(cls: type[T], path: str | Path) -> T:
    return from_dict(cls, read_yaml(path), str(resolve_config(path)))


def to_dict(obj: Any) -> dict[str, Any]:
    def conv(v: Any) -> Any:
        if isinstance(v, tuple):
            return [conv(x) for x in v]
        if isinstance(v, dict):
            return {k: conv(x) for k, x in v.items()}
        return v

    return {k: conv(v) for k, v in dataclasses.asdict(obj).items()}
