"""``/v1``: the versioned API. ``POST /v1/search`` takes paging (``offset``; the answer's ``next_offset``),
a score threshold (``min_score``), a time range (``time_from``, ``time_to``: moments overlapping it),
group-by-video (each video's best ``per_video`` moments together, default 1), the filters of
:class:`~momentsearch.serving.filters.VideoFilter` (``videos``, ``path_prefix``, ``min_duration``,
``max_duration``, ``ingested_after``, ``ingested_before``, ``modified_after``, ``modified_before``) and a
timeout (``timeout_ms``: past it the answer is a 504 saying so). Instead of (or beside) words it takes a picture
(``image``: the file in base64) or a found moment (``like``: ``{video_id, start, end}``). ``POST /v1/search/batch``
takes many text queries in one request (searched as one batch)."""

from __future__ import annotations

import asyncio
import time

from fastapi import APIRouter, Response

from momentsearch.service.deps import ServicesDep, server_timing
from momentsearch.service.schemas import BatchPageV1, BatchV1, PageV1, SearchV1, json_response

router = APIRouter(prefix="/v1")


@router.post("/search", response_model=None, responses={200: {"model": PageV1}})
async def search_v1(req: SearchV1, services: ServicesDep) -> Response:
    """Ranked moments for a query: a page of them, after the filters, the threshold and the grouping."""
    t0, timing = time.perf_counter(), {}
    plan = req.plan(services.searcher)  # checked once: a 400 naming the field, an unknown id or a missing record
    asked = req.asked()  # words, or a Query with a picture or a moment (a picture that is not one: a 400)
    hits, nxt = await services.search(asked, plan, req.timeout_ms, timing)
    out = {"query": asked if isinstance(asked, str) else asked.label, "k": req.k, "offset": req.offset, "next_offset": nxt,
           "took_ms": round(1000 * (time.perf_counter() - t0), 2), "moments": services.moments(hits, req.offset)}
    return json_response(out, {"Server-Timing": server_timing(timing, time.perf_counter() - t0)})


@router.post("/search/batch", response_model=None, responses={200: {"model": BatchPageV1}})
async def batch_v1(req: BatchV1, services: ServicesDep) -> Response:
    """Many queries in one request, searched together; one result per query, in order."""
    t0 = time.perf_counter()
    plan = req.plan(services.searcher)
    pages = await asyncio.gather(*(services.search(q, plan, req.timeout_ms) for q in req.queries))
    return json_response({"took_ms": round(1000 * (time.perf_counter() - t0), 2),
                          "results": [{"query": q, "k": req.k, "offset": req.offset, "next_offset": nxt,
                                       "moments": services.moments(hits, req.offset)}
                                      for q, (hits, nxt) in zip(req.queries, pages, strict=True)]})
