"""Errors mapped by kind to one-line JSON answers ``{"error": message}``: never a 500 for bad input.

| kind | status |
|---|---|
| a request that does not fit its schema (``RequestValidationError``) | 422 |
| an ``HTTPException`` raised by a route (404 unknown id, 409 changed file, 504 timeout...) | its own |
| a video that cannot be decoded (``VideoDecodeError``) | 422 |
| a shard of a sharded index that no replica answered (``ShardUnavailableError``) | 503 |
| a video file changed on disk since ingest (``VideoChangedError``) | 409 |
| a video with no file to serve (``VideoFileError``) | 404 |
| any other error of the project's (``QueryError``, ``SearchIndexError``, ...: ``MomentSearchError``) | 400 |
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from momentsearch.errors import (
    MomentSearchError,
    ShardUnavailableError,
    VideoChangedError,
    VideoDecodeError,
    VideoFileError,
)

STATUS_BY_KIND: tuple[tuple[type[MomentSearchError], int], ...] = (
    (VideoDecodeError, 422), (ShardUnavailableError, 503), (VideoChangedError, 409), (VideoFileError, 404),
    (MomentSearchError, 400))


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def status_of(exc: MomentSearchError) -> int:
    """The first kind in :data:`STATUS_BY_KIND` that ``exc`` is."""
    return next(status for kind, status in STATUS_BY_KIND if isinstance(exc, kind))


def validation_message(exc: RequestValidationError) -> str:
    parts = []
    for e in exc.errors()[:5]:
        loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body") or "body"
        parts.append(f"{loc}: {e.get('msg', 'invalid')}")
    return "; ".join(parts)


async def on_invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
    return error(422, validation_message(exc))


async def on_http(request: Request, exc: HTTPException) -> JSONResponse:
    if exc.status_code == 404 and exc.detail == "Not Found":  # no route: say which path
        return error(404, f"nothing at {request.url.path[:200]} (see /docs for the API)")
    return error(exc.status_code, str(exc.detail))


async def on_ours(_: Request, exc: MomentSearchError) -> JSONResponse:
    return error(status_of(exc), str(exc))


def add_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(RequestValidationError, on_invalid)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, on_http)  # type: ignore[arg-type]
    app.add_exception_handler(MomentSearchError, on_ours)  # type: ignore[arg-type]
