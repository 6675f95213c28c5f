"""An index folder over three small ingested videos (one with subtitles), for the service's tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from momentsearch.serving.indexing import build_index
from momentsearch.video.encoders import create_encoder
from momentsearch.video.ingest import ingest
from video_files import write_video

SRT = "1\n00:00:01,000 --> 00:00:03,000\nthe red door opens\n\n2\n00:00:04,000 --> 00:00:05,500\nsomeone waves\n"
DURATIONS = {"clip0": 6.0, "clip1": 9.0, "clip2": 4.0}


def build_served_index(root: Path) -> Path:
    from test_index_folder import packed_xml

    d = root / "videos"
    d.mkdir(parents=True)
    for i, secs in enumerate(DURATIONS.values()):
        write_video(d / f"clip{i}.mp4", seconds=secs, rate=8, w=64, h=48)
    (d / "clip1.srt").write_text(SRT)
    ingest(d, root / "corpus", clip_seconds=1.0, fps=2.0, progress=False)
    ckpt = packed_xml(root / "xml.pt", create_encoder("builtin").identity())
    build_index(ckpt, root / "corpus", root / "index", device="cpu", progress=False)
    return root / "index"


def run_live(app: Any) -> tuple[str, Any, threading.Thread]:
    """``app`` served by uvicorn on a free loopback port, in a thread: (its URL, the server, the thread); stop it
    with ``server.should_exit = True`` and ``thread.join()``."""
    import uvicorn

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not srv.started and time.time() < deadline:
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", srv, thread


def serve_watching(index: Path, videos: Path, log: Path) -> tuple[str, subprocess.Popen]:
    """``momentsearch serve INDEX --watch VIDEOS`` in its own process, once ready: (its URL, the process)."""
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", "from momentsearch.cli.main import main; main()", "serve", str(index),
                             "--port", str(port), "--device", "cpu", "--watch", str(videos), "--watch-interval", "0.25",
                             "--no-access-log"], stdout=log.open("w"), stderr=subprocess.STDOUT,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 300  # (a loaded machine: torch, MiniLM and CLIP load slowly)
    while time.time() < deadline:
        try:
            if httpx.get(url + "/readyz", timeout=2).status_code == 200:
                return url, proc
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("not ready: " + log.read_text()[-2000:])
