"""How a service runs: one :class:`ServiceSettings`, shared by ``serve()``, ``create_app()`` and ``momentsearch
serve`` (whose options are its fields). Plain data: reading it imports neither FastAPI nor an index."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from momentsearch.errors import ConfigError

MAX_BODY_BYTES = 1 << 20  # a request body over this is a 413
DEFAULT_TIMEOUT_MS = 30_000.0
BATCH_WAITS = ("adaptive", "fixed")  # how a batch waits for more queries (service.batcher)


@dataclass(frozen=True)
class ServiceSettings:
    host: str = "127.0.0.1"  # the interface to listen on
    port: int = 8000
    first_stage: str = "auto"  # exact, auto, scan, faiss:FACTORY, milvus[:URI]
    first_stage_params: dict[str, str] = field(default_factory=dict)
    device: str = "auto"
    max_batch: int = 32  # concurrent queries searched as one batch
    max_wait_ms: float = 0.0  # how long a batch may wait for more queries (0: never)
    batch_wait: str = "adaptive"  # adaptive: only while fewer than the clients seen in the last cycle; fixed: always
    batch_workers: int = 1  # threads that each search a batch (2: one encodes or answers while one searches)
    log_level: str = "info"
    api_key: str | None = None  # required on every route but /livez (else $MOMENTSEARCH_API_KEY in serve())
    allow_unauthenticated: bool = False  # serve a non-loopback host without a key
    cors_origins: tuple[str, ...] = ()  # origins a page elsewhere may call from (CORS is off without one)
    ssl_keyfile: str | None = None
    ssl_certfile: str | None = None
    timeout_ms: float = DEFAULT_TIMEOUT_MS  # a search's default timeout (a request's timeout_ms overrides it)
    access_log: bool = True  # one JSON line per request
    reload_index: bool = True  # load a rebuilt index folder and swap to it between requests
    watch: Path | None = None  # a folder of videos to keep the index current with
    watch_interval: float = 2.0  # seconds between looks at the folders
    max_body_bytes: int = MAX_BODY_BYTES
    ray: str | None = None  # a sharded index's shards as actors on this Ray cluster (None: in this process)
    replicas: int = 1  # actors per shard on Ray
    max_clip_seconds: float = 600.0  # the longest moment GET /v1/clips cuts in one request

    def __post_init__(self) -> None:
        checks = [("port", 1 <= self.port <= 65535, "from 1 to 65535"), ("max_batch", self.max_batch >= 1, ">= 1"),
                  ("batch_workers", self.batch_workers >= 1, ">= 1"),
                  ("max_wait_ms", self.max_wait_ms >= 0, ">= 0"),
                  ("batch_wait", self.batch_wait in BATCH_WAITS, " or ".join(BATCH_WAITS)), ("timeout_ms", self.timeout_ms > 0, "> 0"),
                  ("watch_interval", self.watch_interval > 0, "> 0"), ("max_body_bytes", self.max_body_bytes > 0, "> 0"),
                  ("replicas", self.replicas >= 1, ">= 1"), ("max_clip_seconds", self.max_clip_seconds > 0, "> 0")]
        for name, ok, rule in checks:
            if not ok:
                raise ConfigError(f"service setting {name} must be {rule}, got {getattr(self, name)!r}")
        object.__setattr__(self, "cors_origins", tuple(self.cors_origins or ()))
        object.__setattr__(self, "first_stage_params", dict(self.first_stage_params or {}))

    def with_(self, **changes: Any) -> ServiceSettings:
        """These settings with some fields changed (an unknown name is a :class:`ConfigError` naming it)."""
        unknown = set(changes) - set(self.__dataclass_fields__)
        if unknown:
            raise ConfigError(f"unknown service setting(s) {sorted(unknown)}; known: {sorted(self.__dataclass_fields__)}")
        return replace(self, **changes)
