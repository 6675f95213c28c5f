"""Worker processes that end with the process that started them.

A pool's workers (``ProcessPoolExecutor``, ``multiprocessing.Pool``) are not children that die with their parent:
kill ``momentsearch experiment`` (``kill PID``, a closed terminal, a session's end) and its workers train on, unseen,
each until its run ends, and the same command started again finds them still writing those runs. A worker
started with :func:`die_with_parent` as its initializer watches its parent's pid and ends itself (SIGTERM, the
default action: no handler runs, every file it wrote went through a temporary and a rename) within about a
second of the parent's end. Polling ``os.getppid`` works wherever Python does; Linux's ``PR_SET_PDEATHSIG`` would
fire when the *thread* that started the worker ends, which for a pool is not the parent's end.
"""

from __future__ import annotations

import os
import signal
import threading
import time

POLL_SECONDS = 1.0


def die_with_parent(parent: int, poll_seconds: float = POLL_SECONDS) -> None:
    """A pool's initializer (``initializer=die_with_parent, initargs=(os.getpid(),)``): end this process once
    ``parent`` is no longer its parent (it died; the worker was handed to init or a subreaper). ``parent`` is
    passed, not read here, so a parent that died before the worker started is seen too."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_seconds)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()
