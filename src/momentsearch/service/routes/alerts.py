"""``/v1/alerts``: saved searches and what new videos matched (:mod:`momentsearch.serving.alerts`).

* ``GET /v1/alerts?since=N``: the saved searches, and the alerts logged after the first ``N`` (the page polls);
* ``POST /v1/alerts`` ``{query, min_score, k?, path_prefix?, webhook?}``: save a search (``watch`` and
  ``serve --watch`` run it over each round's new videos);
* ``DELETE /v1/alerts/{id}``: forget one.
"""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr
from starlette.exceptions import HTTPException

from momentsearch.service.deps import ServicesDep
from momentsearch.service.schemas import Number, QueryText, json_response
from momentsearch.serving.alerts import AlertBook

router = APIRouter(prefix="/v1")


class SaveSearch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: QueryText
    min_score: Number = Field(description="Alert on moments scoring at least this")
    k: StrictInt = Field(10, ge=1, le=100, description="Moments looked at per round")
    path_prefix: StrictStr | None = Field(None, max_length=1000, description="Only videos under this path")
    webhook: StrictStr | None = Field(None, max_length=2000, description="POST each alert here as JSON")


def _book(services: ServicesDep) -> AlertBook:
    if services.alerts is None:
        raise HTTPException(404, "this index has no folder, so it keeps no saved searches")
    return services.alerts


@router.get("/alerts")
def list_alerts(services: ServicesDep, since: int = Query(0, ge=0, le=10**9)) -> Response:
    book = _book(services)
    alerts = book.alerts()
    return json_response({"searches": [asdict(s) for s in book.searches()], "total": len(alerts),
                          "alerts": [{k: v for k, v in asdict(a).items() if k != "webhook"} for a in alerts[since:]]})


@router.post("/alerts", status_code=201)
def save(req: SaveSearch, services: ServicesDep) -> Response:
    s = _book(services).add(req.query, float(req.min_score), req.k, req.path_prefix, req.webhook)
    return json_response(asdict(s), status_code=201)


@router.delete("/alerts/{search_id}")
def forget(search_id: str, services: ServicesDep) -> Response:
    _book(services).remove(search_id)
    return json_response({"removed": search_id})
