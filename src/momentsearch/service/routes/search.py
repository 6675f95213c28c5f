"""``POST /search``: ranked moments for a text query (concurrent requests are searched as one batch)."""

from __future__ import annotations

import time

from fastapi import APIRouter, Response

from momentsearch.service.deps import ServicesDep, server_timing
from momentsearch.service.schemas import SearchRequest, SearchResponse

router = APIRouter()


@router.post("/search", response_model=SearchResponse)
async def search(req: SearchRequest, services: ServicesDep, response: Response) -> SearchResponse:
    """Ranked moments for a text query (concurrent requests are searched as one batch)."""
    t0, timing = time.perf_counter(), {}
    plan = req.plan(services.searcher)  # unknown ids: a 400 for this request alone
    hits, _ = await services.search(req.query, plan, None, timing)
    out = SearchResponse(query=req.query, k=req.k, took_ms=round(1000 * (time.perf_counter() - t0), 2),
                         moments=services.moments(hits))
    response.headers["Server-Timing"] = server_timing(timing, time.perf_counter() - t0)
    return out
