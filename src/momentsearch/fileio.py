"""Atomic writes: write to a temporary file beside the target, then rename over it.

A crash or an exception half-way leaves the old file untouched and no temporary behind.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from momentsearch.errors import MomentSearchError


def make_parent(target: Path) -> None:
    """Create ``target``'s folder; a file in the way is the project's error, naming it."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next((p for p in [target.parent, *target.parent.parents] if p.exists() and not p.is_dir()), None)
        raise MomentSearchError(f"{target}: cannot create its folder, {blocker or target.parent} is a file") from None


def output_folder(path: str | Path) -> Path:
    """``path`` created as a folder (with its parents); a file in the way is the project's error."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise MomentSearchError(f"{p}: is a file; name a folder to write into")
    make_parent(p / "x")
    return p


@contextlib.contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; on success rename it onto ``target``."""
    target = Path(target)
    if target.is_dir():
        raise MomentSearchError(f"{target}: is a folder; name a file to write")
    make_parent(target)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        raise


@contextlib.contextmanager
def atomic_open(target: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO[Any]]:
    """Open a temporary file for writing; it replaces ``target`` only if the block succeeds."""
    if "b" in mode:
        encoding = None
    with atomic_path(target) as tmp, open(tmp, mode, encoding=encoding) as fh:
        yield fh


@contextlib.contextmanager
def atomic_dir(target: str | Path) -> Iterator[Path]:
    """Yield a temporary folder beside ``target``; on success it replaces ``target`` as a whole
    (the old folder is renamed aside, the new one renamed in, the old one deleted), so a set of
    files is never a mix of old and new. On failure the old folder is untouched."""
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise MomentSearchError(f"{target}: is a file; name a folder to write into")
    make_parent(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        yield tmp
        old = None
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.parent))
            os.rmdir(old)
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def json_safe(obj: Any) -> Any:
    """``obj`` with every NaN or infinite float replaced by None, so that strict JSON parsers read it."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def write_json(target: str | Path, obj: Any, indent: int | None = 2) -> None:
    """Strict JSON (NaN and infinities written as null), atomically."""
    with atomic_open(target) as fh:
        json.dump(json_safe(obj), fh, indent=indent, allow_nan=False)
        fh.write("\n")


def write_jsonl(target: str | Path, records: Iterable[Any]) -> None:
    with atomic_open(target) as fh:
        for rec in records:
            line = json.dumps(rec, ensure_ascii=False)
            try:
                line.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate ("\ud800" in the source JSON): escape it, losslessly
                line = json.dumps(rec, ensure_ascii=True)
            fh.write(line)
            fh.write("\n")


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building or parsing millions of small lists
    (a TVR submission): they hold no cycles, and collections triggered by their allocation
    would otherwise cost more than the work itself."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
