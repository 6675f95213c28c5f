"""One process at a time trains a run folder.

Two trainers in one folder would interleave their checkpoints (each resumes from the other's ``last.pt``) and
leave a run that is neither. Training (``momentsearch train``, ``momentsearch.train``, every run of ``momentsearch
experiment``) holds an exclusive lock while it trains; a second one stops at once with :class:`RunBusyError`,
naming the process that holds it. The lock is ``flock`` on a file beside the folder (``runs/.xml.lock`` for
``runs/xml``), not inside it: a run continued from a shorter one replaces its folder as a whole. The kernel drops
the lock when its holder ends however it ends, so a killed trainer leaves no stale lock. Held per process and
re-entrant within it. Not on Windows (no ``fcntl``): there nothing is locked. ``flock`` on NFS locks only among
processes of one machine on some systems: train one run folder from one machine.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from momentsearch.errors import MomentSearchError

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

_held: set[str] = set()  # the lock paths this process holds (an inner run_lock of one of them is a no-op)


class RunBusyError(MomentSearchError, RuntimeError):
    """Another process is training this run folder."""


def lock_path(folder: str | Path) -> Path:
    folder = Path(folder).resolve()
    return folder.parent / f".{folder.name}.lock"


def _this_process() -> str:
    return f"pid {os.getpid()} on {socket.gethostname()}"


def _busy(fh: IO[str]) -> str | None:
    """Take the lock of open file ``fh`` without waiting: None when taken, else who holds it (the file's text)."""
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.seek(0)
        return fh.read().strip() or "a process that has not yet said which"
    return None


def lock_holder(folder: str | Path) -> str | None:
    """Who trains ``folder`` now ("pid N on HOST"), or None when no process does; writes nothing. It takes the lock
    for an instant to ask, so a trainer starting in that instant is refused (and says so). Without ``fcntl``
    (Windows) it cannot know and says "unknown"."""
    path = lock_path(folder)
    if str(path) in _held:
        return _this_process()
    if fcntl is None:
        return "unknown"
    if not path.exists():
        return None
    with open(path, encoding="utf-8") as fh:
        holder = _busy(fh)
        if holder is None:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
    return holder


@contextmanager
def run_lock(folder: str | Path) -> Iterator[None]:
    """Hold ``folder``'s training lock for the block; :class:`RunBusyError` at once when another process holds it."""
    path = lock_path(folder)
    if str(path) in _held:  # re-entrant: the outer block holds it and releases it
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", encoding="utf-8") as fh:
        if fcntl is not None and (owner := _busy(fh)) is not None:
            raise RunBusyError(f"{folder} is being trained by another process ({owner}; lock {path}): wait "
                               "for it to finish or stop it, then run the same command again (it resumes from "
                               "the run's last checkpoint)")
        fh.seek(0)
        fh.truncate()
        fh.write(_this_process() + "\n")
        fh.flush()
        _held.add(str(path))
        try:
            yield
        finally:
            _held.discard(str(path))
            fh.seek(0)
            fh.truncate()  # the lock itself goes with the file's close
