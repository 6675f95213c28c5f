"""``momentsearch.Client`` against a running server (uvicorn on loopback, behind an API key): the same
moments as ``momentsearch.load(INDEX).search`` for the same queries, and errors a user can act on."""

from __future__ import annotations

import socket
import threading
import time

import pytest

pytest.importorskip("fastapi")

import momentsearch  # noqa: E402
from momentsearch.errors import ConfigError, MomentSearchError, QueryError  # noqa: E402
from served_index import build_served_index  # noqa: E402

KEY = "client-test-key"
QUERIES = ["a white square", "someone waves", "the red door opens"]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory):
    import uvicorn

    from momentsearch.service.app import create_app

    searcher = momentsearch.load(build_served_index(tmp_path_factory.mktemp("client")), device="cpu", first_stage="exact")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = uvicorn.Server(uvicorn.Config(create_app(searcher, api_key=KEY), host="127.0.0.1", port=port,
                                        log_level="warning"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not srv.started and time.time() < deadline:
        time.sleep(0.05)
    yield searcher, f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(10)


def _same(got: list, want: list) -> None:
    assert [h.video_id for h in got] == [h.video_id for h in want]
    for g, w in zip(got, want, strict=True):
        assert abs(g.start - w.start) <= 5e-4 and abs(g.end - w.end) <= 5e-4 and g.score == pytest.approx(w.score)


def test_the_client_returns_the_searchers_moments(live) -> None:
    searcher, url = live
    client = momentsearch.Client(url, api_key=KEY)
    assert type(client.search(QUERIES[0], k=3)[0]) is type(searcher.search(QUERIES[0], k=3)[0])  # the same Hit
    for q in QUERIES:
        _same(client.search(q, k=5), searcher.search(q, k=5))
    _same(client.search(QUERIES[0], k=150), searcher.search(QUERIES[0], k=150))  # paged: 100 + the rest
    _same(client.search(QUERIES[1], k=4, videos=["clip2"]), searcher.search(QUERIES[1], k=4, videos=["clip2"]))
    for got, want in zip(client.search_many(QUERIES, k=4), searcher.search_many(QUERIES, k=4), strict=True):
        _same(got, want)
    from momentsearch.serving.filters import VideoFilter

    for where in (VideoFilter.of(min_duration=5, ingested_after="2020-01-01"), VideoFilter.of(path_prefix="clip2")):
        _same(client.search(QUERIES[0], k=20, where=where), searcher.search(QUERIES[0], k=20, where=where))
        for got, want in zip(client.search_many(QUERIES, k=3, where=where), searcher.search_many(QUERIES, k=3, where=where),
                             strict=True):
            _same(got, want)
    assert client.search(QUERIES[0], videos=["clip0"], where=VideoFilter.of(videos=["clip1"])) == []
    assert client.health()["videos"] == 3


def test_client_errors_say_what_to_do(live, monkeypatch: pytest.MonkeyPatch) -> None:
    _, url = live
    monkeypatch.delenv("MOMENTSEARCH_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="no API key.*pass api_key=, or set MOMENTSEARCH_API_KEY"):
        momentsearch.Client(url).search("x")
    monkeypatch.setenv("MOMENTSEARCH_API_KEY", KEY)
    assert momentsearch.Client(url).search(QUERIES[0], k=1)  # the key from the environment
    with pytest.raises(QueryError, match=r"400: 1 video id\(s\) not in this index: 'nope'"):
        momentsearch.Client(url).search("x", videos=["nope"])
    with pytest.raises(QueryError, match="k must be between 1 and 1000"):
        momentsearch.Client(url).search("x", k=0)
    with pytest.raises(MomentSearchError, match=r"cannot reach http://127.0.0.1:1 .*momentsearch serve"):
        momentsearch.Client("http://127.0.0.1:1").search("x")
    with pytest.raises(ConfigError, match="must start with http"):
        momentsearch.Client("localhost:8000")
