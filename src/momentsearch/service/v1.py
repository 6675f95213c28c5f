"""``/v1``: the versioned API. ``POST /v1/search`` takes paging (``offset``; the answer's ``next_offset``),
a score threshold (``min_score``), a time range (``time_from``, ``time_to``: moments overlapping it),
group-by-video (each video's best ``per_video`` moments together, default 1), the filters of
:class:`~momentsearch.serving.filters.VideoFilter` (``videos``, ``path_prefix``, ``min_duration``,
``max_duration``, ``ingested_after``, ``ingested_before``) and a timeout (``timeout_ms``: past it the answer
is a 504 saying so); ``POST /v1/search/batch`` takes many queries in one request (searched as one batch).
``POST /search`` stays as it was."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

import orjson
from fastapi import FastAPI, Response
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, field_validator

from starlette.exceptions import HTTPException

from momentsearch.serving.filters import VideoFilter, arrange, check_arrange
from momentsearch.serving.searcher import Hit
from momentsearch.timing import PARTS

MAX_K = 100
MAX_OFFSET = 900  # offset + k <= 1000 moments a query: what one search ranks at the most
MAX_BATCH_QUERIES = 64
FETCH_GROUPED = 1000  # moments fetched to fill a page of distinct videos


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid")
    k: StrictInt = Field(10, ge=1, le=MAX_K, description="Moments on this page")
    offset: StrictInt = Field(0, ge=0, le=MAX_OFFSET, description="Moments skipped: the previous page's next_offset")
    videos: list[StrictStr] | None = Field(None, min_length=1, max_length=10_000, description="Search only these ids")
    min_score: StrictFloat | StrictInt | None = Field(None, description="Drop moments scoring below this")
    group_by_video: StrictBool = Field(False, description="Each video's best per_video moments together")
    per_video: StrictInt = Field(1, ge=1, le=100, description="With group_by_video: moments kept per video")
    time_from: StrictFloat | StrictInt | None = Field(None, ge=0, le=1e9, description="Moments ending after this "
                                                                                     "second of their video")
    time_to: StrictFloat | StrictInt | None = Field(None, ge=0, le=1e9, description="Moments starting before this "
                                                                                   "second of their video")
    path_prefix: StrictStr | None = Field(None, max_length=1000, description="Videos whose path (relative to the "
                                                                             "ingested folder) starts with this")
    min_duration: StrictFloat | StrictInt | None = Field(None, ge=0, description="Videos at least this long (s)")
    max_duration: StrictFloat | StrictInt | None = Field(None, ge=0, description="Videos at most this long (s)")
    ingested_after: StrictStr | None = Field(None, max_length=64, description="Videos ingested at or after this "
                                                                             "UTC time (ISO 8601)")
    ingested_before: StrictStr | None = Field(None, max_length=64, description="Videos ingested before this UTC "
                                                                              "time (ISO 8601)")
    modified_after: StrictStr | None = Field(None, max_length=64, description="Videos whose file is dated at or "
                                                                             "after this UTC time (ISO 8601)")
    modified_before: StrictStr | None = Field(None, max_length=64, description="Videos whose file is dated before "
                                                                              "this UTC time (ISO 8601)")
    timeout_ms: StrictInt | None = Field(None, ge=1, le=600_000, description="Give up after this long (504); "
                                                                            "default: the server's")

    def where(self) -> VideoFilter:
        check_arrange(self.time_from, self.time_to, self.per_video)
        return VideoFilter.of(self.videos, self.path_prefix, self.min_duration, self.max_duration,
                              self.ingested_after, self.ingested_before, self.modified_after, self.modified_before)


def _clean(v: str) -> str:
    if not v.strip():
        raise ValueError("the query is empty")
    return v.strip()


class SearchV1(_Options):
    query: StrictStr = Field(max_length=1000, description="What to look for")

    @field_validator("query")
    @classmethod
    def not_blank(cls, v: str) -> str:
        return _clean(v)


class BatchV1(_Options):
    queries: list[StrictStr] = Field(min_length=1, max_length=MAX_BATCH_QUERIES, description="What to look for, each")

    @field_validator("queries")
    @classmethod
    def none_blank(cls, v: list[str]) -> list[str]:
        if any(len(q) > 1000 for q in v):
            raise ValueError("a query is over 1000 characters")
        return [_clean(q) for q in v]


def page_of(hits: Sequence[Hit], k: int, offset: int, min_score: float | None, group: bool,
            time_from: float | None = None, time_to: float | None = None, per_video: int = 1
            ) -> tuple[list[Hit], int | None]:
    """The page ``[offset, offset + k)`` of ``hits`` (best first) after the threshold, the time range and the
    grouping (:func:`~momentsearch.serving.filters.arrange`), and the next page's offset (None: no more)."""
    kept = [h for h in hits if min_score is None or h.score >= min_score]
    kept = arrange(kept, time_from, time_to, per_video if group else None)
    end = offset + k
    return kept[offset:end], (end if len(kept) > end else None)


def add_v1(app: FastAPI, searcher: object, run: Callable, moments: Callable[[Sequence[Hit]], list]) -> None:
    """The /v1 routes on ``app``; ``run(text, k, where, timeout_ms)`` searches one query through the batcher
    (a 504 past its timeout); ``moments`` turns hits into the response's moment objects (ranked from 1)."""

    async def one(text: str, opts: _Options, where: VideoFilter, timing: dict[str, float] | None = None
                  ) -> tuple[list[Hit], int | None]:
        arranged = opts.group_by_video or opts.time_from is not None or opts.time_to is not None
        fetch = FETCH_GROUPED if arranged else opts.offset + opts.k + 1  # one more: is there a next page
        hits = await run(text, min(fetch, FETCH_GROUPED), where, opts.timeout_ms, timing)
        return page_of(hits, opts.k, opts.offset, opts.min_score, opts.group_by_video, opts.time_from, opts.time_to,
                       opts.per_video)

    def checked(opts: _Options) -> VideoFilter:
        where = opts.where()  # a QueryError: a 400 naming the field
        searcher.check(None, where)  # unknown ids, a date filter over a corpus with no dates: a 400 now
        return where

    @app.post("/v1/search", response_model=None, responses={200: {"model": PageV1}})
    async def search_v1(req: SearchV1) -> Response:
        """Ranked moments for a query: a page of them, after the filters, the threshold and the grouping."""
        t0, timing = time.perf_counter(), {}
        hits, nxt = await one(req.query, req, checked(req), timing)
        out = {"query": req.query, "k": req.k, "offset": req.offset, "next_offset": nxt,
               "took_ms": round(1000 * (time.perf_counter() - t0), 2), "moments": moments(hits, req.offset)}
        return json_response(out, {"Server-Timing": server_timing(timing, time.perf_counter() - t0)})

    @app.post("/v1/search/batch", response_model=None, responses={200: {"model": BatchPageV1}})
    async def batch_v1(req: BatchV1) -> Response:
        """Many queries in one request, searched together; one result per query, in order."""
        t0 = time.perf_counter()
        where = checked(req)
        pages = await asyncio.gather(*(one(q, req, where) for q in req.queries))
        return json_response({"took_ms": round(1000 * (time.perf_counter() - t0), 2),
                              "results": [{"query": q, "k": req.k, "offset": req.offset, "next_offset": nxt,
                                           "moments": moments(hits, req.offset)}
                                          for q, (hits, nxt) in zip(req.queries, pages, strict=True)]})


def json_response(body: dict, headers: dict[str, str] | None = None) -> Response:
    """JSON written by orjson straight to bytes (FastAPI's own encoder walks the objects in Python first)."""
    return Response(orjson.dumps(body), media_type="application/json", headers=headers)


class Moment(BaseModel):
    rank: int
    video_id: str
    start: float
    end: float
    score: float
    thumbnail_url: str | None
    video_url: str | None
    annotation: str | None


class ResultV1(BaseModel):
    """One query's page (for the API docs; the answers are written by :func:`json_response`)."""
    query: str
    k: int
    offset: int
    next_offset: int | None
    moments: list[Moment]


class PageV1(ResultV1):
    took_ms: float


class BatchPageV1(BaseModel):
    took_ms: float
    results: list[ResultV1]


def server_timing(timing: dict[str, float], app_seconds: float) -> str:
    """The ``Server-Timing`` header (W3C; browsers' developer tools show it): the batch wait, each part of the
    search (shared by the queries of one batch) and ``app``, the whole time in the handler, in ms."""
    parts = [f"{name};dur={1000 * timing[name]:.3f}" for name in ("batch_wait", *PARTS) if name in timing]
    return ", ".join([*parts, f"app;dur={1000 * app_seconds:.3f}", f"batch;desc=\"{int(timing.get('batch', 0))}\""])


async def with_timeout(search: Awaitable[list[Hit]], timeout_ms: float, on_timeout: Callable[[], None]) -> list[Hit]:
    """``search``'s hits, or a 504 once ``timeout_ms`` has passed (the batcher then skips the query)."""
    try:
        return await asyncio.wait_for(search, timeout_ms / 1000)
    except asyncio.TimeoutError:
        on_timeout()
        raise HTTPException(504, f"the search took longer than its timeout of {timeout_ms:g} ms (timeout_ms); "
                                 "retry, or ask for a longer timeout or fewer videos") from None
