"""``momentsearch serve INDEX_DIR``: the HTTP API and the web page over an index folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from momentsearch.cli.app import app, require_models
from momentsearch.errors import MomentSearchError

FIRST_STAGE_HELP = ("auto (exact up to 200k clips, scan above), exact, scan (PQ codes of every clip, the best videos "
                    "re-scored exactly), faiss:FACTORY (e.g. faiss:HNSW32, faiss:IVF4096,Flat), milvus (milvus-lite "
                    "in the index folder) or milvus:URI (a Milvus server).")
PARAM_HELP = ("A first-stage parameter KEY=VALUE, repeatable (rescore=2000, nprobe=32, efSearch=128, index_type=HNSW, "
              "token=...).")


@app.command("serve")
def serve_cmd(
    index_dir: Annotated[Path, typer.Argument(help="An index folder (momentsearch index ... --out INDEX_DIR), or a "
                                                   "sharded index (momentsearch shard).")],
    host: Annotated[str, typer.Option(help="Interface to listen on (0.0.0.0: every interface).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")] = 8000,
    first_stage: Annotated[str, typer.Option("--first-stage", help=FIRST_STAGE_HELP)] = "auto",
    param: Annotated[Optional[list[str]], typer.Option("--param", help=PARAM_HELP)] = None,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    max_batch: Annotated[int, typer.Option("--max-batch", min=1, help="Concurrent queries searched as one batch.")] = 32,
    max_wait_ms: Annotated[float, typer.Option("--max-wait-ms", min=0.0, help=(
        "How long a batch may wait for more queries (0: never; queries that arrive while a batch is searched form the "
        "next). 15 serves about a fifth more requests/s under load, at a higher p99 (docs/query_cost.md)."))] = 0.0,
    batch_wait: Annotated[str, typer.Option("--batch-wait", help=(
        "adaptive: wait only while the batch holds fewer queries than the clients seen in the last cycle (a lone "
        "client never waits); fixed: always wait --max-wait-ms for up to --max-batch."))] = "adaptive",
    batch_workers: Annotated[int, typer.Option("--batch-workers", min=1, help=(
        "Threads that each search a batch (2: one encodes or answers its batch while the other searches)."))] = 1,
    api_key: Annotated[Optional[str], typer.Option(
        "--api-key", help="Required on every route but /livez (Bearer, X-API-Key, or Basic's password); default: "
                          "$MOMENTSEARCH_API_KEY.")] = None,
    allow_unauthenticated: Annotated[bool, typer.Option(
        "--allow-unauthenticated", help="Serve a non-loopback --host without an API key.")] = False,
    cors_origin: Annotated[Optional[list[str]], typer.Option(
        "--cors-origin", help="An origin a page elsewhere may call from (repeatable; CORS is off without one).")] = None,
    ssl_keyfile: Annotated[Optional[str], typer.Option("--ssl-keyfile", help="TLS key (uvicorn's).")] = None,
    ssl_certfile: Annotated[Optional[str], typer.Option("--ssl-certfile", help="TLS certificate (uvicorn's).")] = None,
    timeout_ms: Annotated[float, typer.Option("--timeout-ms", min=1.0, max=600_000.0, help=(
        "A search's default timeout; past it the answer is a 504 (a request's timeout_ms overrides it)."))] = 30_000.0,
    access_log: Annotated[bool, typer.Option(help="One JSON line per request on stdout.")] = True,
    reload_index: Annotated[bool, typer.Option(help=(
        "When the index folder is rebuilt (momentsearch index, watch), load it and swap to it between requests."))] = True,
    watch: Annotated[Optional[Path], typer.Option("--watch", help=(
        "A folder of videos to keep the index current with: new, changed and removed files are ingested into the "
        "index's corpus, indexed and served, with no request failed."))] = None,
    watch_interval: Annotated[float, typer.Option("--watch-interval", min=0.1, help="Seconds between looks at the folders.")] = 2.0,
    ray: Annotated[Optional[str], typer.Option("--ray", help=(
        "A sharded index (momentsearch shard): serve its shards as actors on this Ray cluster (local, auto, "
        "HOST:PORT); without it the shards run in this process."))] = None,
    replicas: Annotated[int, typer.Option("--replicas", min=1, help="Actors per shard with --ray (a dead one's "
                                                                    "requests go to another).")] = 1,
) -> None:
    """Serve search over HTTP: POST /search, GET /videos/{id} (range requests), /thumbnails, /health, and a
    page at / that plays the moments it finds."""
    require_models()
    try:
        from momentsearch.service import serve
    except ImportError as e:
        raise MomentSearchError(f"serve needs the service extra ({e.name} is missing): "
                                "pip install 'momentsearch[service]'") from None
    from momentsearch.errors import SearchIndexError
    from momentsearch.search.first_stage import parse_params
    from momentsearch.serving.indexing import is_index_folder
    from momentsearch.serving.shards import is_sharded

    if not is_index_folder(index_dir) and not is_sharded(index_dir):
        raise SearchIndexError(f"{index_dir}: not an index folder or a sharded index; build one with `momentsearch index CHECKPOINT "
                               f"--corpus CORPUS_DIR --out {index_dir}`")
    if is_sharded(index_dir) and watch is not None:
        raise MomentSearchError("--watch indexes into one index folder; for a sharded index, index the new videos "
                                "into a folder of their own and add it with `momentsearch shard-add`")
    if ray is not None and not is_sharded(index_dir):
        raise MomentSearchError(f"--ray serves the shards of a sharded index; {index_dir} is one index folder "
                                f"(split it with `momentsearch shard {index_dir} --into N --out SHARDED`)")
    from momentsearch.service.settings import ServiceSettings

    serve(index_dir, ServiceSettings(
        host=host, port=port, first_stage=first_stage, first_stage_params=parse_params(param), device=device,
        max_batch=max_batch, max_wait_ms=max_wait_ms, batch_wait=batch_wait, batch_workers=batch_workers, api_key=api_key, allow_unauthenticated=allow_unauthenticated,
        cors_origins=tuple(cors_origin or ()), ssl_keyfile=ssl_keyfile, ssl_certfile=ssl_certfile,
        timeout_ms=timeout_ms, access_log=access_log, reload_index=reload_index, watch=watch,
        watch_interval=watch_interval, ray=ray, replicas=replicas))
