"""The HTTP API and the page over one :class:`~momentsearch.serving.searcher.Searcher` (FastAPI):
:func:`create_app` puts the :class:`~momentsearch.service.deps.Services` on the app, the middleware around it,
the routers of :mod:`momentsearch.service.routes` in it and the error handlers of
:mod:`momentsearch.service.errors` under it.

* ``POST /search`` ``{query, k, videos?}`` -> ranked moments: video id, start, end, score, thumbnail
  and video URLs (null where the video has no file) and the annotation text where the corpus has one;
* ``POST /v1/search`` adds paging, a score threshold, group-by-video, filters (path prefix, duration, ingest
  date) and a per-request timeout, ``POST /v1/search/batch`` many queries at once;
* ``GET /videos/{id}`` (range requests), ``GET /thumbnails/{id}?t=SECONDS`` (a JPEG), ``GET /v1/clips/{id}?start=&end=``
  (the moment as an MP4), ``GET /v1/cues/{id}`` (what is said in it);
* ``GET/POST /v1/alerts``, ``DELETE /v1/alerts/{id}``: saved searches and the alerts new videos raised;
* ``GET /health``, ``/metrics`` (Prometheus text), ``/livez`` (open without the API key), ``/readyz``;
* ``GET /`` the page; ``/docs`` Swagger UI from local files; ``/openapi.json``.

Bad input is a 4xx with ``{"error": message}``, never a 500: an empty or over-long query, ``k`` out
of range or not an integer (``"5"`` and ``true`` are refused, not coerced), unknown video ids, fields of
the wrong type, a path parameter that names no video, a body over the limit (413). With an API key
(:mod:`~momentsearch.service.security`) every route but ``/livez`` needs it; CORS is off unless origins
are given.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from momentsearch.search.index import VideoIndex, memory_bytes
from momentsearch.search.prefetch import populate_in_background
from momentsearch.service.batcher import QueryBatcher
from momentsearch.service.deps import Services
from momentsearch.service.errors import add_error_handlers
from momentsearch.service.media import Media
from momentsearch.service.metrics import Metrics, RequestMetrics
from momentsearch.service.routes import ROUTERS
from momentsearch.service.schemas import MAX_K
from momentsearch.service.security import Guard
from momentsearch.service.settings import ServiceSettings
from momentsearch.serving.alerts import AlertBook
from momentsearch.serving.searcher import Searcher

WARM_FRACTION = 10  # the corpus's captions file is read into memory at start when it is at most memory / this
ROWS_FRACTION = 2  # the index's memory-mapped rows are mapped in at start when they hold at most memory / this


def create_app(searcher: Searcher, settings: ServiceSettings | None = None, metrics: Metrics | None = None,
               **changes: Any) -> FastAPI:
    """The app over ``searcher``. ``settings``: :class:`ServiceSettings` (its ``api_key``, ``cors_origins``,
    ``max_batch``, ``max_wait_ms``, ``batch_wait``, ``batch_workers``, ``timeout_ms``, ``access_log`` and ``max_body_bytes`` are read here), with
    ``changes`` applied (``create_app(s, max_batch=4)``); ``metrics``: counters to carry on (a swapped-in
    index's app)."""
    settings = (settings or ServiceSettings()).with_(**changes)
    metrics = metrics or Metrics()
    if searcher.corpus is not None:  # the captions a result is labelled with, read into memory where they fit
        searcher.corpus.warm_annotations(memory_bytes() // WARM_FRACTION)
    index = getattr(searcher, "index", None)  # its rows mapped in the background: no query takes their page faults
    if isinstance(index, VideoIndex):
        populate_in_background([*index.arrays.values(), *index.video_arrays.values()], memory_bytes() // ROWS_FRACTION)
    services = Services(searcher, QueryBatcher(searcher, settings.max_batch, settings.max_wait_ms,
                                               on_batch=metrics.batch, workers=settings.batch_workers,
                                               wait=settings.batch_wait),
                        Media(searcher.corpus, searcher.video_ids), metrics, settings,
                        None if getattr(searcher, "folder", None) is None else AlertBook(searcher.folder))
    app = FastAPI(title="momentsearch", version="1", summary="Video corpus moment retrieval: text in, moments out.",
                  docs_url=None, redoc_url=None)  # /docs: from local files (routes.page), not a CDN
    if settings.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "X-API-Key", "Content-Type", "Range"])
    app.add_middleware(Guard, api_key=settings.api_key, max_body_bytes=settings.max_body_bytes)  # before CORS, routes
    app.add_middleware(RequestMetrics, metrics=metrics, access_log=settings.access_log)  # outermost: 401s, 413s count
    app.state.services = services
    app.state.searcher, app.state.batcher = searcher, services.batcher  # what the reloader and tests read
    app.router.add_event_handler("shutdown", services.batcher.close)
    add_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    return app


__all__ = ["MAX_K", "ServiceSettings", "create_app"]
