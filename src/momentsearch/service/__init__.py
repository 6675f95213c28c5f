"""The search service: an HTTP API (FastAPI on uvicorn) and a web page over an index folder.

    momentsearch serve INDEX_DIR [--host 127.0.0.1] [--port 8000] [--first-stage auto]

or from Python: ``serve(INDEX_DIR, ServiceSettings(port=8080))``, or ``create_app(momentsearch.load(INDEX_DIR))``
and any ASGI server. Needs the
``service`` extra (fastapi, uvicorn; faiss-cpu and pymilvus for the approximate first stages).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from momentsearch.console import say
from momentsearch.service.settings import ServiceSettings


def serve(index_dir: str | Path, settings: ServiceSettings | None = None, **changes: Any) -> None:
    """Load the index (building its first stage when missing) and serve it until interrupted, as ``settings``
    (:class:`~momentsearch.service.settings.ServiceSettings`, with ``changes`` applied) say. ``api_key`` (else
    ``MOMENTSEARCH_API_KEY``) guards every route but ``/livez``; a non-loopback ``host`` without a key is refused
    unless ``allow_unauthenticated``. TLS: uvicorn's own ``ssl_keyfile`` and ``ssl_certfile``. ``timeout_ms``: a
    search's default timeout; ``access_log``: one JSON line per request on stdout (in place of uvicorn's text
    access log). ``reload_index``: when the index folder is rebuilt (``momentsearch index`` or ``watch``), load it
    and swap to it between requests; ``watch``: a folder of videos to keep the index current with
    (:mod:`momentsearch.serving.watch`: ingest into the index's corpus, index, swap)."""
    import uvicorn

    from momentsearch.service.app import create_app
    from momentsearch.service.security import api_key_from, check_bind
    from momentsearch.serving.loader import load

    cfg = (settings or ServiceSettings()).with_(**changes)
    cfg = cfg.with_(api_key=api_key_from(cfg.api_key))
    check_bind(cfg.host, cfg.api_key, cfg.allow_unauthenticated)  # before minutes of loading, not after
    scheme = "https" if cfg.ssl_certfile else "http"
    host, port, api_key = cfg.host, cfg.port, cfg.api_key

    from momentsearch.service.metrics import Metrics

    metrics = Metrics()  # one set of counters across swapped indexes

    def loaded() -> Any:
        import warnings

        from momentsearch.serving.freshness import StaleIndexWarning

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StaleIndexWarning)  # said below, once, plainly
            searcher = load(index_dir, device=cfg.device, progress=True, first_stage=cfg.first_stage,
                            first_stage_params=cfg.first_stage_params, ray=cfg.ray, replicas=cfg.replicas)
        searcher.search("warm up the text encoder", k=1)  # loads the text encoder before the first request
        app = create_app(searcher, cfg, metrics=metrics)
        say(f"ready: {len(searcher.video_ids)} videos ({searcher.family.name}, first stage "
              f"{searcher.first_stage.spec}) on {scheme}://{host}:{port}/  (API docs: /docs"
              f"{'; API key required' if api_key else ''})")
        if searcher.stale is not None:
            say(f"warning: {searcher.stale.message()}")
        return app

    from momentsearch.service.loading import LoadingApp

    server: Any = None

    def stop(_: BaseException) -> None:
        server.should_exit = True

    loading = LoadingApp(loaded, on_error=stop)
    threads = []
    if cfg.reload_index or cfg.watch is not None:
        from momentsearch.service.loading import IndexReloader

        threads.append(IndexReloader(loading, index_dir, loaded, cfg.watch_interval, cfg.timeout_ms / 1000 + 5.0,
                                     log=lambda m: say(m)))
    if cfg.watch is not None:
        threads.append(_watcher(Path(cfg.watch), Path(index_dir), cfg.watch_interval))
    if cfg.access_log:
        _log_access_to_stdout()
    server = uvicorn.Server(uvicorn.Config(loading, host=host, port=port, log_level=cfg.log_level, access_log=False,
                                           ssl_keyfile=cfg.ssl_keyfile, ssl_certfile=cfg.ssl_certfile))
    say(f"loading {index_dir}; {scheme}://{host}:{port}/readyz says when it is ready")
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

    from momentsearch.serving.alerts import AlertBook, WebhookSender

    sender = WebhookSender(AlertBook(index_dir))  # posts saved searches' alerts that have a webhook, in its thread

    def said(update: Any) -> None:
        say(update.summary())
        if update.alerts:
            sender.wake()

    def failed(e: BaseException) -> None:
        say(f"watch {videos}: this round failed ({type(e).__name__}: {e}); the index is unchanged, trying again "
              "at the next change")

    t = threading.Thread(target=watcher.run, args=(stop, said, failed), name="momentsearch-watch", daemon=True)
    t.stop = stop  # type: ignore[attr-defined]
    t.sender = sender  # type: ignore[attr-defined]
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
