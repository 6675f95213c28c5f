"""The search service: an HTTP API (FastAPI on uvicorn) and a web page over an index folder.

    momentsearch serve INDEX_DIR [--host 127.0.0.1] [--port 8000] [--first-stage auto]

or from Python: ``create_app(momentsearch.load(INDEX_DIR))`` and any ASGI server. Needs the
``service`` extra (fastapi, uvicorn; faiss-cpu and pymilvus for the approximate first stages).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def serve(index_dir: str | Path, host: str = "127.0.0.1", port: int = 8000, first_stage: str = "auto",
          first_stage_params: dict[str, str] | None = None, device: str = "auto", max_batch: int = 32,
          max_wait_ms: float = 5.0, log_level: str = "info") -> None:
    """Load the index (building its first stage when missing) and serve it until interrupted."""
    import uvicorn

    from momentsearch.serving.searcher import load
    from momentsearch.service.app import create_app

    searcher = load(index_dir, device=device, progress=True, first_stage=first_stage,
                    first_stage_params=first_stage_params)
    searcher.search("warm up the text encoder", k=1)  # loads the text encoder before the first request
    app = create_app(searcher, max_batch=max_batch, max_wait_ms=max_wait_ms)
    print(f"serving {len(searcher.video_ids)} videos ({searcher.family.name}, first stage "
          f"{searcher.first_stage.spec}) on http://{host}:{port}/  (API docs: /docs)", flush=True)
    uvicorn.run(app, host=host, port=port, log_level=log_level)


def create_app(*args: Any, **kwargs: Any) -> Any:
    from momentsearch.service.app import create_app as _create

    return _create(*args, **kwargs)
