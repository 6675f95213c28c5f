"""/v1: paging, the score threshold, group-by-video, the video filter and the batch endpoint, each against
the Python searcher's own ranking of the same query."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

import momentsearch  # noqa: E402
from momentsearch.errors import QueryError  # noqa: E402
from momentsearch.service.app import create_app  # noqa: E402
from momentsearch.serving.plan import SearchPlan  # noqa: E402
from momentsearch.serving.searcher import Hit  # noqa: E402
from served_index import build_served_index  # noqa: E402

Q = "a white square"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    searcher = momentsearch.load(build_served_index(tmp_path_factory.mktemp("v1")), device="cpu", first_stage="exact")
    with TestClient(create_app(searcher, max_batch=8, max_wait_ms=2, batch_wait="fixed")) as client:
        yield searcher, client


def _spans(moments: list[dict]) -> list[tuple[str, float, float]]:
    return [(m["video_id"], m["start"], m["end"]) for m in moments]


def _want(hits: list[Hit]) -> list[tuple[str, float, float]]:
    return [(h.video_id, round(h.start, 3), round(h.end, 3)) for h in hits]


def test_pages_follow_one_ranking(served) -> None:
    searcher, c = served
    full = searcher.search(Q, k=12)
    first = c.post("/v1/search", json={"query": Q, "k": 5}).json()
    second = c.post("/v1/search", json={"query": Q, "k": 5, "offset": first["next_offset"]}).json()
    assert first["next_offset"] == 5 and _spans(first["moments"]) == _want(full[:5])
    assert _spans(second["moments"]) == _want(full[5:10]) and [m["rank"] for m in second["moments"]] == list(range(6, 11))
    assert _spans(c.post("/search", json={"query": Q, "k": 5}).json()["moments"]) == _spans(first["moments"])
    last = c.post("/v1/search", json={"query": Q, "k": 100, "offset": 0}).json()
    assert last["next_offset"] is None and len(last["moments"]) == len(searcher.search(Q, k=1000))


def test_threshold_grouping_and_filter(served) -> None:
    searcher, c = served
    full = searcher.search(Q, k=1000)
    cut = full[len(full) // 3].score
    r = c.post("/v1/search", json={"query": Q, "k": 100, "min_score": cut}).json()
    assert r["moments"] and all(m["score"] >= cut for m in r["moments"])
    assert len(r["moments"]) == sum(h.score >= cut for h in full)
    g = c.post("/v1/search", json={"query": Q, "k": 3, "group_by_video": True}).json()
    ids = [m["video_id"] for m in g["moments"]]
    assert len(ids) == len(set(ids)) == 3  # the served index holds 3 videos
    best = {}
    for h in full:
        best.setdefault(h.video_id, h)
    assert _spans(g["moments"]) == _want([best[v] for v in ids]) and g["next_offset"] is None
    only = c.post("/v1/search", json={"query": Q, "k": 10, "videos": ["clip1"]}).json()
    assert {m["video_id"] for m in only["moments"]} == {"clip1"}
    bad = c.post("/v1/search", json={"query": Q, "videos": ["nope"]})
    assert bad.status_code == 400 and "not in this index" in bad.json()["error"]


def test_batch_answers_each_query_as_alone(served) -> None:
    _, c = served
    queries = [Q, "someone waves", "the red door opens"]
    batch = c.post("/v1/search/batch", json={"queries": queries, "k": 4, "offset": 2, "group_by_video": False}).json()
    assert [r["query"] for r in batch["results"]] == queries
    for q, r in zip(queries, batch["results"], strict=True):
        alone = c.post("/v1/search", json={"query": q, "k": 4, "offset": 2}).json()
        assert _spans(r["moments"]) == _spans(alone["moments"]) and r["next_offset"] == alone["next_offset"]


@pytest.mark.parametrize("body,where", [
    ({"query": Q, "offset": 901}, "offset"), ({"query": Q, "offset": "1"}, "offset"),
    ({"query": Q, "group_by_video": "yes"}, "group_by_video"), ({"query": Q, "min_score": "0.5"}, "min_score"),
    ({"queries": []}, "queries"), ({"queries": [" "]}, "queries"), ({"queries": ["a"] * 65}, "queries"),
    ({"query": Q, "limit": 3}, "limit")])
def test_bad_v1_requests_are_4xx(served, body: dict, where: str) -> None:
    c = served[1]
    url = "/v1/search/batch" if "queries" in body else "/v1/search"
    r = c.post(url, json=body)
    assert r.status_code == 422 and r.json()["error"].startswith(where), r.text


def test_a_plan_pages_by_hand() -> None:
    hits = [Hit("a", 0, 1, 0.9), Hit("a", 2, 3, 0.8), Hit("b", 0, 1, 0.7), Hit("c", 0, 1, 0.4), Hit("b", 4, 5, 0.3)]
    assert SearchPlan.of(2, paged=True).page(hits) == (hits[:2], 2)
    assert SearchPlan.of(2, 2, paged=True).page(hits) == (hits[2:4], 4)
    assert SearchPlan.of(2, 4, paged=True).page(hits) == (hits[4:], None)
    assert SearchPlan.of(5, 0, 0.5).page(hits) == (hits[:3], None)
    assert SearchPlan.of(2, per_video=1).page(hits) == ([hits[0], hits[2]], 2)
    assert SearchPlan.of(2, 2, per_video=1).page(hits) == ([hits[3]], None)
    assert SearchPlan.of(2, time_from=1.5, time_to=4.5).page(hits) == ([hits[1], hits[4]], None)
    # what the engine ranks: the page (and one more when paged: is there a next page?), all 1,000 when arranged
    assert (SearchPlan.of(2).fetch, SearchPlan.of(2, paged=True).fetch, SearchPlan.of(10, 30, paged=True).fetch,
            SearchPlan.of(2, per_video=1).fetch) == (2, 3, 41, 1000)
    assert SearchPlan.of(1000, paged=True).fetch == 1000
    assert SearchPlan.of(5, 0, 10**400).page(hits) == ([], None)  # a threshold no score reaches (no float holds it)
    assert SearchPlan.of(5, 0, -10**400).page(hits) == (hits, None)
    for bad, says in (({"k": 0}, "k must be between 1 and 1000"), ({"k": 10, "offset": 991}, "offset must be"),
                      ({"k": 2, "time_from": 3, "time_to": 1}, r"time_to \(1\) must be after"),
                      ({"k": 2, "per_video": 0}, "per_video must be"), ({"k": 2, "min_score": float("nan")}, "min_score"),
                      ({"k": 2, "min_score": True}, "min_score must be a number")):
        with pytest.raises(QueryError, match=says):
            SearchPlan.of(**bad)


def _samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_metrics_count_what_happened(tmp_path) -> None:
    """/metrics in Prometheus text: requests by route template and status (the guard's 401 too), latency and
    batch histograms whose counts match, cumulative buckets, the index's size."""
    searcher = momentsearch.load(build_served_index(tmp_path), device="cpu", first_stage="exact")
    key = {"X-API-Key": "metrics-key-1"}
    with TestClient(create_app(searcher, api_key="metrics-key-1")) as c:
        for _ in range(3):
            assert c.post("/search", json={"query": Q, "k": 2}, headers=key).status_code == 200
        c.post("/v1/search/batch", json={"queries": [Q, "someone waves"], "k": 2}, headers=key)
        c.get("/videos/clip1", headers=key)
        c.get("/health")  # no key: 401
        c.get("/nothing", headers=key)
        r = c.get("/metrics", headers=key)
        batches = c.get("/health", headers=key).json()["batching"]["batches"]
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    s = _samples(r.text)
    assert s['momentsearch_requests_total{method="POST",route="/search",status="200"}'] == 3
    assert s['momentsearch_requests_total{method="POST",route="/v1/search/batch",status="200"}'] == 1
    assert s['momentsearch_requests_total{method="GET",route="/videos/{video_id:path}",status="200"}'] == 1
    assert s['momentsearch_requests_total{method="GET",route="unmatched",status="401"}'] == 1
    assert s['momentsearch_requests_total{method="GET",route="unmatched",status="404"}'] == 1
    assert s['momentsearch_request_seconds_count{route="/search"}'] == 3
    assert s['momentsearch_request_seconds_bucket{route="/search",le="+Inf"}'] == 3
    buckets = [v for k, v in s.items() if k.startswith('momentsearch_request_seconds_bucket{route="/search"')]
    assert buckets == sorted(buckets)  # cumulative
    assert s["momentsearch_batch_size_count"] == batches == s["momentsearch_search_seconds_count"]
    assert s["momentsearch_batch_size_sum"] == 5  # 3 single queries + 2 of the batch endpoint
    assert s["momentsearch_videos"] == 3 and s["momentsearch_clips"] == int(searcher.index.offsets[-1])


def test_a_search_past_its_timeout_is_a_504_and_the_parts_are_timed(tmp_path, monkeypatch, caplog) -> None:
    """timeout_ms: a 504 that says what to do, counted in /metrics; /metrics times each part of a search; the
    access log is one JSON object per request, without the query."""
    import json
    import logging
    import time as tm

    searcher = momentsearch.load(build_served_index(tmp_path), device="cpu", first_stage="exact")
    real = searcher.run

    def slow(texts, *a, **kw):
        if "slowly" in texts[0]:
            tm.sleep(0.6)
        return real(texts, *a, **kw)

    monkeypatch.setattr(searcher, "run", slow)
    caplog.set_level(logging.INFO, logger="momentsearch.access")
    with TestClient(create_app(searcher, max_batch=1, max_wait_ms=0, timeout_ms=5000)) as c:
        r = c.post("/v1/search", json={"query": "search slowly", "timeout_ms": 100})
        assert r.status_code == 504 and "longer than its timeout of 100 ms" in r.json()["error"]
        ok = c.post("/v1/search", json={"query": "search slowly"})  # the server's 5 s
        assert ok.status_code == 200
        timing = dict(x.split(";", 1) for x in ok.headers["server-timing"].split(", "))
        ms = {k: float(v.removeprefix("dur=")) for k, v in timing.items() if v.startswith("dur=")}
        assert set(ms) == {"batch_wait", "encode", "first_stage", "localize", "nms", "rank", "app"}
        assert ms["app"] >= 600 and ms["app"] >= sum(v for k, v in ms.items() if k != "app") and timing["batch"] == 'desc="1"'

        assert c.post("/v1/search", json={"query": Q, "timeout_ms": 0}).status_code == 422
        s = _samples(c.get("/metrics").text)
    assert s["momentsearch_timeouts_total"] == 1
    n = s["momentsearch_search_seconds_count"]
    for name in ("encode", "first_stage", "localize", "nms", "rank"):
        assert s[f'momentsearch_search_part_seconds_count{{part="{name}"}}'] == n >= 2, name
        assert 0 < s[f'momentsearch_search_part_seconds_sum{{part="{name}"}}'] < s["momentsearch_search_seconds_sum"]
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "momentsearch.access"]
    assert [(x["method"], x["route"], x["status"]) for x in lines] == [
        ("POST", "/v1/search", 504), ("POST", "/v1/search", 200), ("POST", "/v1/search", 422), ("GET", "/metrics", 200)]
    assert lines[0]["ms"] >= 100 and "slowly" not in caplog.text


def test_while_the_index_loads_every_route_says_not_ready(served) -> None:
    """serve's app while loading: /livez 200, everything else 503 "not ready" (never a 500), then the real
    app with /readyz 200; a load that fails says why on /readyz and hands the error on."""
    import threading as th

    from momentsearch.service.loading import LoadingApp

    searcher, _ = served
    gate = th.Event()

    def slow_load():
        gate.wait(20)
        return create_app(searcher)

    app = LoadingApp(slow_load)
    with TestClient(app) as c:
        assert c.get("/livez").json() == {"status": "alive"}
        for method, url in (("get", "/readyz"), ("post", "/search"), ("get", "/health"), ("get", "/")):
            r = c.request(method, url, json={"query": Q} if method == "post" else None)
            assert r.status_code == 503 and r.json()["error"].startswith("not ready: loading the index (")
            assert r.headers["retry-after"] == "5"
        gate.set()
        assert app.wait(20) and app.error is None
        assert c.get("/readyz").json() == {"status": "ready"}
        assert c.post("/search", json={"query": Q, "k": 2}).status_code == 200
    stopped = []
    failing = LoadingApp(lambda: (_ for _ in ()).throw(ValueError("no such index")), on_error=stopped.append)
    with TestClient(failing) as c:
        failing.wait(10)
        r = c.get("/readyz")
        assert r.status_code == 503 and "loading the index failed (no such index)" in r.json()["error"]
    assert isinstance(stopped[0], ValueError)


def test_a_loaded_index_is_kept_out_of_the_collector_and_a_swapped_out_one_is_freed() -> None:
    """settle_heap freezes what is alive (the served index: no full collection walks it again); after a swap the old
    app's batcher is closed and the old app freed, even held only by a reference cycle that a freeze would keep."""
    import gc
    import time
    import types
    import weakref

    from momentsearch.service.loading import LoadingApp, settle_heap

    class Batcher:
        closed = False

        def close(self) -> None:
            self.closed = True

    class App:  # what replace reads of an app: state.batcher (and state.searcher)
        def __init__(self) -> None:
            self.state = types.SimpleNamespace(batcher=Batcher())

    old = App()
    old.cycle = old  # only the cyclic collector can free it
    loading = LoadingApp(lambda: None)
    loading.app = old
    try:
        settle_heap()
        assert gc.get_freeze_count() > 0
        gone, batcher = weakref.ref(old), old.state.batcher
        del old
        gc.collect()
        assert gone() is not None  # frozen: a collection does not free it
        loading.replace(App(), grace=0.01)
        deadline = time.monotonic() + 10
        while gone() is not None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert batcher.closed and gone() is None
    finally:
        gc.unfreeze()  # the rest of the test run collects as usual


def test_routes_read_their_services_through_typed_dependencies(served) -> None:
    """A route reaches the searcher, batcher, media and settings only through ``deps.get_services``: a test can put
    other services in (here: a server timeout of 1 ms, so the same search becomes a 504 naming it)."""
    from dataclasses import replace

    from momentsearch.service.deps import get_services

    _, client = served
    app = client.app
    ok = client.post("/v1/search", json={"query": Q})
    assert ok.status_code == 200
    app.dependency_overrides[get_services] = lambda: replace(
        app.state.services, settings=app.state.services.settings.with_(timeout_ms=1))
    try:
        r = client.post("/v1/search", json={"query": Q})
        assert r.status_code == 504 and "timeout of 1 ms" in r.json()["error"], r.text
    finally:
        app.dependency_overrides.clear()
    assert client.post("/v1/search", json={"query": Q}).json()["moments"] == ok.json()["moments"]


def test_service_settings_refuse_what_cannot_run() -> None:
    from momentsearch.errors import ConfigError
    from momentsearch.service.errors import status_of
    from momentsearch.service.settings import ServiceSettings

    for bad, says in (({"port": 0}, "port must be from 1 to 65535, got 0"), ({"max_batch": 0}, "max_batch must be >= 1"),
                      ({"timeout_ms": 0}, "timeout_ms must be > 0")):
        with pytest.raises(ConfigError, match=says):
            ServiceSettings(**bad)
    with pytest.raises(ConfigError, match=r"unknown service setting\(s\) \['max_batches'\]"):
        ServiceSettings().with_(max_batches=3)
    assert ServiceSettings(cors_origins=["http://a"]).cors_origins == ("http://a",)
    from momentsearch.errors import SearchIndexError, VideoDecodeError

    assert (status_of(QueryError("x")), status_of(VideoDecodeError("x")), status_of(SearchIndexError("x"))) == (400, 422, 400)
