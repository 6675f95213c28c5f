"""A soak of ``momentsearch serve`` on loopback, then its faults: bounded, it stops by itself.

    python benchmarks/service_soak.py --index runs/demo/index [--minutes 10] [--clients 16]

1. **Soak.** Starts the server as its own process, then ``--clients`` clients send requests one after the
   other for ``--minutes``: ``POST /v1/search`` (k 10; every third request grouped by video, every fifth
   with a duration filter, every seventh the next page) and, every eleventh, ``POST /v1/search/batch`` of 4
   queries. Each minute: requests/s, p50 and p99 latency, errors (any non-200 answer or failed request),
   and the server's resident memory (VmRSS; RssAnon, its own memory apart from the index's mapped files).
   Memory growth is the last minute's RssAnon less the first minute's.
2. **SIGKILL.** Under the same load, the server is killed with SIGKILL, started again on the same index
   and port, and polled from the moment it is started: every answer while it loads must be 503 "not ready"
   (or a refused connection before the port opens), never a 500; once ready, 20 fixed queries must return the
   same moments as before the kill.

Writes ``results/service_soak.json`` and prints a table; exit status 1 when an error, a 500 or a changed
result was seen.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, report  # noqa: E402
from service_load import QUERIES, free_port  # noqa: E402

FIXED = QUERIES[::12][:20]


def start(index: Path, port: int, log: Path, first_stage: str = "auto", extra: tuple[str, ...] = ()
          ) -> subprocess.Popen:
    """``momentsearch serve`` as its own process on loopback (its output appended to ``log``); ``extra``: more
    of its options."""
    cmd = [sys.executable, "-c", "from momentsearch.cli.main import main; main()", "serve", str(index), "--port",
           str(port), "--device", "cpu", "--first-stage", first_stage, "--no-access-log", *extra]
    return subprocess.Popen(cmd, stdout=log.open("a"), stderr=subprocess.STDOUT,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))


def wait_ready(base: str, proc, seconds: float = 300) -> dict[int | str, int]:
    """Poll /v1/search from now until ready; the statuses seen while loading (refused: "refused")."""
    seen: dict[int | str, int] = {}
    deadline = time.time() + seconds
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        try:
            r = httpx.post(base + "/v1/search", json={"query": "ready?", "k": 1}, timeout=5)
            seen[r.status_code] = seen.get(r.status_code, 0) + 1
            if r.status_code == 200:
                return seen
        except httpx.TransportError:
            seen["refused"] = seen.get("refused", 0) + 1
        time.sleep(0.05)
    raise SystemExit(f"not ready within {seconds} s: {seen}")


def memory(pid: int) -> dict[str, float]:
    f = {x.split(":")[0]: int(x.split()[1]) for x in Path(f"/proc/{pid}/status").read_text().splitlines()
         if x.startswith(("VmRSS", "RssAnon"))}
    return {"rss_MiB": f["VmRSS"] / 1024, "anon_MiB": f["RssAnon"] / 1024}


def request(i: int) -> tuple[str, dict]:
    q = QUERIES[i % len(QUERIES)]
    if i % 11 == 0:
        return "/v1/search/batch", {"queries": [QUERIES[(i + j) % len(QUERIES)] for j in range(4)], "k": 10}
    body: dict = {"query": q, "k": 10, "group_by_video": i % 3 == 0}
    if i % 5 == 0:
        body["min_duration"] = 10
    if i % 7 == 0:
        body["offset"] = 10
    return "/v1/search", body


class Load:
    """Clients sending requests until ``stop``; each answer's (time it ended, latency, ok)."""

    def __init__(self, base: str, clients: int):
        self.base, self.clients, self.stop = base, clients, False
        self.done: list[tuple[float, float, bool]] = []
        self.errors: list[str] = []
        self.statuses: dict[str, int] = {}

    async def client(self, n: int) -> None:
        async with httpx.AsyncClient(base_url=self.base, timeout=60) as c:
            i = n * 997
            while not self.stop:
                path, body = request(i)
                i += 1
                t = time.perf_counter()
                try:
                    r = await c.post(path, json=body)
                    ok = r.status_code == 200
                    key = str(r.status_code)
                    if not ok:
                        self.errors.append(f"{r.status_code}: {r.text[:200]}")
                except httpx.HTTPError as e:
                    ok, key = False, type(e).__name__
                    self.errors.append(f"{key}: {e}")
                    await asyncio.sleep(0.05)
                self.statuses[key] = self.statuses.get(key, 0) + 1
                self.done.append((time.perf_counter(), 1000 * (time.perf_counter() - t), ok))

    async def run(self, seconds: float, every: float, sample) -> None:
        tasks = [asyncio.create_task(self.client(n)) for n in range(self.clients)]
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            await asyncio.sleep(min(every, seconds - (time.perf_counter() - t0)))
            sample()
        self.stop = True
        await asyncio.gather(*tasks)


def answers(base: str) -> list[list[tuple]]:
    out = []
    for q in FIXED:
        r = httpx.post(base + "/v1/search", json={"query": q, "k": 10}, timeout=60).json()
        out.append([(m["video_id"], m["start"], m["end"], round(m["score"], 5)) for m in r["moments"]])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", type=Path, required=True)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = Path(f"/tmp/momentsearch_soak_{port}.log")
    proc = start(args.index, port, log)
    t_start = time.time()
    wait_ready(base, proc)
    load_seconds = time.time() - t_start
    before = answers(base)
    load = Load(base, args.clients)
    minutes: list[dict] = []
    t0 = time.perf_counter()

    def sample() -> None:
        now = time.perf_counter()
        lo = t0 + 60 * len(minutes)
        span = [(lat, ok) for end, lat, ok in load.done if lo <= end < now]
        lat = np.asarray([x for x, _ in span]) if span else np.zeros(1)
        minutes.append({"minute": len(minutes) + 1, "requests/s": len(span) / (now - lo),
                        "p50_ms": float(np.percentile(lat, 50)), "p99_ms": float(np.percentile(lat, 99)),
                        "errors": sum(not ok for _, ok in span), **memory(proc.pid)})
        m = minutes[-1]
        print(f"minute {m['minute']}: {m['requests/s']:.1f} req/s, p50 {m['p50_ms']:.0f} ms, p99 {m['p99_ms']:.0f} ms, "
              f"errors {m['errors']}, RSS {m['rss_MiB']:.0f} MiB (own {m['anon_MiB']:.0f})", flush=True)

    try:
        asyncio.run(load.run(60 * args.minutes, 60, sample))
        soak_errors = list(load.errors)

        # SIGKILL under load, restart on the same port, poll from the start
        kill = Load(base, args.clients)

        async def kill_under_load() -> dict:
            tasks = [asyncio.create_task(kill.client(n)) for n in range(args.clients)]
            await asyncio.sleep(5)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
            kill.stop = True
            await asyncio.gather(*tasks)
            return dict(kill.statuses)

        during_kill = asyncio.run(kill_under_load())
        restarted = start(args.index, port, log)
        t_restart = time.time()
        while_loading = wait_ready(base, restarted)
        ready_seconds = time.time() - t_restart
        after = answers(base)
    finally:
        for p in (proc, locals().get("restarted")):
            if p is not None and p.poll() is None:
                p.terminate()
                p.wait(20)
    anon = [m["anon_MiB"] for m in minutes]
    rps = [m["requests/s"] for m in minutes]
    summary = {
        "index": str(args.index), "minutes": len(minutes), "clients": args.clients,
        "load_seconds": round(load_seconds, 1), "requests": int(sum(m["requests/s"] * 60 for m in minutes)),
        "errors": len(soak_errors), "requests/s min": min(rps), "requests/s max": max(rps),
        "requests/s last/first": rps[-1] / rps[0],
        "own memory growth MiB (last - first minute)": anon[-1] - anon[0],
        "answers during the kill": during_kill, "statuses while restarting": {str(k): v for k, v in while_loading.items()},
        "500s while restarting": while_loading.get(500, 0), "restart to ready s": round(ready_seconds, 1),
        "same answers after restart": after == before,
    }
    rows = [dict(m) for m in minutes]
    report("service_soak", rows, command_line(), args.json,
           extra={"summary": summary, "first errors": soak_errors[:5]})
    print(json.dumps(summary, indent=1))
    bad = soak_errors or while_loading.get(500, 0) or after != before or any(
        k not in (200, 503, "refused") for k in while_loading)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
