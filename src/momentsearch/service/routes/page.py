"""The page at ``/`` and its static files (no CDN asset: it works offline), and ``/docs``: Swagger UI (5.x: it
reads OpenAPI 3.1) from the files the ``fastapi-offline`` package ships; a clear 404 without it."""

from __future__ import annotations

from importlib import resources
from importlib.resources import files
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response
from starlette.exceptions import HTTPException

STATIC = {"app.js": "text/javascript", "style.css": "text/css"}
DOCS_FILES = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css", "favicon.png": "image/png"}

router = APIRouter(include_in_schema=False)


def _static(name: str) -> str:
    return resources.files("momentsearch.service").joinpath("static", name).read_text(encoding="utf-8")


def _swagger_files() -> Any:
    try:
        return files("fastapi_offline") / "static"
    except ModuleNotFoundError:
        return None


@router.get("/", response_class=HTMLResponse)
def page() -> HTMLResponse:
    return HTMLResponse(_static("index.html"))


@router.get("/static/{name}")
def static(name: str) -> Response:
    if name not in STATIC:
        raise HTTPException(404, f"no static file {name[:100]!r}")
    return Response(_static(name), media_type=STATIC[name], headers={"Cache-Control": "no-cache"})


@router.get("/docs")
def docs() -> Response:
    if _swagger_files() is None:
        raise HTTPException(404, "the API docs page needs fastapi-offline: pip install 'momentsearch[service]' "
                                 "(the schema is at /openapi.json)")
    from fastapi.openapi.docs import get_swagger_ui_html

    return get_swagger_ui_html(openapi_url="/openapi.json", title="momentsearch API",
                               swagger_js_url="/docs-files/swagger-ui-bundle.js",
                               swagger_css_url="/docs-files/swagger-ui.css", swagger_favicon_url="/docs-files/favicon.png")


@router.get("/docs-files/{name}")
def docs_files(name: str) -> Response:
    root = _swagger_files()
    if root is None or name not in DOCS_FILES:
        raise HTTPException(404, f"no docs file {name[:100]!r}")
    return Response((root / name).read_bytes(), media_type=DOCS_FILES[name], headers={"Cache-Control": "max-age=86400"})
