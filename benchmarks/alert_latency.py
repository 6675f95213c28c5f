"""From a matching file landing in a watched folder to its alert, under ``serve --watch`` (issue 73).

    python benchmarks/alert_latency.py [--files 5] [--clients 2] [--out /tmp/alert_latency]

A clip index over three ingested videos (``tests/example_index.py``: a tiny random CLIP, seen and said) is served
by ``momentsearch serve INDEX --watch VIDEOS --watch-interval 0.25`` in its own process, with a saved search
(``POST /v1/alerts``: "the blue wall is painted", min_score 0.6, a webhook on loopback). Then ``--files`` new videos
land one at a time (written beside, renamed in, with an SRT that says the line), while ``--clients`` clients search
without pause. Measured per file: landing -> the alert in ``GET /v1/alerts``, and -> the webhook's POST received;
every search request must answer 200. The watcher waits ``settle`` (2 s) for a file to stop changing, then
ingests, indexes and runs the saved searches over the new video only. Writes
``benchmarks/results/alert_latency.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(ROOT / "tests"))
from _common import report  # noqa: E402

POSTED: dict[str, float] = {}


class Hook(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        POSTED.setdefault(body["alert"]["video_id"], time.time())
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    import httpx

    from example_index import build_example_index, write_scenes
    from served_index import serve_watching

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=5)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("/tmp/alert_latency"))
    args = ap.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    index = build_example_index(args.out / "ex")
    videos = index.parent / "videos"
    hook = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=hook.serve_forever, daemon=True).start()
    url, proc = serve_watching(index, videos, args.out / "serve.log")
    codes: dict[int, int] = {}
    stop = threading.Event()

    def hammer() -> None:
        with httpx.Client(timeout=60) as c:
            while not stop.is_set():
                r = c.post(url + "/v1/search", json={"query": "a red room", "k": 3})
                codes[r.status_code] = codes.get(r.status_code, 0) + 1

    rows = []
    try:
        r = httpx.post(url + "/v1/alerts", json={"query": "the blue wall is painted", "min_score": 0.6,
                                                 "webhook": f"http://127.0.0.1:{hook.server_address[1]}/hook"})
        assert r.status_code == 201, r.text
        threads = [threading.Thread(target=hammer, daemon=True) for _ in range(args.clients)]
        for t in threads:
            t.start()
        for i in range(args.files):
            name = f"new{i}"
            (videos / f"{name}.srt").write_text("1\n00:00:04,000 --> 00:00:05,500\nthe blue wall is painted\n\n")
            write_scenes(args.out / f"{name}.mp4", ["grey", "blue"])
            landed = time.time()
            os.replace(args.out / f"{name}.mp4", videos / f"{name}.mp4")
            seen = None
            while time.time() - landed < 120:
                got = httpx.get(url + "/v1/alerts", timeout=30).json()["alerts"]
                if any(a["video_id"] == name for a in got):
                    seen = time.time() - landed
                    break
                time.sleep(0.1)
            while name not in POSTED and time.time() - landed < 120:
                time.sleep(0.05)
            rows.append({"file": name, "to alert (s)": round(seen, 2) if seen else None,
                         "to webhook (s)": round(POSTED[name] - landed, 2) if name in POSTED else None})
            print(rows[-1], flush=True)
    finally:
        stop.set()
        proc.terminate()
        proc.wait(30)
        hook.shutdown()
    alerts = [r["to alert (s)"] for r in rows if r["to alert (s)"] is not None]
    rows.append({"file": "median", "to alert (s)": round(statistics.median(alerts), 2) if alerts else None,
                 "to webhook (s)": round(statistics.median([r["to webhook (s)"] for r in rows
                                                             if r["to webhook (s)"] is not None]), 2)})
    report("alert_latency", rows, f"python benchmarks/alert_latency.py --files {args.files} --clients {args.clients}",
           extra={"requests": codes, "settle_s": 2.0, "watch_interval_s": 0.25, "clients": args.clients,
                  "alerts_raised": len(alerts), "files": args.files})


if __name__ == "__main__":
    main()
