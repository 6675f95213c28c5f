"""What one served query costs, part by part: ``momentsearch serve`` on loopback, at batch 1 and under 16 clients.

    python benchmarks/query_cost.py --index xml=runs/demo/index --index minute=runs/demo_minute/index \\
        [--requests 300] [--seconds 20] [--clients 16] [--flame docs/figures/query_cost_flame.svg]

Per index: the server is started as its own process (``--no-access-log``) and warmed with 30 queries; then

* **batch 1**: ``--requests`` requests one after the other (``POST /v1/search``, k 10, every query distinct);
* **N clients**: ``--clients`` clients, each one request after the other, for ``--seconds``.

Each answer's ``Server-Timing`` header gives the batch wait and the parts of the search (``encode``,
``first_stage``, ``rerank``, ``localize``, ``nms``, ``rank``: :mod:`momentsearch.timing`) and ``app``, the time
in the handler. ``response`` is ``app`` less the wait and the parts (the filters' check, building the moments
and their URLs); ``http+json`` is the client's time less ``app`` (the request and response on loopback, JSON
both ways, uvicorn and the event loop). The table gives each part's median over the requests; under load
the parts of one batch are shared by its queries (``mean batch`` of them). For the slowest 1 % of requests,
the mean of their ``http+json``, ``batch_wait`` and search parts says where the tail comes from. ``--flame``: a py-spy flame graph
of the server under N clients for ``--seconds`` more, after the measured runs of the first index.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, report  # noqa: E402
from service_load import DOES, WHAT, WHO, free_port  # noqa: E402
from service_soak import start, wait_ready  # noqa: E402

PARTS = ("batch_wait", "encode", "first_stage", "rerank", "localize", "nms", "rank")
ADJ = ("red", "blue", "small", "old", "wooden", "white", "green", "large")
WHERE = ("in the kitchen", "in the park", "at the door", "on the stairs", "in the office", "by the window")
# 13,824 distinct queries in a fixed shuffled order, none repeated within a run: the text encoder's cache
# never answers (a served query pays its encoding), as with real traffic of distinct queries
QUERIES = [f"{a} {b} the {c} {d} {e}" for a in WHO for b in DOES for c in ADJ for d in (w.split()[-1] for w in WHAT)
           for e in WHERE]
np.random.default_rng(0).shuffle(QUERIES)


def parse_timing(header: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for item in header.split(","):
        name, _, rest = item.strip().partition(";")
        if rest.startswith("dur="):
            out[name] = float(rest[4:])
        elif rest.startswith("desc="):
            out[name] = float(rest[5:].strip('"'))
    return out


class Recorder:
    def __init__(self) -> None:
        self.rows: list[dict[str, float]] = []

    def add(self, client_ms: float, header: str) -> None:
        t = parse_timing(header)
        parts = {p: t.get(p, 0.0) for p in PARTS}
        t_app = t["app"]
        self.rows.append({"client": client_ms, **parts, "response": max(0.0, t_app - sum(parts.values())),
                          "http+json": client_ms - t_app, "batch": t.get("batch", 1.0)})


NEXT = iter(range(10**9))  # the next query's number, shared by every client and run of this process


async def one_client(c: httpx.AsyncClient, rec: Recorder, stop_at: float | None, n: int | None,
                     errors: list[str]) -> None:
    sent = 0
    while (stop_at is None or time.perf_counter() < stop_at) and (n is None or sent < n):
        sent += 1
        t = time.perf_counter()
        r = await c.post("/v1/search", json={"query": QUERIES[next(NEXT) % len(QUERIES)], "k": 10})
        ms = 1000 * (time.perf_counter() - t)
        if r.status_code != 200:
            errors.append(f"{r.status_code}: {r.text[:200]}")
        else:
            rec.add(ms, r.headers["server-timing"])


async def measure(base: str, clients: int, seconds: float | None, n: int | None) -> tuple[Recorder, float, list[str]]:
    rec, errors = Recorder(), []
    async with httpx.AsyncClient(base_url=base, timeout=60, limits=httpx.Limits(max_connections=clients)) as c:
        t0 = time.perf_counter()
        stop = None if seconds is None else t0 + seconds
        await asyncio.gather(*(one_client(c, rec, stop, n, errors) for _ in range(clients)))
        wall = time.perf_counter() - t0
    return rec, wall, errors


def summarise(name: str, health: dict, mode: str, rec: Recorder, wall: float, errors: list[str]) -> dict:
    a = {k: np.asarray([r[k] for r in rec.rows]) for k in rec.rows[0]}
    row = {"index": name, "family": health["family"], "videos": health["videos"], "first stage": health["first_stage"],
           "mode": mode, "requests/s": len(rec.rows) / wall, "p50_ms": float(np.median(a["client"])),
           "p99_ms": float(np.percentile(a["client"], 99)), "errors": len(errors),
           "mean batch": float(a["batch"].mean())}
    for k in ("http+json", *PARTS, "response"):
        row[f"{k}_ms"] = float(np.median(a[k]))
    tail = a["client"] >= np.percentile(a["client"], 99)  # the slowest 1 %: where their time went (means)
    search = sum(a[k] for k in PARTS if k != "batch_wait")
    for k, v in (("http+json", a["http+json"]), ("batch_wait", a["batch_wait"]), ("search", search)):
        row[f"slowest 1 %: {k}_ms"] = float(v[tail].mean())
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", action="append", required=True,
                    help="NAME=INDEX_DIR (repeatable); NAME=INDEX_DIR@--batch-workers=2: that serve option too")
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--first-stage", default="auto")
    ap.add_argument("--flame", type=Path, default=None, help="an SVG flame graph (py-spy) of the first index's load run")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    rows, failed = [], False
    for j, spec in enumerate(args.index):
        name, _, path = spec.partition("=")
        path, *extra = path.split("@")  # serve options for this row, as --opt=value
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        proc = start(Path(path), port, Path(f"/tmp/query_cost_{name}.log"), args.first_stage, tuple(extra))
        spy = None
        try:
            wait_ready(base, proc)
            health = httpx.get(base + "/health").json()
            asyncio.run(measure(base, 1, None, 30))  # warm: the first queries load lazy caches
            rec, wall, errors = asyncio.run(measure(base, 1, None, args.requests))
            rows.append(summarise(name, health, "batch 1", rec, wall, errors))
            rec, wall, errors2 = asyncio.run(measure(base, args.clients, args.seconds, None))
            rows.append(summarise(name, health, f"{args.clients} clients", rec, wall, errors2))
            failed |= bool(errors or errors2)
            for e in (errors + errors2)[:3]:
                print("error:", e)
            if args.flame is not None and j == 0:  # a run of its own: sampling does not touch the figures above
                args.flame.parent.mkdir(parents=True, exist_ok=True)
                spy = subprocess.Popen([str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(proc.pid),
                                        "--duration", str(int(args.seconds)), "--rate", "200", "--format",
                                        "flamegraph", "--output", str(args.flame), "--nonblocking"],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                asyncio.run(measure(base, args.clients, args.seconds, None))
        finally:
            if spy is not None:
                spy.wait(args.seconds + 60)
            proc.terminate()
            proc.wait(30)
    report("query_cost", rows, command_line(), args.json)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
