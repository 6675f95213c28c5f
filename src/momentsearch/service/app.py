"""The HTTP API and the page, over one :class:`~momentsearch.serving.searcher.Searcher` (FastAPI).

* ``POST /search`` ``{query, k, videos?}`` -> ranked moments: video id, start, end, score, thumbnail
  and video URLs (null where the video has no file) and the annotation text where the corpus has one;
* ``POST /v1/search`` adds paging, a score threshold, group-by-video, filters (path prefix, duration, ingest
  date) and a per-request timeout, ``POST /v1/search/batch`` many queries at once (:mod:`~momentsearch.service.v1`);
* ``GET /videos/{id}``: the video file, with HTTP range requests (a browser seeks in it);
* ``GET /thumbnails/{id}?t=SECONDS``: a JPEG of the frame at ``t``;
* ``GET /health``: the model, corpus, first stage and batching counters (no server path);
* ``GET /livez``: liveness, the one route open without the API key; ``GET /readyz``: readiness (while
  ``serve`` loads the index every route but ``/livez`` answers 503 "not ready", :mod:`~momentsearch.service.loading`);
* ``GET /metrics``: Prometheus text (:mod:`~momentsearch.service.metrics`);
* ``GET /``: the page (``static/``: no CDN asset, it works offline); ``GET /openapi.json``;
* ``GET /docs``: Swagger UI from the files the ``fastapi-offline`` package ships, so it works offline.

Bad input is a 4xx with ``{"error": message}``, never a 500: an empty or over-long query, ``k`` out
of range or not an integer (``"5"`` and ``true`` are refused, not coerced), unknown video ids, fields of
the wrong type, a path parameter that names no video, a body over the limit (413). With an API key
(:mod:`~momentsearch.service.security`) every route but ``/livez`` needs it; CORS is off unless origins
are given.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from importlib import resources
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, field_validator
from starlette.exceptions import HTTPException

from momentsearch.serving.searcher import Hit, Searcher
from momentsearch.errors import MomentSearchError, QueryError, VideoDecodeError
from momentsearch.service.batcher import QueryBatcher
from momentsearch.service.media import Media
from momentsearch.service.metrics import Metrics, RequestMetrics
from momentsearch.service.security import MAX_BODY_BYTES, Guard
from momentsearch.service.v1 import Moment, add_v1, server_timing, with_timeout
from momentsearch.serving.filters import VideoFilter
from momentsearch.text.query_file import MAX_QUERY_CHARS  # one limit for query files and the service

MAX_K = 100
MAX_VIDEOS = 10_000
DEFAULT_TIMEOUT_MS = 30_000.0
STATIC = {"app.js": "text/javascript", "style.css": "text/css"}


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: StrictStr = Field(description="What to look for, e.g. 'a person opens the fridge'",
                             max_length=MAX_QUERY_CHARS)
    k: StrictInt = Field(10, ge=1, le=MAX_K, description="How many moments to return")
    videos: list[StrictStr] | None = Field(None, min_length=1, max_length=MAX_VIDEOS,
                                           description="Search only these video ids")

    @field_validator("query")
    @classmethod
    def not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("the query is empty")
        return v.strip()


class SearchResponse(BaseModel):
    query: str
    k: int
    took_ms: float
    moments: list[Moment]


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for e in exc.errors()[:5]:
        loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body") or "body"
        parts.append(f"{loc}: {e.get('msg', 'invalid')}")
    return "; ".join(parts)


def create_app(searcher: Searcher, max_batch: int = 32, max_wait_ms: float = 0.0, api_key: str | None = None,
               cors_origins: list[str] | None = None, max_body_bytes: int = MAX_BODY_BYTES,
               timeout_ms: float = DEFAULT_TIMEOUT_MS, access_log: bool = True, metrics: Metrics | None = None) -> FastAPI:
    """``api_key``: required on every route but ``/livez`` (see :mod:`~momentsearch.service.security`);
    ``cors_origins``: origins a browser page elsewhere may call from (none by default); ``timeout_ms``: a
    search's default timeout (a request's ``timeout_ms`` overrides it); ``access_log``: one JSON line per
    request on the ``momentsearch.access`` logger; ``metrics``: counters to carry on (a swapped-in index's app)."""
    media = Media(searcher.corpus, searcher.video_ids)
    metrics = metrics or Metrics()
    batcher = QueryBatcher(searcher, max_batch, max_wait_ms, on_batch=metrics.batch)
    app = FastAPI(title="momentsearch", version="1", summary="Video corpus moment retrieval: text in, moments out.",
                  docs_url=None, redoc_url=None)  # /docs below: from local files, not a CDN
    add_docs(app)
    if cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "X-API-Key", "Content-Type", "Range"])
    app.add_middleware(Guard, api_key=api_key, max_body_bytes=max_body_bytes)  # before CORS and routes
    app.add_middleware(RequestMetrics, metrics=metrics, access_log=access_log)  # outermost: the guard's 401s and 413s count too
    app.state.searcher, app.state.batcher, app.state.media = searcher, batcher, media
    app.router.add_event_handler("shutdown", batcher.close)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(422, _validation_message(exc))

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        if exc.status_code == 404 and exc.detail == "Not Found":  # no route: say which path
            return _error(404, f"nothing at {request.url.path[:200]} (see /docs for the API)")
        return _error(exc.status_code, str(exc.detail))

    @app.exception_handler(MomentSearchError)
    async def _ours(_: Request, exc: MomentSearchError) -> JSONResponse:
        return _error(400, str(exc))

    def urls(video_id: str, start: float, end: float) -> tuple[str | None, str | None]:
        if media.video_path(video_id) is None:
            return None, None
        vid = quote(video_id, safe="")
        return f"/thumbnails/{vid}?t={round(start + min(1.0, (end - start) / 2), 1)}", f"/videos/{vid}"

    @app.post("/search", response_model=SearchResponse)
    async def search(req: SearchRequest, response: Response) -> SearchResponse:
        """Ranked moments for a text query (concurrent requests are searched as one batch)."""
        t0, timing = time.perf_counter(), {}
        where = VideoFilter.of(req.videos)
        searcher.check(None, where)  # unknown ids: a 400 for this request alone
        hits = await run(req.query, req.k, where, None, timing)
        out = SearchResponse(query=req.query, k=req.k, took_ms=round(1000 * (time.perf_counter() - t0), 2),
                             moments=to_moments(hits))
        response.headers["Server-Timing"] = server_timing(timing, time.perf_counter() - t0)
        return out

    def to_moments(hits: Sequence[Hit], offset: int = 0) -> list[dict[str, Any]]:
        """The response's moments as plain objects (the fields of :class:`Moment`), ranked from ``offset + 1``."""
        out = []
        for r, h in enumerate(hits, start=offset + 1):
            thumb, video = urls(h.video_id, h.start, h.end)
            out.append({"rank": r, "video_id": h.video_id, "start": round(h.start, 3), "end": round(h.end, 3),
                        "score": h.score, "thumbnail_url": thumb, "video_url": video,
                        "annotation": media.annotation(h.video_id, h.start, h.end)})
        return out

    async def run(text: str, k: int, where: VideoFilter, timeout: float | None,
                  timing: dict[str, float] | None = None) -> list[Hit]:
        return await with_timeout(batcher.search(text, k, where, timing), timeout or timeout_ms, metrics.timeout)

    add_v1(app, searcher, run, to_moments)

    def _known(video_id: str) -> None:
        if video_id not in media.ids:
            raise HTTPException(404, f"no video {video_id[:200]!r} in this index")

    @app.get("/videos/{video_id:path}", response_class=FileResponse)
    def video(video_id: str) -> Response:
        """The video file (range requests: a browser seeks in it)."""
        _known(video_id)
        path = media.video_path(video_id)
        if path is None:
            raise HTTPException(404, f"video {video_id!r} has no video file (its corpus holds features only, "
                                     "or the file moved since ingest)")
        changed = media.changed(video_id, path)
        if changed:
            raise HTTPException(409, changed)
        return FileResponse(path, media_type=media.media_type(path))

    @app.get("/thumbnails/{video_id:path}", responses={200: {"content": {"image/jpeg": {}}}})
    def thumbnail(video_id: str, t: float = Query(0.0, ge=0.0, le=1e7, description="seconds")) -> Response:
        """A JPEG of the frame at ``t`` seconds."""
        _known(video_id)
        path = media.video_path(video_id)
        changed = None if path is None else media.changed(video_id, path)
        if changed:
            raise HTTPException(409, changed)
        try:
            data = media.thumbnail(video_id, t)
        except VideoDecodeError as e:  # the file's path stays on the server: the message names the video
            reason = str(e).removeprefix(f"{path}: ")
            raise HTTPException(422, f"no thumbnail of video {video_id!r} at {t:.1f} s: {reason}") from None
        if data is None:
            raise HTTPException(404, f"video {video_id!r} has no video file")
        return Response(data, media_type="image/jpeg", headers={"Cache-Control": "max-age=3600"})

    @app.get("/health")
    def health() -> dict[str, Any]:
        ckpt = searcher.checkpoint
        return {"status": "ok", "family": ckpt.family.name, "videos": len(searcher.video_ids),
                "clips": int(searcher.index.offsets[-1]), "first_stage": searcher.first_stage.spec,
                "video_files": media.n_files,
                "corpus": None if searcher.corpus is None else searcher.corpus.root.name,  # its name, not its path
                "batching": dict(batcher.stats, max_batch=batcher.max_batch),
                "behind_corpus": None if getattr(searcher, "stale", None) is None else searcher.stale.to_json()}

    @app.get("/metrics", response_class=Response)
    def metrics_text() -> Response:
        """Prometheus text format: requests by route and status, latency, batch sizes, search time."""
        return Response(metrics.text(len(searcher.video_ids), int(searcher.index.offsets[-1])),
                        media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.get("/livez")
    def livez() -> dict[str, str]:
        """Liveness: the process answers (open without the API key)."""
        return {"status": "alive"}

    @app.get("/readyz")
    def readyz() -> dict[str, str]:
        """Readiness: the index is loaded and its encoders warm (before that, ``serve`` answers 503)."""
        return {"status": "ready"}

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page() -> HTMLResponse:
        return HTMLResponse(_static("index.html"))

    @app.get("/static/{name}", include_in_schema=False)
    def static(name: str) -> Response:
        if name not in STATIC:
            raise HTTPException(404, f"no static file {name[:100]!r}")
        return Response(_static(name), media_type=STATIC[name], headers={"Cache-Control": "no-cache"})

    return app


def add_docs(app: FastAPI) -> None:
    """``/docs``: Swagger UI (5.x: it reads OpenAPI 3.1) served from the files of the fastapi-offline package
    (no CDN); a clear 404 without it."""
    try:
        from importlib.resources import files

        swagger_ui_path = files("fastapi_offline") / "static"
    except ModuleNotFoundError:
        swagger_ui_path = None

    @app.get("/docs", include_in_schema=False)
    def docs() -> Response:
        if swagger_ui_path is None:
            raise HTTPException(404, "the API docs page needs fastapi-offline: pip install 'momentsearch[service]' "
                                     "(the schema is at /openapi.json)")
        from fastapi.openapi.docs import get_swagger_ui_html

        return get_swagger_ui_html(openapi_url="/openapi.json", title="momentsearch API",
                                   swagger_js_url="/docs-files/swagger-ui-bundle.js",
                                   swagger_css_url="/docs-files/swagger-ui.css", swagger_favicon_url="/docs-files/favicon.png")

    @app.get("/docs-files/{name}", include_in_schema=False)
    def docs_files(name: str) -> Response:
        kinds = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css", "favicon.png": "image/png"}
        if swagger_ui_path is None or name not in kinds:
            raise HTTPException(404, f"no docs file {name[:100]!r}")
        return Response((swagger_ui_path / name).read_bytes(), media_type=kinds[name],
                        headers={"Cache-Control": "max-age=86400"})


def _static(name: str) -> str:
    return resources.files("momentsearch.service").joinpath("static", name).read_text(encoding="utf-8")


__all__ = ["MAX_K", "MAX_QUERY_CHARS", "QueryError", "SearchRequest", "create_app"]
