"""The HTTP API (httpx through FastAPI's TestClient): results equal the Python searcher's, range requests,
thumbnails, the video filter, batching of concurrent requests, and a 4xx (never a 500) for bad input."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("faiss")

import httpx  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

import momentsearch  # noqa: E402
from momentsearch.service.app import create_app  # noqa: E402
from served_index import DURATIONS, build_served_index  # noqa: E402


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    index = build_served_index(tmp_path_factory.mktemp("served"))
    searcher = momentsearch.load(index, device="cpu", first_stage="faiss:Flat")
    app = create_app(searcher, max_batch=16, max_wait_ms=20)
    with TestClient(app) as client:
        yield searcher, app, client, index


def test_search_returns_the_searchers_moments_with_media_urls(served) -> None:
    searcher, _, client, _ = served
    r = client.post("/search", json={"query": "a white square", "k": 5})
    assert r.status_code == 200, r.text
    body = r.json()
    hits = searcher.search("a white square", k=5)
    assert [(m["video_id"], m["start"], m["end"]) for m in body["moments"]] == [
        (h.video_id, round(h.start, 3), round(h.end, 3)) for h in hits]
    assert [m["rank"] for m in body["moments"]] == list(range(1, len(hits) + 1))
    for m in body["moments"]:
        assert 0 <= m["start"] < m["end"] <= DURATIONS[m["video_id"]] + 1e-6
        assert m["video_url"] == f"/videos/{m['video_id']}"
        assert m["thumbnail_url"].startswith(f"/thumbnails/{m['video_id']}?t=")
    thumb = client.get(body["moments"][0]["thumbnail_url"])
    assert thumb.status_code == 200 and thumb.headers["content-type"] == "image/jpeg"
    assert thumb.content[:2] == b"\xff\xd8"  # a JPEG


def test_the_video_filter_and_subtitle_text(served) -> None:
    _, _, client, _ = served
    body = client.post("/search", json={"query": "the red door opens", "k": 20, "videos": ["clip1"]}).json()
    assert body["moments"] and {m["video_id"] for m in body["moments"]} == {"clip1"}
    said = {m["annotation"] for m in body["moments"] if 1.0 < m["end"] and m["start"] < 3.0}
    assert "the red door opens" in " ".join(s for s in said if s)  # the SRT line said during the moment


def test_videos_stream_with_range_requests(served) -> None:
    _, _, client, index = served
    data = (index.parent / "videos" / "clip1.mp4").read_bytes()
    full = client.get("/videos/clip1")
    assert full.status_code == 200 and full.content == data and full.headers["accept-ranges"] == "bytes"
    assert full.headers["content-type"] == "video/mp4"
    part = client.get("/videos/clip1", headers={"Range": "bytes=100-199"})
    assert part.status_code == 206 and part.content == data[100:200]
    assert part.headers["content-range"] == f"bytes 100-199/{len(data)}"
    tail = client.get("/videos/clip1", headers={"Range": "bytes=-50"})
    assert tail.status_code == 206 and tail.content == data[-50:]


@pytest.mark.parametrize("body, status, message", [
    ({"query": ""}, 422, "the query is empty"),
    ({"query": "   "}, 422, "the query is empty"),
    ({"query": "x" * 10_000}, 422, "query: String should have at most 1000 characters"),
    ({"query": "a cup", "k": 0}, 422, "k: Input should be greater than or equal to 1"),
    ({"query": "a cup", "k": 101}, 422, "k: Input should be less than or equal to 100"),
    ({"query": "a cup", "k": "ten"}, 422, "k: Input should be a valid integer"),
    ({"query": 7}, 422, "query: Input should be a valid string"),
    ({"k": 3}, 422, "query: Field required"),
    ({"query": "a cup", "colour": "red"}, 422, "colour: Extra inputs are not permitted"),
    ({"query": "a cup", "videos": []}, 422, "videos: List should have at least 1 item"),
    ({"query": "a cup", "videos": ["clip0", "nope", "../../etc/passwd"]}, 400,
     "2 video id(s) not in this index: 'nope', '../../etc/passwd'"),
])
def test_bad_search_requests_get_a_4xx_that_says_why(served, body, status, message) -> None:
    r = served[2].post("/search", json=body)
    assert r.status_code == status and message in r.json()["error"], r.text
    assert len(r.text) < 2000  # a 10 kB query is not echoed back


@pytest.mark.parametrize("path, message", [
    ("/videos/nope", "no video 'nope' in this index"),
    ("/videos/../../etc/passwd", "nothing at /etc/passwd"),  # normalised by the client: no such route
    ("/videos/..%2F..%2Fetc%2Fpasswd", "no video '../../etc/passwd' in this index"),
    ("/videos/%2Fetc%2Fpasswd", "no video '/etc/passwd' in this index"),
    ("/thumbnails/..%2Fcorpus%2Fcorpus.json?t=1", "no video '../corpus/corpus.json' in this index"),
    ("/static/..%2F..%2Fapi%2Fsearcher.py", "nothing at /static/../../api/searcher.py"),
    ("/static/index.html", "no static file"),
])
def test_paths_name_videos_not_files(served, path, message) -> None:
    r = served[2].get(path)
    assert r.status_code == 404 and message in r.json().get("error", r.text), r.text


def test_other_bad_requests(served) -> None:
    client = served[2]
    r = client.post("/search", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and "JSON decode error" in r.json()["error"]
    for t, msg in (("-1", "t: Input should be greater than or equal to 0"), ("abc", "t: Input should be a valid number")):
        r = client.get(f"/thumbnails/clip0?t={t}")
        assert r.status_code == 422 and msg in r.json()["error"]
    assert client.get("/search").status_code == 405


def test_health_page_and_openapi(served) -> None:
    client = served[2]
    h = client.get("/health").json()
    assert h["status"] == "ok" and h["videos"] == 3 and h["first_stage"] == "faiss:Flat" and h["video_files"] == 3
    page = client.get("/")
    assert page.status_code == 200 and 'id="q"' in page.text and "http" not in page.text.split("<body>")[1]
    assert client.get("/static/app.js").headers["content-type"].startswith("text/javascript")
    spec = client.get("/openapi.json").json()
    assert {"/search", "/videos/{video_id}", "/thumbnails/{video_id}", "/health"} <= set(spec["paths"])


def test_concurrent_requests_are_batched_and_answered_alike(served) -> None:
    searcher, app, _, _ = served
    texts = [f"a {c} {s}" for c in ("red", "white", "blue", "green") for s in ("square", "disc", "bar", "ring")]
    alone = {t: [(h.video_id, round(h.start, 3), round(h.end, 3)) for h in searcher.search(t, k=4)] for t in texts}
    before = dict(app.state.batcher.stats)

    async def go() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            return await asyncio.gather(*(c.post("/search", json={"query": t, "k": 4}) for t in texts))

    responses = asyncio.run(go())
    assert all(r.status_code == 200 for r in responses)
    for t, r in zip(texts, responses, strict=True):
        assert [(m["video_id"], m["start"], m["end"]) for m in r.json()["moments"]] == alone[t]
    stats = app.state.batcher.stats
    assert stats["requests"] - before["requests"] == 16
    assert stats["batches"] - before["batches"] < 16 and stats["largest_batch"] > 1  # searched together


def test_two_batch_workers_answer_as_one_and_close(served) -> None:
    """``batch_workers=2``: both threads take batches (48 requests, more than one batch at a time), every
    answer is the searcher's own, and closing stops both threads."""
    searcher = served[0]
    texts = [f"a {c} {s}" for c in ("red", "white", "blue", "green") for s in ("square", "disc", "bar", "ring")] * 3
    alone = {t: [(h.video_id, round(h.start, 3), round(h.end, 3)) for h in searcher.search(t, k=4)] for t in texts}
    app = create_app(searcher, max_batch=4, max_wait_ms=5, batch_workers=2)
    batcher = app.state.batcher
    assert len(batcher._threads) == 2 and all(t.is_alive() for t in batcher._threads)
    names: set[str] = set()
    batcher.on_batch = lambda n, seconds, clock: names.add(threading.current_thread().name)

    async def go() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            return await asyncio.gather(*(c.post("/search", json={"query": t, "k": 4}) for t in texts))

    responses = asyncio.run(go())
    for t, r in zip(texts, responses, strict=True):
        assert r.status_code == 200 and [(m["video_id"], m["start"], m["end"]) for m in r.json()["moments"]] == alone[t]
    assert batcher.stats["requests"] == 48 and batcher.stats["largest_batch"] <= 4 and batcher.stats["batches"] >= 12
    assert names == {"momentsearch-batcher-0", "momentsearch-batcher-1"}  # both took batches
    batcher.close()
    assert not any(t.is_alive() for t in batcher._threads)


def test_a_damaged_video_file_is_the_projects_error_and_the_worker_goes_on(served) -> None:
    """A video file damaged after ingest: changed on disk -> 409 on /videos and /thumbnails; damaged with its
    size and time kept (nothing to see but the bytes) -> /videos serves the bytes, /thumbnails a 422 that
    names the video (no server path). The service answers searches throughout."""
    client, index = served[2], served[3]
    path = index.parent / "videos" / "clip2.mp4"
    good, st = path.read_bytes(), path.stat()
    try:
        b = bytearray(good)
        at = b.find(b"avc1", b.find(b"stsd"))
        b[at: at + 4] = b"zzz1"  # no decoder for the stream any more
        path.write_bytes(bytes(b) + b"\0")
        for url in ("/videos/clip2", "/thumbnails/clip2?t=1.7"):
            r = client.get(url)
            assert r.status_code == 409 and "'clip2' changed on disk since it was ingested" in r.json()["error"], url
        path.write_bytes(bytes(b))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        r = client.get("/thumbnails/clip2?t=1.9")
        assert r.status_code == 422, r.text
        err = r.json()["error"]
        assert err.startswith("no thumbnail of video 'clip2' at 1.9 s: its video stream has no decoder") and str(path) not in err
        r = client.get("/videos/clip2", headers={"Range": "bytes=0-99"})
        assert r.status_code == 206 and r.content == bytes(b)[:100]
        assert client.post("/search", json={"query": "a white square", "k": 3}).status_code == 200
        assert client.get("/health").json()["status"] == "ok"
    finally:
        path.write_bytes(good)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert client.get("/thumbnails/clip2?t=2.1").status_code == 200
