"""What a route needs, as typed FastAPI dependencies (tests override them with ``app.dependency_overrides``):
the :class:`Services` of the app (searcher, batcher, media, metrics, settings), and the one way a route
searches, :meth:`Services.search` (through the batcher, under a timeout)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import quote

from fastapi import Depends, Request
from starlette.exceptions import HTTPException

from momentsearch.search.ranked import Hit
from momentsearch.service.batcher import QueryBatcher
from momentsearch.service.media import Media
from momentsearch.service.metrics import Metrics
from momentsearch.service.settings import ServiceSettings
from momentsearch.serving.alerts import AlertBook
from momentsearch.serving.plan import SearchPlan
from momentsearch.serving.query import Query
from momentsearch.serving.searcher import Searcher
from momentsearch.timing import PARTS


@dataclass
class Services:
    searcher: Searcher
    batcher: QueryBatcher
    media: Media
    metrics: Metrics
    settings: ServiceSettings
    alerts: AlertBook | None = None  # the index's saved searches (None: an index with no folder)

    async def search(self, text: str | Query, plan: SearchPlan, timeout_ms: float | None = None,
                     timing: dict[str, float] | None = None) -> tuple[list[Hit], int | None]:
        """One query's page under its plan, searched in the batcher's next batch; a 504 past ``timeout_ms`` (the
        server's by default), after which the batcher skips the query."""
        timeout = timeout_ms or self.settings.timeout_ms
        try:
            return await asyncio.wait_for(self.batcher.search(text, plan, timing), timeout / 1000)
        except asyncio.TimeoutError:
            self.metrics.timeout()
            raise HTTPException(504, f"the search took longer than its timeout of {timeout:g} ms (timeout_ms); "
                                     "retry, or ask for a longer timeout or fewer videos") from None

    def moments(self, hits: list[Hit], offset: int = 0) -> list[dict]:
        """The response's moments as plain objects (the fields of ``schemas.Moment``), ranked from ``offset + 1``."""
        media, out = self.media, []
        for r, h in enumerate(hits, start=offset + 1):
            thumb = video = None
            if media.video_path(h.video_id) is not None:
                vid = quote(h.video_id, safe="")
                thumb = f"/thumbnails/{vid}?t={round(h.start + min(1.0, (h.end - h.start) / 2), 1)}"
                video = f"/videos/{vid}"
            out.append({"rank": r, "video_id": h.video_id, "start": round(h.start, 3), "end": round(h.end, 3),
                        "score": h.score, "thumbnail_url": thumb, "video_url": video,
                        "annotation": media.annotation(h.video_id, h.start, h.end),
                        "said": media.said(h.video_id, h.start, h.end),
                        "written": media.written(h.video_id, h.start, h.end)})
        return out


# async, though none of them waits: FastAPI runs a plain ``def`` dependency in its thread pool, a thread hop per
# request that cost the search route about a tenth of its requests/s under 16 clients
async def get_services(request: Request) -> Services:
    return request.app.state.services


async def get_media(services: Annotated[Services, Depends(get_services)]) -> Media:
    return services.media


ServicesDep = Annotated[Services, Depends(get_services)]
MediaDep = Annotated[Media, Depends(get_media)]


def server_timing(timing: dict[str, float], app_seconds: float) -> str:
    """The ``Server-Timing`` header (W3C; browsers' developer tools show it): the batch wait, each part of the
    search (shared by the queries of one batch) and ``app``, the whole time in the handler, in ms."""
    parts = [f"{name};dur={1000 * timing[name]:.3f}" for name in ("batch_wait", *PARTS) if name in timing]
    return ", ".join([*parts, f"app;dur={1000 * app_seconds:.3f}", f"batch;desc=\"{int(timing.get('batch', 0))}\""])
