"""The search service: an HTTP API (FastAPI on uvicorn) and a web page over an index folder.

    momentsearch serve INDEX_DIR [--host 127.0.0.1] [--port 8000] [--first-stage auto]

or from Python: ``create_app(momentsearch.load(INDEX_DIR))`` and any ASGI server. Needs the
``service`` extra (fastapi, uvicorn; faiss-cpu and pymilvus for the approximate first stages).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def serve(index_dir: str | Path, host: str = "127.0.0.1", port: int = 8000, first_stage: str = "auto",
          first_stage_params: dict[str, str] | None = None, device: str = "auto", max_batch: int = 32,
          max_wait_ms: float = 0.0, log_level: str = "info", api_key: str | None = None,
          allow_unauthenticated: bool = False, cors_origins: list[str] | None = None,
          ssl_keyfile: str | None = None, ssl_certfile: str | None = None, timeout_ms: float = 30_000.0,
          access_log: bool = True, reload_index: bool = True, watch: str | Path | None = None,
          watch_interval: float = 2.0) -> None:
    """Load the index (building its first stage when missing) and serve it until interrupted. ``api_key``
    (else ``MOMENTSEARCH_API_KEY``) guards every route but ``/livez``; a non-loopback ``host`` without a key
    is refused unless ``allow_unauthenticated``. TLS: uvicorn's own ``ssl_keyfile`` and ``ssl_certfile``.
    ``timeout_ms``: a search's default timeout; ``access_log``: one JSON line per request on stdout (in place
    of uvicorn's text access log). ``reload_index``: when the index folder is rebuilt (``momentsearch index``
    or ``watch``), load it and swap to it between requests; ``watch``: a folder of videos to keep the index
    current with (:mod:`momentsearch.serving.watch`: ingest into the index's corpus, index, swap)."""
    import uvicorn

    from momentsearch.serving.searcher import load
    from momentsearch.service.app import create_app
    from momentsearch.service.security import api_key_from, check_bind

    api_key = api_key_from(api_key)
    check_bind(host, api_key, allow_unauthenticated)  # before minutes of loading, not after
    scheme = "https" if ssl_certfile else "http"

    from momentsearch.service.metrics import Metrics

    metrics = Metrics()  # one set of counters across swapped indexes

    def loaded() -> Any:
        import warnings

        from momentsearch.serving.freshness import StaleIndexWarning

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StaleIndexWarning)  # said below, once, plainly
            searcher = load(index_dir, device=device, progress=True, first_stage=first_stage,
                            first_stage_params=first_stage_params)
        searcher.search("warm up the text encoder", k=1)  # loads the text encoder before the first request
        app = create_app(searcher, max_batch=max_batch, max_wait_ms=max_wait_ms, api_key=api_key,
                         cors_origins=cors_origins, timeout_ms=timeout_ms, access_log=access_log, metrics=metrics)
        print(f"ready: {len(searcher.video_ids)} videos ({searcher.family.name}, first stage "
              f"{searcher.first_stage.spec}) on {scheme}://{host}:{port}/  (API docs: /docs"
              f"{'; API key required' if api_key else ''})", flush=True)
        if searcher.stale is not None:
            print(f"warning: {searcher.stale.message()}", flush=True)
        return app

    from momentsearch.service.loading import LoadingApp

    server: Any = None

    def stop(_: BaseException) -> None:
        server.should_exit = True

    loading = LoadingApp(loaded, on_error=stop)
    threads = []
    if reload_index or watch is not None:
        from momentsearch.service.loading import IndexReloader

        threads.append(IndexReloader(loading, index_dir, loaded, watch_interval, timeout_ms / 1000 + 5.0,
                                     log=lambda m: print(m, flush=True)))
    if watch is not None:
        threads.append(_watcher(Path(watch), Path(index_dir), watch_interval))
    if access_log:
        _log_access_to_stdout()
    server = uvicorn.Server(uvicorn.Config(loading, host=host, port=port, log_level=log_level, access_log=False,
                                           ssl_keyfile=ssl_keyfile, ssl_certfile=ssl_certfile))
    print(f"loading {index_dir}; {scheme}://{host}:{port}/readyz says when it is ready", flush=True)
    for t in threads:
        t.start()
    try:
        server.run()
    finally:
        for t in threads:
            t.stop.set()
    if loading.error is not None:
        raise loading.error


def _watcher(videos: Path, index_dir: Path, interval: float) -> Any:
    """A thread keeping the index (and its corpus) current with ``videos``; ``.start()``, ``.stop.set()``."""
    import threading

    from momentsearch.serving.indexing import read_index_info
    from momentsearch.serving.watch import Watcher

    corpus = Path(read_index_info(index_dir).corpus.path)
    watcher = Watcher(videos, corpus, index_dir, interval=interval)
    stop = threading.Event()

    def said(update: Any) -> None:
        print(update.summary(), flush=True)

    def failed(e: BaseException) -> None:
        print(f"watch {videos}: this round failed ({type(e).__name__}: {e}); the index is unchanged, trying again "
              "at the next change", flush=True)

    t = threading.Thread(target=watcher.run, args=(stop, said, failed), name="momentsearch-watch", daemon=True)
    t.stop = stop  # type: ignore[attr-defined]
    return t


def _log_access_to_stdout() -> None:
    """The ``momentsearch.access`` logger's JSON lines, one per request, on stdout as they are."""
    import logging
    import sys

    log = logging.getLogger("momentsearch.access")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False


def create_app(*args: Any, **kwargs: Any) -> Any:
    from momentsearch.service.app import create_app as _create

    return _create(*args, **kwargs)
