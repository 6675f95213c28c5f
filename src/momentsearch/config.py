"""Typed configs: dataclasses filled from YAML, with errors for unknown keys and wrong types."""

from __future__ import annotations

import copy
import dataclasses
import enum
import math
import types
import typing
from pathlib import Path, PurePath
from typing import Any, TypeVar

from momentsearch.errors import ConfigError
from momentsearch.readers import read_yaml as read_yaml_file
from momentsearch.readers import read_yaml_text

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
        raise ConfigError(errors[0] if errors else f"{where}: bad value {_show(value)}")
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {_show(value)}")
        return from_dict(tp, value, where)
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {_show(value)}")
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return tuple(_coerce(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
        if origin is tuple:
            if len(value) != len(args):
                raise ConfigError(f"{where}: expected {len(args)} values, got {len(value)}")
            return tuple(_coerce(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args, strict=True)))
        return [_coerce(v, args[0], f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {_show(value)}")
        return {k: _coerce(v, args[1], f"{where}.{k}") for k, v in value.items()}
    if origin is typing.Literal:  # one of the listed values, of the listed type (true is not 1)
        if not any(value == a and type(value) is type(a) for a in args):
            raise ConfigError(f"{where}: must be one of {list(args)}, got {_show(value)}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{where}: expected a number, got {_show(value)}")
        if abs(value) > 1e300 or not math.isfinite(value):  # (a huge int overflows isfinite)
            raise ConfigError(f"{where}: expected a finite number, got {_show(value)}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {_show(value)}")
        if not -(2**63) <= value < 2**63:
            raise ConfigError(f"{where}: {_show(value)} is beyond a 64-bit integer")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true or false, got {_show(value)}")
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {_show(value)}")
        return value
    if isinstance(tp, type) and issubclass(tp, PurePath):
        if not isinstance(value, (str, PurePath)) or not str(value) or "\x00" in str(value):
            raise ConfigError(f"{where}: expected a path (a non-empty string), got {_show(value)}")
        return tp(value)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        try:
            return tp(value)
        except ValueError:
            raise ConfigError(f"{where}: must be one of {[m.value for m in tp]}, got {_show(value)}") from None
    if isinstance(tp, type) and not isinstance(value, tp):
        raise ConfigError(f"{where}: expected a {tp.__name__}, got {_show(value)}")
    return value


def _show(value: Any) -> str:
    """A value as an error shows it: cut, so that a megabyte string does not become the message."""
    if isinstance(value, int) and abs(value) >= 10**30:  # repr() of one over 4,300 digits raises
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def from_dict(cls: type[T], data: dict[str, Any], where: str = "config") -> T:
    """Build dataclass ``cls`` from a mapping; unknown keys and wrong types raise ConfigError."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    unknown = sorted(set(data) - names)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; known keys are {sorted(names)}")
    required = [f.name for f in dataclasses.fields(cls) if f.init and f.default is dataclasses.MISSING  # type: ignore[arg-type]
                and f.default_factory is dataclasses.MISSING]
    missing = [k for k in required if k not in data]
    if missing:
        raise ConfigError(f"{where}: missing key(s) {missing}")
    kwargs = {k: _coerce(v, hints[k], f"{where}.{k}") for k, v in data.items()}
    try:
        obj = cls(**kwargs)
    except (TypeError, ValueError, ArithmeticError, LookupError) as e:  # a __post_init__ check, or a value it trips on
        raise ConfigError(f"{where}: {e}") from None
    return obj


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML mapping from ``path`` (or the packaged config of that name, see :func:`resolve_config`)."""
    p = resolve_config(path)
    if not p.is_file():
        raise ConfigError(f"{p}: config file not found (packaged configs: {sorted(str(c.relative_to(CONFIG_DIR)) for c in CONFIG_DIR.rglob('*.yaml'))[:12]})")
    data = read_yaml_file(p, ConfigError, "config") or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a mapping at the top level")
    return data


def merge(base: dict[str, Any], overrides: dict[str, Any] | None) -> dict[str, Any]:
    """``base`` with ``overrides`` merged in, mapping by mapping at every depth: ``{"model": {"relevance":
    {"theta": 0.5}}}`` changes that one value and keeps the rest of ``model.relevance``. A value that is
    not a mapping (a list, a scalar) replaces the one it overrides. Neither argument is changed."""
    out = copy.deepcopy(base)
    for k, v in (overrides or {}).items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def parse_set(assignments: list[str] | tuple[str, ...]) -> dict[str, Any]:
    """``--set`` assignments (``model.relevance.theta=0.5``) as one nested override mapping. The value is
    read as YAML (``0.5`` a float, ``true`` a bool, ``[1, 2]`` a list, ``null`` None; quote it to keep
    a string); a later assignment to the same path wins."""
    out: dict[str, Any] = {}
    for text in assignments:
        key, sep, raw = text.partition("=")
        path = key.strip().split(".")
        if not sep or not all(p.strip() for p in path):
            raise ConfigError(f"--set {text!r}: expected KEY.PATH=VALUE, e.g. model.relevance.theta=0.5")
        value = read_yaml_text(raw, f"--set {text!r}: the value", ConfigError) if raw.strip() else ""
        group = out
        for i, p in enumerate(path[:-1]):
            nxt = group.setdefault(p.strip(), {})
            if not isinstance(nxt, dict):
                raise ConfigError(f"--set {text!r}: {'.'.join(path[:i + 1])} was set to a value above")
            group = nxt
        group[path[-1].strip()] = value
    return out


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
