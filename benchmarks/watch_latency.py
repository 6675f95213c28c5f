"""From a file landing in a watched folder to it being searchable in a running service, under load.

    python benchmarks/watch_latency.py --videos runs/rendered/benchmark/videos \
        --model runs/rendered/xml_pixels_s0/checkpoints/best.pt --out runs/watch_bench [--hold 3] [--clients 4]

The folder's videos (with their SRTs) but ``--hold`` of them are linked into ``OUT/videos``, ingested and indexed
with ``--model`` (the ``builtin`` encoder's XML of ``benchmarks/rendered_xml.py``, say). Then ``momentsearch serve
OUT/index --watch OUT/videos`` runs in its own process while ``--clients`` clients search without pause, and the
held-out videos land one at a time (written beside, then renamed in, as a finished copy does): each one's time
from landing to ``/health`` counting it (the index rebuilt and swapped in) is measured, and every request of the
run must answer 200. Writes ``benchmarks/results/watch_latency.json``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import command_line, report  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--videos", type=Path, required=True)
    ap.add_argument("--model", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path("runs/watch_bench"))
    ap.add_argument("--hold", type=int, default=3, help="videos held out, landed one at a time")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--interval", type=float, default=1.0, help="serve --watch-interval")
    args = ap.parse_args()
    import httpx

    from momentsearch.serving.watch import Watcher

    files = sorted(args.videos.glob("*.mp4"))
    held, kept = files[-args.hold:], files[:-args.hold]
    videos = args.out / "videos"
    videos.mkdir(parents=True, exist_ok=True)
    for f in videos.iterdir():
        if f.stem in {h.stem for h in held}:
            f.unlink()  # a rerun starts without the held-out videos
    for f in kept:
        for src in (f, f.with_suffix(".srt")):
            if src.is_file() and not (videos / src.name).exists():
                (videos / src.name).symlink_to(src.resolve())
    t = time.perf_counter()
    Watcher(videos, args.out / "corpus", args.out / "index", args.model, settle=0.0).step()
    setup_s = time.perf_counter() - t
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    log = (args.out / "serve.log").open("w")
    proc = subprocess.Popen([sys.executable, "-c", "from momentsearch.cli.main import main; main()", "serve",
                             str(args.out / "index"), "--port", str(port), "--device", "cpu", "--watch", str(videos),
                             "--watch-interval", str(args.interval), "--no-access-log"],
                            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    codes: dict[int, int] = {}
    stop = threading.Event()
    rows = []
    try:
        while True:
            try:
                if httpx.get(base + "/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None:
                sys.exit((args.out / "serve.log").read_text()[-2000:])
            time.sleep(0.2)

        def hammer() -> None:
            with httpx.Client(timeout=60) as c:
                while not stop.is_set():
                    r = c.post(base + "/v1/search", json={"query": "a person opens the fridge", "k": 10})
                    codes[r.status_code] = codes.get(r.status_code, 0) + 1

        clients = [threading.Thread(target=hammer) for _ in range(args.clients)]
        for c in clients:
            c.start()
        n = httpx.get(base + "/health", timeout=10).json()["videos"]
        for f in held:
            time.sleep(2.0)
            landed = time.time()
            for src in (f.with_suffix(".srt"), f):  # the SRT first: the video lands complete with what is said
                if src.is_file():
                    shutil.copyfile(src, videos / f".{src.name}")
                    os.replace(videos / f".{src.name}", videos / src.name)
            while httpx.get(base + "/health", timeout=10).json()["videos"] == n:
                time.sleep(0.05)
            n += 1
            rows.append({"video": f.stem, "landing_to_searchable_s": round(time.time() - landed, 2),
                         "videos_after": n})
            print(rows[-1], flush=True)
        time.sleep(2.0)
    finally:
        stop.set()
        proc.terminate()
        proc.wait(30)
        log.close()
    total = sum(codes.values())
    secs = [r["landing_to_searchable_s"] for r in rows]
    print(f"requests {total}, by status {codes}; landing -> searchable median {statistics.median(secs):.2f} s")
    report("watch_latency", rows + [{"video": "median", "landing_to_searchable_s": statistics.median(secs),
                                     "videos_after": ""}],
           command_line(),
           extra={"requests": total, "status_codes": {str(k): v for k, v in codes.items()},
                  "clients": args.clients, "watch_interval_s": args.interval, "setup_s": round(setup_s, 1)})
    if set(codes) != {200}:
        sys.exit(f"failed requests during the swaps: {codes}")


if __name__ == "__main__":
    main()
