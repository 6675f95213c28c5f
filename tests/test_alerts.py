"""Saved searches and alerts: the store and the log by hand, a new matching video under watch raising one alert
(and never twice), a webhook on loopback that fails, hangs, then takes it, and the same over /v1/alerts and the
CLI."""

from __future__ import annotations

import json
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from example_index import build_example_index, write_scenes
from momentsearch.errors import QueryError
from momentsearch.serving.alerts import AlertBook, AlertError, SavedSearch, WebhookSender, alerts_folder

pytestmark = pytest.mark.slow


def test_the_store_and_the_log_by_hand(tmp_path: Path) -> None:
    index = tmp_path / "index"
    book = AlertBook(index)
    assert book.root == tmp_path / "index.alerts" == alerts_folder(index) and book.searches() == []
    s = book.add("a dog on the sofa", 0.6, k=5, webhook="http://127.0.0.1:9/hook")
    t = book.add("a cat", 0.7)
    assert [x.query for x in AlertBook(index).searches()] == ["a dog on the sofa", "a cat"]  # read back from disk
    book.remove(s.id)
    assert [x.id for x in book.searches()] == [t.id]
    with pytest.raises(QueryError, match="no saved search"):
        book.remove("nope")
    for bad, why in [({"query": "", "min_score": 1}, "query"), ({"query": "x", "min_score": "1"}, "min_score"),
                     ({"query": "x", "min_score": 1, "k": 0}, "k must"), ({"query": "x", "min_score": 1, "webhook":
                                                                            "file:///etc/passwd"}, "http"),
                     ({"query": "x", "min_score": 1, "colour": 1}, "unknown"), ([], "object"),
                     # the fuzz run's finds: a lone surrogate, a bracketed host that is no address
                     ({"query": "a \ud800 b", "min_score": 1}, "UTF-8"), ({"query": "x", "min_score": 1, "webhook":
                                                                          "http://[x]/"}, "http")]:
        with pytest.raises(AlertError, match=why):
            SavedSearch.of(bad)
    book.searches_file.write_text('{"format": "momentsearch-alerts", "version": 1, "searches": [{"query": 3}]}')
    with pytest.raises(AlertError, match="searches.json: searches\\[0\\]: query"):
        book.searches()
    before = book.searches_file.read_bytes()
    with pytest.raises(AlertError):
        book.add("x", 1.0)  # a damaged store is never overwritten
    assert book.searches_file.read_bytes() == before
    book.log_file.write_text('{"id": "a", "search_id": "s", "query": "q", "video_id": "v", "start": 1, "end": 2, '
                             '"score": 0.9, "at": "t"}\nnot json\n{"id": 5}\n{"id": "\\ud800"}\n'
                             '{"id": "b", "search_id": "s", "query": "q", "video_id": "v", "start": 1' + "0" * 400 +
                             ', "end": 2, "score": 0.9, "at": "t"}\n')
    with pytest.warns(UserWarning, match="damaged"):
        assert [a.id for a in book.alerts()] == ["a"]  # (a 401-digit start: no float; a surrogate: not text)


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_example_index(tmp_path_factory.mktemp("alerts"))


class Hook(BaseHTTPRequestHandler):
    """Fails the first ``fail`` posts with a 500, hangs the next ``hang`` for 3 s, then takes them (records)."""

    fail, hang, got = 0, 0, []  # set per test

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        cls = type(self)
        if cls.fail > 0:
            cls.fail -= 1
            self.send_response(500)
        elif cls.hang > 0:
            cls.hang -= 1
            time.sleep(3)
            self.send_response(200)
        else:
            cls.got.append(json.loads(body))
            self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_a_new_matching_video_under_watch_raises_one_alert_posted_once(example: Path, tmp_path: Path) -> None:
    from momentsearch.serving.watch import Watcher

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Hook.fail, Hook.hang, Hook.got = 2, 1, []
    url = f"http://127.0.0.1:{server.server_address[1]}/hook"
    book = AlertBook(example)
    saved = book.add("the blue wall is painted", 0.6, webhook=url)
    book.add("a dog barks at the moon", 0.95)  # said nowhere: never raised
    videos = example.parent / "videos"
    w = Watcher(videos, example.parent / "corpus", example, interval=0.1, settle=0.0)
    first = w.step()  # the folder as indexed: nothing new, no alert
    assert first is not None and first.alerts == [] and not first.ingest.encoded
    write_scenes(videos / "porch.mp4", ["grey", "blue"])
    (videos / "porch.srt").write_text("1\n00:00:04,000 --> 00:00:05,500\nthe blue wall is painted again\n\n")
    t0 = time.time()
    done = w.step()
    assert done is not None and done.ingest.encoded == ["porch"] and done.alert_error is None
    assert [(a.search_id, a.video_id) for a in done.alerts] == [(saved.id, "porch")]
    a = done.alerts[0]
    assert a.start <= 4.0 and a.end >= 5.5 and a.score >= 0.6  # the moment holds the line said (4-5.5 s)
    assert time.time() - t0 < 60
    sender = WebhookSender(book, timeout=1.0, max_backoff=0.5)  # 500, 500, a hang past the timeout, then 204
    deadline = time.time() + 30
    while not Hook.got and time.time() < deadline:
        time.sleep(0.1)
    sender.close()
    assert [g["alert"]["video_id"] for g in Hook.got] == ["porch"] and sender.stats["failed"] == 3
    assert book.sent() == {done.alerts[0].id}
    # a restart: the log and what was sent are read back; nothing is raised or sent twice
    (videos / "porch.srt").write_text("1\n00:00:04,000 --> 00:00:05,500\nthe blue wall is painted again\n\n")
    again = Watcher(videos, example.parent / "corpus", example, interval=0.1, settle=0.0).step()
    assert again is not None and again.alerts == []
    sender = WebhookSender(book, timeout=1.0)
    time.sleep(0.5)
    sender.close()
    assert len(Hook.got) == 1 and len(book.alerts()) == 1
    server.shutdown()


def test_saved_searches_over_the_service_and_the_cli(example: Path, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient
    from typer.testing import CliRunner

    import momentsearch
    from momentsearch.cli.main import app
    from momentsearch.service import create_app

    copy = tmp_path / "index"
    shutil.copytree(example, copy)
    with TestClient(create_app(momentsearch.load(copy, device="cpu"))) as c:
        r = c.post("/v1/alerts", json={"query": "a red ball", "min_score": 0.7})
        assert r.status_code == 201, r.text
        sid = r.json()["id"]
        got = c.get("/v1/alerts").json()
        assert [s["query"] for s in got["searches"]] == ["a red ball"] and got["alerts"] == []
        for body, why in [({"query": "x"}, "min_score"), ({"query": "x", "min_score": 1, "webhook": "ftp://x"}, "http"),
                          ({"query": " ", "min_score": 1}, "empty")]:
            r = c.post("/v1/alerts", json=body)
            assert r.status_code in (400, 422) and why in r.json()["error"], r.text
        assert c.delete("/v1/alerts/nope").status_code == 400
        assert c.delete(f"/v1/alerts/{sid}").status_code == 200 and c.get("/v1/alerts").json()["searches"] == []
    run = CliRunner().invoke
    r = run(app, ["alerts", "add", str(copy), "someone waves", "--min-score", "0.5", "--webhook", "http://127.0.0.1:9/x"])
    assert r.exit_code == 0 and "saved" in r.output, r.output
    r = run(app, ["alerts", "list", str(copy)])
    assert "'someone waves'  min_score 0.5" in r.output and "-> http://127.0.0.1:9/x" in r.output
    r = run(app, ["alerts", "add", str(tmp_path / "nowhere"), "x", "--min-score", "1"])
    assert r.exit_code != 0 and "not an index folder" in str(r.exception)
