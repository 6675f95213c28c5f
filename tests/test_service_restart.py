"""``momentsearch serve`` killed with SIGKILL under load: started again on the same index and port it answers
"not ready" (503) while it loads, never a 500, and then the same moments as before the kill."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytestmark = [pytest.mark.slow]

QUERIES = ["a white square", "someone waves", "the red door opens"]


def _start(index, port: int, log) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "from momentsearch.cli.main import main; main()", "serve", str(index),
                             "--port", str(port), "--device", "cpu", "--first-stage", "exact"],
                            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))


def _poll_until_ready(base: str, proc: subprocess.Popen) -> dict:
    seen: dict = {}
    deadline = time.time() + 120
    while time.time() < deadline:
        assert proc.poll() is None, "the server exited"
        try:
            r = httpx.post(base + "/v1/search", json={"query": "ready?", "k": 1}, timeout=5)
            seen[r.status_code] = seen.get(r.status_code, 0) + 1
            if r.status_code == 503:
                assert r.json()["error"].startswith("not ready: loading the index")
            if r.status_code == 200:
                return seen
        except httpx.TransportError:
            seen["refused"] = seen.get("refused", 0) + 1
        time.sleep(0.02)
    raise AssertionError(f"not ready in 120 s: {seen}")


def _answers(base: str) -> list:
    return [[(m["video_id"], m["start"], m["end"], m["score"]) for m in
             httpx.post(base + "/v1/search", json={"query": q, "k": 5}, timeout=30).json()["moments"]] for q in QUERIES]


def test_sigkill_under_load_then_restart_serves_the_same(tmp_path) -> None:
    from served_index import build_served_index

    index = build_served_index(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "serve.log").open("w")
    first = _start(index, port, log)
    second = None
    try:
        first_seen = _poll_until_ready(base, first)
        before = _answers(base)
        stop, during = threading.Event(), []

        def hammer() -> None:
            while not stop.is_set():
                try:
                    during.append(httpx.post(base + "/v1/search", json={"query": QUERIES[0], "k": 3}, timeout=10)
                                  .status_code)
                except httpx.TransportError:
                    during.append("refused")

        threads = [threading.Thread(target=hammer) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        second = _start(index, port, log)
        seen = _poll_until_ready(base, second)
        stop.set()
        for t in threads:
            t.join(15)
        after = _answers(base)
        # The same moments in the same order. Scores agree to float32 rounding only: the hammer's concurrent
        # copies of QUERIES[0] reach the restarted server in micro-batches (with "ready?" among them), the
        # query cache keeps that embedding, and MiniLM over a batch of another shape rounds differently in the
        # last bits (CI saw 3e-9 on scores near 3e-3; an AMD EPYC with training beside it, 4e-7: Eq. 3's
        # exp(alpha s_vr) multiplies a last-bit change of the cosine by alpha, a relative 1.3e-4).
        assert [[m[:3] for m in q] for q in after] == [[m[:3] for m in q] for q in before]
        assert [[m[3] for m in q] for q in after] == [pytest.approx([m[3] for m in q], rel=1e-3) for q in before]
    finally:
        for p in (first, second):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(10)
        log.close()
    assert first.returncode == -signal.SIGKILL
    assert 200 in during and set(during) <= {200, 503, "refused"}, set(during)
    for statuses in (first_seen, seen):
        assert set(statuses) <= {200, 503, "refused"}, statuses
    assert seen.get(503, 0) >= 1, seen  # the port opens before the index is loaded, and says so
