"""The service's routes, one module-level ``APIRouter`` per concern, read top to bottom:

* :mod:`.search`: ``POST /search`` (ranked moments for a text query);
* :mod:`.v1`: ``POST /v1/search`` and ``POST /v1/search/batch`` (paging, threshold, filters, timeout);
* :mod:`.media`: ``GET /videos/{id}`` (range requests), ``GET /thumbnails/{id}?t=``, ``GET /v1/clips/{id}`` and
  ``GET /v1/cues/{id}``;
* :mod:`.alerts`: ``/v1/alerts`` (saved searches and their alerts);
* :mod:`.health`: ``/health``, ``/metrics``, ``/livez``, ``/readyz``;
* :mod:`.page`: the page at ``/``, its static files, and ``/docs`` from local files.

A search route validates once (the request's schema, then ``request.plan(searcher)``: the one check against the
index), searches once (``Services.search``: the batcher, which runs the searcher's plans), and answers.
"""

from momentsearch.service.routes import alerts, health, media, page, search, v1

ROUTERS = (search.router, v1.router, media.router, alerts.router, health.router, page.router)

__all__ = ["ROUTERS"]
