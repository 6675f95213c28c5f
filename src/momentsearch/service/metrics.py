"""``GET /metrics`` in Prometheus' text format (0.0.4), written here without a client library:

* ``momentsearch_requests_total{method, route, status}``: requests answered, by route template;
* ``momentsearch_request_seconds{route}``: a histogram of the time to answer;
* ``momentsearch_batch_size``: a histogram of the queries the batcher searched together;
* ``momentsearch_search_seconds``: a histogram of one batch's search (encoder, first stage, localizer, NMS);
* ``momentsearch_search_part_seconds{part}``: the same batch's time by part (``encode``, ``first_stage``,
  ``rerank``, ``localize``, ``nms``, ``rank``: :mod:`momentsearch.timing`);
* ``momentsearch_timeouts_total``: searches answered 504 because they ran past their timeout;
* ``momentsearch_videos`` and ``momentsearch_clips``: the index's size.

The same middleware writes the access log: one JSON object per request on the ``momentsearch.access``
logger (time, method, path, route, status, milliseconds, client address; never the query text).
"""

from __future__ import annotations

import bisect
import json
import logging
import threading
import time
from collections import defaultdict
from typing import Any

from momentsearch.timing import PARTS, PartClock

SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SIZES = (1, 2, 4, 8, 16, 32, 64, 128)
PART_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
ACCESS = logging.getLogger("momentsearch.access")


class Histogram:
    def __init__(self, buckets: tuple[float, ...]):
        self.buckets, self.counts, self.sum, self.count = buckets, [0] * len(buckets), 0.0, 0

    def observe(self, value: float) -> None:
        i = bisect.bisect_left(self.buckets, value)
        if i < len(self.counts):
            self.counts[i] += 1
        self.sum += value
        self.count += 1

    def lines(self, name: str, labels: str = "") -> list[str]:
        out, running = [], 0
        sep = "," if labels else ""
        for b, c in zip(self.buckets, self.counts, strict=True):
            running += c
            out.append(f'{name}_bucket{{{labels}{sep}le="{b:g}"}} {running}')
        out.append(f'{name}_bucket{{{labels}{sep}le="+Inf"}} {self.count}')
        braces = f"{{{labels}}}" if labels else ""
        out += [f"{name}_sum{braces} {self.sum:.6f}", f"{name}_count{braces} {self.count}"]
        return out


class Metrics:
    """Thread-safe counters and histograms; ``middleware`` records every request."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str, int], int] = defaultdict(int)
        self.latency: dict[str, Histogram] = {}
        self.batch_size = Histogram(SIZES)
        self.search_seconds = Histogram(SECONDS)
        self.parts = {p: Histogram(PART_SECONDS) for p in PARTS}
        self.timeouts = 0

    def batch(self, size: int, seconds: float, clock: PartClock | None = None) -> None:
        with self._lock:
            self.batch_size.observe(size)
            self.search_seconds.observe(seconds)
            for name, sec in (clock.seconds.items() if clock is not None else ()):
                self.parts.setdefault(name, Histogram(PART_SECONDS)).observe(sec)

    def timeout(self) -> None:
        with self._lock:
            self.timeouts += 1

    def request(self, method: str, route: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(method, route, status)] += 1
            self.latency.setdefault(route, Histogram(SECONDS)).observe(seconds)

    def text(self, videos: int, clips: int) -> str:
        with self._lock:
            out = ["# HELP momentsearch_requests_total Requests answered, by route template and status.",
                   "# TYPE momentsearch_requests_total counter"]
            for (method, route, status), n in sorted(self.requests.items()):
                out.append(f'momentsearch_requests_total{{method="{method}",route="{_esc(route)}",status="{status}"}} {n}')
            out += ["# HELP momentsearch_request_seconds Time to answer a request.",
                    "# TYPE momentsearch_request_seconds histogram"]
            for route, h in sorted(self.latency.items()):
                out += h.lines("momentsearch_request_seconds", f'route="{_esc(route)}"')
            out += ["# HELP momentsearch_batch_size Queries searched together in one batch.",
                    "# TYPE momentsearch_batch_size histogram", *self.batch_size.lines("momentsearch_batch_size"),
                    "# HELP momentsearch_search_seconds One batch's search: encoder, first stage, localizer, NMS.",
                    "# TYPE momentsearch_search_seconds histogram", *self.search_seconds.lines("momentsearch_search_seconds"),
                    "# HELP momentsearch_search_part_seconds One batch's search time by part.",
                    "# TYPE momentsearch_search_part_seconds histogram"]
            for name, h in self.parts.items():
                out += h.lines("momentsearch_search_part_seconds", f'part="{_esc(name)}"')
            out += ["# HELP momentsearch_timeouts_total Searches that ran past their timeout (answered 504).",
                    "# TYPE momentsearch_timeouts_total counter", f"momentsearch_timeouts_total {self.timeouts}",
                    "# HELP momentsearch_videos Videos in the index.", "# TYPE momentsearch_videos gauge",
                    f"momentsearch_videos {videos}",
                    "# HELP momentsearch_clips Clips in the index.", "# TYPE momentsearch_clips gauge",
                    f"momentsearch_clips {clips}"]
        return "\n".join(out) + "\n"


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class RequestMetrics:
    """ASGI middleware: each HTTP request's route template (``/videos/{video_id:path}``, not the id: the label
    set stays small), status and time; requests no route matched count as ``unmatched``. Writes the access
    log line too (``access_log``)."""

    def __init__(self, app: Any, metrics: Metrics, access_log: bool = True):
        self.app, self.metrics, self.access_log = app, metrics, access_log

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0, status = time.perf_counter(), 500

        async def watch(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, watch)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            seconds = time.perf_counter() - t0
            self.metrics.request(scope["method"], route, status, seconds)
            if self.access_log and ACCESS.isEnabledFor(logging.INFO):
                client = scope.get("client") or ("", 0)
                ACCESS.info(json.dumps({"ts": round(time.time(), 3), "method": scope["method"],
                                        "path": scope.get("path", "")[:300], "route": route, "status": status,
                                        "ms": round(1000 * seconds, 2), "client": f"{client[0]}:{client[1]}"}))
