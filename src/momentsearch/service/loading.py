"""Serving while the index loads: the port answers at once, ``/livez`` says the process is alive, ``/readyz``
and every other route say "not ready" (503, the project's JSON error, never a 500) until the index is
loaded and its encoders are warm; then the real app answers. A load that fails stops the server and its
error is what ``serve`` raises.

**Swapping indexes.** :class:`IndexReloader` watches the index folder; when ``momentsearch index`` (or
``watch``) replaces it, a new app is loaded and warmed beside the one serving, then :meth:`LoadingApp.replace`
puts it in place between two requests: a request is answered whole by the old app or by the new one, none
fails. The old app's batcher (and a sharded index's shards) are closed once the requests it took have had their time (``grace``). A reload
that fails leaves the old index serving and says why."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from typing import Any

from momentsearch.service.security import json_reply


def settle_heap() -> None:
    """Keep the cyclic garbage collector off what a loaded index holds. At 100,000 videos the index, its corpus and
    the model are millions of Python objects that live as long as the process; each full collection walked them
    all, and under 16 clients those pauses were the served p99 (1.1-1.2 s against 0.35-0.42 s with collections
    made rare; ``docs/query_cost.md``). ``gc.freeze`` moves every object alive now out of the collector's
    generations; what an earlier freeze kept (a swapped-out index) goes back first and is collected if unreachable.
    Reference counting frees objects as before."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


class LoadingApp:
    """ASGI app: ``load()`` (which returns the real app) runs in a thread from the lifespan's startup."""

    def __init__(self, load: Callable[[], Any], on_error: Callable[[BaseException], None] | None = None):
        self._load, self._on_error = load, on_error
        self.app: Any = None
        self.error: BaseException | None = None
        self.started = time.monotonic()
        self._thread: threading.Thread | None = None

    def _run(self) -> None:
        try:
            self.app = self._load()
            settle_heap()  # the loaded index out of the collector's way (a swapped-in one: replace's retire)
        except BaseException as e:  # noqa: BLE001 - kept, reported by /readyz and raised by serve
            self.error = e
            if self._on_error is not None:
                self._on_error(e)

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="momentsearch-load", daemon=True)
            self._thread.start()

    def wait(self, timeout: float | None = None) -> bool:
        """True once loading ended (loaded or failed)."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.app is not None or self.error is not None

    def replace(self, app: Any, grace: float = 5.0) -> None:
        """Serve ``app`` from the next request on; the old app's batcher closes ``grace`` seconds later."""
        old, self.app = self.app, app
        state = getattr(old, "state", None)
        closers = [getattr(getattr(state, name, None), "close", None) for name in ("batcher", "searcher")]
        closers = [c for c in closers if c is not None]  # a sharded index's searcher stops its shards' actors
        del old, state

        def retire() -> None:  # the old app's batcher and shards closed, then its objects let go of (settle_heap)
            for close in closers:
                close()
            closers.clear()
            settle_heap()

        timer = threading.Timer(grace, retire)
        timer.daemon = True
        timer.start()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await self._lifespan(receive, send)
        if self.app is not None:
            return await self.app(scope, receive, send)
        if scope["type"] != "http":
            return
        if scope["path"] == "/livez":
            return await json_reply(send, 200, {"status": "alive"})
        why = (f"not ready: loading the index failed ({self.error})" if self.error is not None else
               f"not ready: loading the index ({time.monotonic() - self.started:.0f} s so far); retry shortly")
        await json_reply(send, 503, {"error": why}, [(b"retry-after", b"5")])

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.start()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                state = getattr(self.app, "state", None)
                for name in ("batcher", "searcher"):
                    close = getattr(getattr(state, name, None), "close", None)
                    if close is not None:
                        close()
                await send({"type": "lifespan.shutdown.complete"})
                return


class IndexReloader:
    """Polls an index folder's version (:func:`~momentsearch.serving.freshness.index_version`) every ``interval``
    seconds; on a change, ``load()`` (a new app over the folder) and ``target.replace`` it in."""

    def __init__(self, target: LoadingApp, index_dir: Any, load: Callable[[], Any], interval: float = 2.0,
                 grace: float = 5.0, log: Callable[[str], None] = print):
        from momentsearch.serving.freshness import index_version

        self.target, self.index_dir, self.load = target, index_dir, load
        self.interval, self.grace, self.log = interval, grace, log
        self._version = index_version
        self.seen = index_version(index_dir)
        self.swaps = 0
        self.stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="momentsearch-reload", daemon=True)

    def start(self) -> IndexReloader:
        self._thread.start()
        return self

    def check(self) -> bool:
        """One poll: True when a new index was swapped in."""
        v = self._version(self.index_dir)
        if v is None or v == self.seen or self.target.app is None:
            return False
        self.seen = v
        t = time.monotonic()
        try:
            app = self.load()
        except Exception as e:  # noqa: BLE001 - the index serving stays; the next rebuild is tried again
            self.log(f"the index at {self.index_dir} changed but could not be loaded ({type(e).__name__}: {e}); "
                     "still serving the previous one")
            return False
        self.target.replace(app, self.grace)
        self.swaps += 1
        self.log(f"swapped to the rebuilt index at {self.index_dir} (loaded in {time.monotonic() - t:.1f} s)")
        return True

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            self.check()
