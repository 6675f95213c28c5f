"""A load test of ``momentsearch serve`` on loopback: concurrent clients for a bounded time.

    python benchmarks/service_load.py --index runs/demo/index [--seconds 30] [--clients 16]

Starts the server as its own process (uvicorn, 127.0.0.1, a free port), waits for ``/health``, then
``--clients`` clients each send ``POST /search`` (k = 10, 240 distinct queries in turn) one after
the other for ``--seconds``. Prints and writes requests/s, latency p50/p95/p99 (ms), errors (any
non-200 answer or failed request: must be 0) and how the server batched them. Exit status 1 when
any request failed.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, report  # noqa: E402

WHO = ("a man", "a woman", "someone", "a child", "a person", "the cook")
DOES = ("opens", "closes", "picks up", "puts down", "washes", "throws")
WHAT = ("the door", "a cup", "the fridge", "a red ball", "the laptop", "a book", "the window", "a towel")
QUERIES = [f"{a} {b} {c}" for a, b, c in itertools.product(WHO, DOES, WHAT)][:240]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(index: Path, port: int, first_stage: str, log: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-c", "from momentsearch.cli.main import main; main()", "serve", str(index), "--port", str(port),
           "--first-stage", first_stage, "--device", "cpu"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(cmd, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)
    deadline = time.time() + 180
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    proc.kill()
    raise SystemExit(f"the server did not answer /health within 180 s:\n{log.read_text()[-3000:]}")


def server_memory(pid: int) -> dict[str, float]:
    """The server's peak resident memory, and now its own (anonymous) memory apart from the pages of
    memory-mapped files (the index's arrays: page cache), in MiB."""
    fields = {x.split(":")[0]: int(x.split()[1]) for x in Path(f"/proc/{pid}/status").read_text().splitlines()
              if x.startswith(("VmHWM", "RssAnon", "RssFile"))}
    return {"peak_rss_MiB": fields["VmHWM"] / 1024, "anon_rss_MiB": fields["RssAnon"] / 1024,
            "file_rss_MiB": fields["RssFile"] / 1024}


async def client(base: str, n: int, stop_at: float, latencies: list[float], errors: list[str],
                 timeout: float = 60) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=timeout) as c:
        for i in itertools.count(n * 15):
            if time.perf_counter() >= stop_at:
                return
            t = time.perf_counter()
            try:
                r = await c.post("/search", json={"query": QUERIES[i % len(QUERIES)], "k": 10})
                if r.status_code != 200 or "moments" not in r.json():
                    errors.append(f"{r.status_code}: {r.text[:200]}")
            except httpx.HTTPError as e:
                errors.append(f"{type(e).__name__}: {e}")
            latencies.append(1000 * (time.perf_counter() - t))


async def load(base: str, clients: int, seconds: float, timeout: float = 60) -> tuple[list[float], list[str], float]:
    latencies: list[float] = []
    errors: list[str] = []
    t0 = time.perf_counter()
    await asyncio.gather(*(client(base, n, t0 + seconds, latencies, errors, timeout) for n in range(clients)))
    return latencies, errors, time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--first-stage", default="auto")
    ap.add_argument("--json", type=Path, default=None, help="where to write the JSON (default results/service_load.json)")
    args = ap.parse_args()
    port = free_port()
    log = Path(f"/tmp/momentsearch_serve_{port}.log")
    proc = start_server(args.index, port, args.first_stage, log)
    base = f"http://127.0.0.1:{port}"
    try:
        health = httpx.get(base + "/health").json()
        latencies, errors, wall = asyncio.run(load(base, args.clients, args.seconds))
        batching = httpx.get(base + "/health").json()["batching"]
        memory = server_memory(proc.pid)
    finally:
        proc.terminate()
        proc.wait(20)
    lat = np.asarray(latencies)
    row = {"videos": health["videos"], "first stage": health["first_stage"], "clients": args.clients,
           "seconds": round(wall, 1), "requests": len(lat), "requests/s": len(lat) / wall,
           "p50_ms": float(np.percentile(lat, 50)), "p95_ms": float(np.percentile(lat, 95)),
           "p99_ms": float(np.percentile(lat, 99)), "errors": len(errors),
           "mean batch": batching["requests"] / max(1, batching["batches"]), "largest batch": batching["largest_batch"],
           **memory}
    report("service_load", [row], command_line(), args.json)
    for e in errors[:5]:
        print("error:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
