"""Atomic writes: write to a temporary file beside the target, then rename over it.

An exception half-way leaves the old file untouched and no temporary behind. A process killed
half-way (kill -9, power loss) cannot clean up: its temporary is named ``.NAME.pidPID.*.tmp``
beside the target, and the next write to the same target deletes those of processes that are no
longer running. Written files get the mode an ordinary ``open(..., "w")`` would give (0666 less
the umask), not ``mkstemp``'s 0600.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from momentsearch.errors import MomentSearchError


def make_folder(folder: Path, target: Path) -> None:
    """Create ``folder`` (for ``target``) with its parents; a file in the way is the project's error, naming it."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next((p for p in [folder, *folder.parents] if p.exists() and not p.is_dir()), None)
        raise MomentSearchError(f"{target}: cannot create its folder, {blocker or folder} is a file") from None


def make_parent(target: Path) -> None:
    """Create ``target``'s folder; a file in the way is the project's error, naming it."""
    make_folder(target.parent, target)


def _temp_prefix(target: Path) -> str:
    return f".{target.name}.pid{os.getpid()}."


def _umask() -> int:
    """The process's umask, read without changing it where Linux allows."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def remove_stale_temporaries(target: Path) -> list[Path]:
    """Delete the temporaries (``.NAME.pidPID.*.tmp`` / ``.old``) that killed writers of ``target`` left
    behind; those of running processes are kept. Returns what was deleted."""
    removed = []
    prefix = f".{target.name}.pid"
    with contextlib.suppress(OSError):
        for p in target.parent.iterdir():
            if not (p.name.startswith(prefix) and p.name.endswith((".tmp", ".old"))):
                continue
            pid = p.name[len(prefix):].split(".", 1)[0]
            if not pid.isdigit() or _alive(int(pid)):
                continue
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    p.unlink()
            removed.append(p)
    return removed


def output_file(path: str | Path) -> Path:
    """Check before long work that ``path`` can be written as a file: not a folder, not under a file."""
    p = Path(path)
    if p.is_dir():
        raise MomentSearchError(f"{p}: is a folder; name a file to write")
    blocker = next((q for q in p.parents if q.exists() and not q.is_dir()), None)
    if blocker is not None:
        raise MomentSearchError(f"{p}: cannot create its folder, {blocker} is a file")
    return p


def output_folder(path: str | Path) -> Path:
    """``path`` created as a folder (with its parents); a file in the way is the project's error."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise MomentSearchError(f"{p}: is a file; name a folder to write into")
    make_folder(p, p)
    return p


@contextlib.contextmanager
def atomic_path(target: str | Path) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; on success rename it onto ``target``."""
    target = Path(target)
    if target.is_dir():
        raise MomentSearchError(f"{target}: is a folder; name a file to write")
    make_parent(target)
    remove_stale_temporaries(target)
    fd, tmp_name = tempfile.mkstemp(prefix=_temp_prefix(target), suffix=".tmp", dir=target.parent)
    os.fchmod(fd, 0o666 & ~_umask())
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


def _exchange(a: Path, b: Path) -> bool:
    """Swap two existing paths in one step (Linux renameat2 RENAME_EXCHANGE); False where that is unsupported."""
    if sys.platform != "linux":
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    return fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


@contextlib.contextmanager
def atomic_dir(target: str | Path) -> Iterator[Path]:
    """Yield a temporary folder beside ``target``; on success it replaces ``target`` as a whole, so a set
    of files is never a mix of old and new. The old and new folders are exchanged in one step
    (renameat2 RENAME_EXCHANGE), so at no moment is there no ``target``; where the system cannot, the
    old folder is renamed aside and the new one renamed in. On failure the old folder is untouched."""
    target = Path(target)
    if target.exists() and not target.is_dir():
        raise MomentSearchError(f"{target}: is a file; name a folder to write into")
    make_parent(target)
    remove_stale_temporaries(target)
    tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(target), suffix=".tmp", dir=target.parent))
    os.chmod(tmp, 0o777 & ~_umask())
    try:
        yield tmp
        replace_dir(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def replace_dir(new: Path, target: Path) -> None:
    """Put the finished folder ``new`` in place of ``target`` as a whole (exchanged in one step where the system
    can, else the old renamed aside first); the old folder is deleted."""
    target = Path(target)
    if target.exists() and _exchange(new, target):
        shutil.rmtree(new, ignore_errors=True)  # now the old folder
        return
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=_temp_prefix(target), suffix=".old", dir=target.parent))
        os.rmdir(old)
        os.replace(target, old)
    os.replace(new, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


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
            fh.write(json_line(rec))


def json_line(rec: Any) -> str:
    """One JSON Lines line (with its newline), UTF-8 where it can be."""
    line = json.dumps(rec, ensure_ascii=False)
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate ("\ud800" in the source JSON): escape it, losslessly
        line = json.dumps(rec, ensure_ascii=True)
    return line + "\n"


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
