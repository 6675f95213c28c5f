"""Reading untrusted files: the one place where JSON, YAML, ``.npy`` and ``.npz`` bytes become Python
objects, so that every failure of a parser becomes the project's error naming the file.

A parser fails in more ways than its documentation lists: ``json`` raises ``ValueError`` for an
integer of more than 4,300 digits (Python's integer-string limit) and ``RecursionError`` for deep
nesting; NumPy's ``.npy`` header parser raises ``EOFError``, ``SyntaxError``, ``tokenize.TokenError``,
``OverflowError`` or ``MemoryError`` on a broken header; YAML aliases can make a few hundred bytes
into a document of billions of nodes. The readers here catch each at its root and raise ``error``
(the caller's :class:`~momentsearch.errors.MomentSearchError` subclass) with the file and what was
wrong. The array checks say which dataset or key is of the wrong kind or shape.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from momentsearch.errors import MomentSearchError

ErrorType = Callable[[str], MomentSearchError]

MAX_YAML_BYTES = 1_000_000  # a config is a few kB; a megabyte is not one
MAX_YAML_NODES = 100_000  # after aliases are expanded (a "billion laughs" document stops here)
NUMERIC_KINDS = "fiub"  # float, signed and unsigned integer, bool: what a feature array may hold


def is_finite_number(x: Any) -> bool:
    """A real number (not a bool) that a float holds finitely; integers too large for a float (a JSON file may
    hold 10**400) are not."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return False
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


def is_file(path: Path) -> bool:
    """``path.is_file()``, False for a name the file system cannot hold (too long, a NUL) instead of an OSError:
    the names come from the files being read."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def exists(path: Path) -> bool:
    try:
        return path.exists()
    except (OSError, ValueError):
        return False


def read_bytes(path: str | Path, error: ErrorType, what: str = "file") -> bytes:
    p = Path(path)
    try:
        return p.read_bytes()
    except IsADirectoryError:
        raise error(f"{p}: is a folder, expected a {what}") from None
    except OSError as e:
        raise error(f"{p}: cannot read the {what} ({e.strerror or e})") from None


def decode_text(path: str | Path, raw: bytes, error: ErrorType) -> str:
    """UTF-8 text, a leading byte-order mark dropped; invalid UTF-8 names its line."""
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise error(f"{path}:{line}: not valid UTF-8: byte {raw[e.start]:#04x} at offset {e.start}; save the file "
                    "as UTF-8") from None


def parse_json_text(text: str, where: str, error: ErrorType, **kwargs: Any) -> Any:
    """``json.loads`` whose every failure (syntax, an integer too long for Python to read, nesting too
    deep) is ``error`` naming ``where`` and the line."""
    try:
        return json.loads(text, **kwargs)
    except json.JSONDecodeError as e:
        raise error(f"{where}:{e.lineno}: invalid JSON: {e.msg} (column {e.colno})") from None
    except ValueError as e:  # an integer of more than sys.get_int_max_str_digits() digits
        raise error(f"{where}: a number JSON cannot hold here ({str(e).split(';')[0][:160]})") from None
    except RecursionError:
        raise error(f"{where}: JSON nested too deeply to read") from None


def read_json(path: str | Path, error: ErrorType, what: str = "JSON file") -> Any:
    p = Path(path)
    return parse_json_text(decode_text(p, read_bytes(p, error, what), error), str(p), error)


def read_json_object(path: str | Path, error: ErrorType, what: str = "JSON file") -> dict[str, Any]:
    obj = read_json(path, error, what)
    if not isinstance(obj, dict):
        raise error(f"{path}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _count_nodes(obj: Any, where: str, error: ErrorType) -> None:
    """Walk a loaded YAML tree, aliases counted each time they are used; refuse one past MAX_YAML_NODES."""
    todo, n = [obj], 0
    while todo:
        o = todo.pop()
        n += 1
        if n > MAX_YAML_NODES:
            raise error(f"{where}: the document expands to more than {MAX_YAML_NODES:,} values (YAML aliases?); "
                        "not a config")
        if isinstance(o, dict):
            todo.extend(o.keys())
            todo.extend(o.values())
        elif isinstance(o, list):
            todo.extend(o)


@functools.cache
def _loader() -> Any:
    """PyYAML's SafeLoader, with YAML 1.2's floats: `1e-4` and `1e-06` (no dot) are numbers, as in JSON,
    not the strings YAML 1.1 makes of them, so `lr: 1e-4` and a run's own train_config.json read back."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.yaml_implicit_resolvers = {k: list(v) for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    Loader.add_implicit_resolver("tag:yaml.org,2002:float",
                                 re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
                                 list("-+0123456789."))
    return Loader


def read_yaml_text(text: str, where: str, error: ErrorType) -> Any:
    import yaml

    try:
        data = yaml.load(text, Loader=_loader())  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as e:
        raise error(f"{where}: invalid YAML: {str(e)[:300]}") from None
    except (RecursionError, ValueError, OverflowError) as e:  # deep nesting; a date or number yaml cannot build
        raise error(f"{where}: invalid YAML: {type(e).__name__}: {str(e)[:200]}") from None
    _count_nodes(data, where, error)
    return data


def read_yaml(path: str | Path, error: ErrorType, what: str = "YAML file") -> Any:
    p = Path(path)
    try:
        size = p.stat().st_size
    except OSError as e:
        raise error(f"{p}: cannot read the {what} ({e.strerror or e})") from None
    if size > MAX_YAML_BYTES:
        raise error(f"{p}: {size:,} bytes, larger than a {what} can be ({MAX_YAML_BYTES:,})")
    return read_yaml_text(decode_text(p, read_bytes(p, error, what), error), str(p), error)


def read_npy(path: str | Path, error: ErrorType, mmap: bool = False) -> np.ndarray:
    """An array from a ``.npy`` file (memory-mapped if ``mmap``), never a pickle. Whatever the header
    parser raises on a broken file (``EOFError``, ``SyntaxError``, ``OverflowError``...) is ``error``."""
    p = Path(path)
    if not is_file(p):
        raise error(f"{p}: missing")
    try:
        arr = np.load(p, mmap_mode="r" if mmap else None, allow_pickle=False)
    except MemoryError:
        raise error(f"{p}: its header asks for more memory than there is: corrupt") from None
    except Exception as e:  # noqa: BLE001 - numpy's header parser raises many kinds for a corrupt file
        raise error(f"{p}: corrupt or not a .npy file ({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''})"
                    ) from None
    if not isinstance(arr, np.ndarray):  # np.load also opens .npz archives
        raise error(f"{p}: holds a {type(arr).__name__} (an .npz archive?), not one .npy array")
    return arr


def read_npz(path: str | Path, error: ErrorType, keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """The arrays ``keys`` of an ``.npz`` archive, read whole (no pickles); a missing one is ``error``."""
    p = Path(path)
    if not is_file(p):
        raise error(f"{p}: missing")
    out: dict[str, np.ndarray] = {}
    try:
        with np.load(p, allow_pickle=False) as z:
            if not hasattr(z, "files"):
                raise error(f"{p}: one .npy array, not an .npz archive")
            missing = [k for k in keys if k not in z.files]
            if missing:
                raise error(f"{p}: no array {missing[0]!r} (it holds {sorted(z.files)[:10]})")
            for k in keys:
                out[k] = z[k]
    except MomentSearchError:
        raise
    except MemoryError:
        raise error(f"{p}: an array's header asks for more memory than there is: corrupt") from None
    except Exception as e:  # noqa: BLE001 - zipfile and numpy raise many kinds for a corrupt archive
        raise error(f"{p}: corrupt or not an .npz archive ({type(e).__name__}: {str(e)[:200]})") from None
    return out


def check_array(arr: Any, where: str, error: ErrorType, *, ndim: int | None = None, kinds: str = NUMERIC_KINDS,
                length: int | None = None, finite: bool = False) -> np.ndarray:
    """``arr`` as read, checked: an ndarray of one of ``kinds`` (numpy dtype kinds), of ``ndim``
    dimensions and ``length`` rows, finite if asked."""
    if not isinstance(arr, np.ndarray):
        raise error(f"{where}: expected an array, got {type(arr).__name__}")
    if arr.dtype.kind not in kinds or arr.dtype.fields is not None:
        raise error(f"{where}: holds {arr.dtype} values, expected {_kind_names(kinds)}")
    if ndim is not None and arr.ndim != ndim:
        raise error(f"{where}: expected {ndim} dimension(s), got shape {arr.shape}")
    if length is not None and (arr.ndim == 0 or len(arr) != length):
        raise error(f"{where}: {len(arr) if arr.ndim else 'no'} rows where {length} are expected")
    if finite and arr.dtype.kind == "f" and not np.isfinite(arr).all():
        raise error(f"{where}: contains NaN or inf")
    return arr


def _kind_names(kinds: str) -> str:
    names = {"f": "floats", "i": "integers", "u": "unsigned integers", "b": "booleans", "U": "strings"}
    return " or ".join(names.get(k, k) for k in kinds)
