"""The service's guard: an API key on every route but /livez (no key, a wrong key, a right one in each form),
a body limit, CORS off by default, strict types, no server path in any answer, and no open network
without a key."""

from __future__ import annotations

import base64
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

import momentsearch  # noqa: E402
from momentsearch.errors import ConfigError  # noqa: E402
from momentsearch.service.app import create_app  # noqa: E402
from momentsearch.service.security import api_key_from, check_bind  # noqa: E402
from served_index import build_served_index  # noqa: E402

KEY = "s3cret-key-for-tests"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    index = build_served_index(tmp_path_factory.mktemp("guarded"))
    searcher = momentsearch.load(index, device="cpu", first_stage="exact")
    return index, searcher


def _client(searcher, **kwargs) -> TestClient:
    return TestClient(create_app(searcher, max_batch=4, max_wait_ms=1, **kwargs))


def test_every_route_but_livez_needs_the_key(served) -> None:
    _, searcher = served
    with _client(searcher, api_key=KEY) as c:
        body = {"query": "a white square", "k": 3}
        for method, url in (("post", "/search"), ("get", "/health"), ("get", "/videos/clip0"),
                            ("get", "/thumbnails/clip0?t=1"), ("get", "/"), ("get", "/openapi.json"),
                            ("get", "/nothing-here")):
            r = c.request(method, url, json=body if method == "post" else None)
            assert r.status_code == 401, (url, r.status_code)
            assert r.json()["error"].startswith("no API key") and r.headers["www-authenticate"].startswith("Basic")
        wrong = c.post("/search", json=body, headers={"X-API-Key": KEY + "x"})
        assert wrong.status_code == 401 and wrong.json()["error"].startswith("a wrong API key")
        assert c.post("/search", json=body, headers={"Authorization": "Bearer nope-nope"}).status_code == 401
        assert c.get("/livez").json() == {"status": "alive"}  # liveness stays open
        basic = base64.b64encode(f"anyone:{KEY}".encode()).decode()
        for headers in ({"X-API-Key": KEY}, {"Authorization": f"Bearer {KEY}"}, {"Authorization": f"Basic {basic}"}):
            r = c.post("/search", json=body, headers=headers)
            assert r.status_code == 200 and len(r.json()["moments"]) == 3, headers
            assert c.get("/videos/clip0", headers={**headers, "Range": "bytes=0-9"}).status_code == 206
            assert c.get("/thumbnails/clip0?t=1", headers=headers).headers["content-type"] == "image/jpeg"
    with _client(searcher) as open_client:  # no key set: open, as on loopback
        assert open_client.post("/search", json={"query": "a white square", "k": 2}).status_code == 200


def test_a_body_over_the_limit_is_a_413_with_or_without_its_length(served) -> None:
    _, searcher = served
    with _client(searcher, max_body_bytes=2000) as c:
        big = {"query": "a white square", "k": 3, "videos": ["clip0"] * 400}  # ~4 KB
        r = c.post("/search", json=big)
        assert r.status_code == 413 and r.json()["error"] == "the request body is over 2,000 bytes"

        def chunks():  # no content-length: the guard counts what arrives
            yield b'{"query": "a white square", "videos": ['
            for _ in range(300):
                yield b'"clip0", '
            yield b'"clip1"]}'

        r = c.post("/search", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413
        ok = c.post("/search", json={"query": "a white square", "k": 2, "videos": ["clip0", "clip1"]})
        assert ok.status_code == 200 and {m["video_id"] for m in ok.json()["moments"]} <= {"clip0", "clip1"}


def test_cors_is_off_unless_origins_are_given(served) -> None:
    _, searcher = served
    origin = {"Origin": "http://elsewhere.example"}
    with _client(searcher) as c:
        r = c.post("/search", json={"query": "a white square", "k": 1}, headers=origin)
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers
        pre = c.options("/search", headers={**origin, "Access-Control-Request-Method": "POST"})
        assert "access-control-allow-origin" not in pre.headers
    with _client(searcher, cors_origins=["http://elsewhere.example"], api_key=KEY) as c:
        pre = c.options("/search", headers={**origin, "Access-Control-Request-Method": "POST",
                                            "Access-Control-Request-Headers": "x-api-key,content-type"})
        assert pre.status_code == 200 and pre.headers["access-control-allow-origin"] == "http://elsewhere.example"
        r = c.post("/search", json={"query": "a white square", "k": 1}, headers={**origin, "X-API-Key": KEY})
        assert r.headers["access-control-allow-origin"] == "http://elsewhere.example"
        other = c.post("/search", json={"query": "a white square", "k": 1},
                       headers={"Origin": "http://evil.example", "X-API-Key": KEY})
        assert "access-control-allow-origin" not in other.headers


def test_types_are_strict_and_no_answer_names_a_server_path(served) -> None:
    index, searcher = served
    with _client(searcher) as c:
        for field, value, where in (("k", "5", "k"), ("k", True, "k"), ("k", 5.0, "k"), ("query", 5, "query"),
                                    ("videos", [1], "videos.0")):
            body = {"query": "a white square", "k": 3, field: value}
            r = c.post("/search", json=body)
            assert r.status_code == 422 and r.json()["error"].startswith(f"{where}: "), (field, value, r.text)
        health = c.get("/health")
        assert health.json()["corpus"] == "corpus" and str(index.parent) not in health.text
        assert str(index.parent) not in c.get("/thumbnails/clip0?t=99999").text


def test_no_open_network_without_a_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for host in ("127.0.0.1", "localhost", "::1", "[::1]"):
        check_bind(host, None, False)  # loopback: fine
    check_bind("0.0.0.0", KEY, False)
    check_bind("0.0.0.0", None, True)  # said in so many words
    for host in ("0.0.0.0", "192.168.1.5", "myserver.local"):
        with pytest.raises(ConfigError, match="without an API key: set --api-key .* --allow-unauthenticated"):
            check_bind(host, None, False)
    monkeypatch.setenv("MOMENTSEARCH_API_KEY", KEY)
    assert api_key_from(None) == KEY and api_key_from("another-key-1") == "another-key-1"
    with pytest.raises(ConfigError, match="at least 8 characters"):
        api_key_from("short")
    monkeypatch.delenv("MOMENTSEARCH_API_KEY")
    assert api_key_from(None) is None
    # the command refuses before it loads anything (any index folder will do: it is never opened)
    index = build_served_index(tmp_path)
    r = subprocess.run([sys.executable, "-m", "momentsearch", "serve", str(index), "--host", "0.0.0.0"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "serves every video to the network without an API key" in r.stderr
