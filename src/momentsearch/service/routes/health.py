"""``/health`` (the model, corpus, first stage and batching counters; no server path), ``/metrics``
(Prometheus text), ``/livez`` (liveness: open without the API key) and ``/readyz`` (readiness)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from momentsearch.service.deps import ServicesDep

router = APIRouter()


@router.get("/health")
def health(services: ServicesDep) -> dict[str, Any]:
    searcher, batcher = services.searcher, services.batcher
    return {"status": "ok", "family": searcher.family.name, "videos": len(searcher.video_ids),
            "clips": searcher.n_clips, "first_stage": searcher.first_stage.spec,
            "video_files": services.media.n_files,
            "corpus": None if searcher.corpus is None else searcher.corpus.root.name,  # its name, not its path
            "batching": dict(batcher.stats, max_batch=batcher.max_batch),
            "behind_corpus": None if searcher.stale is None else searcher.stale.to_json()}


@router.get("/metrics", response_class=Response)
def metrics_text(services: ServicesDep) -> Response:
    """Prometheus text format: requests by route and status, latency, batch sizes, search time."""
    searcher = services.searcher
    return Response(services.metrics.text(len(searcher.video_ids), searcher.n_clips),
                    media_type="text/plain; version=0.0.4; charset=utf-8")


@router.get("/livez")
def livez() -> dict[str, str]:
    """Liveness: the process answers (open without the API key)."""
    return {"status": "alive"}


@router.get("/readyz")
def readyz() -> dict[str, str]:
    """Readiness: the index is loaded and its encoders warm (before that, ``serve`` answers 503)."""
    return {"status": "ready"}
