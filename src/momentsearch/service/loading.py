"""Serving while the index loads: the port answers at once, ``/livez`` says the process is alive, ``/readyz``
and every other route say "not ready" (503, the project's JSON error, never a 500) until the index is
loaded and its encoders are warm; then the real app answers. A load that fails stops the server and its
error is what ``serve`` raises."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from momentsearch.service.security import json_reply


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
                batcher = getattr(getattr(self.app, "state", None), "batcher", None)
                if batcher is not None:
                    batcher.close()
                await send({"type": "lifespan.shutdown.complete"})
                return
