"""Keeping an index current (issue 40): the watcher ingests and indexes files as they appear, change and go,
only once a change has settled; ``serve --watch`` swaps to each rebuilt index under load with no failed request."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import momentsearch
from momentsearch.errors import ConfigError
from momentsearch.serving.packing import pack
from momentsearch.serving.watch import Watcher
from video_files import write_video

httpx = pytest.importorskip("httpx")


def _clip(folder: Path, name: str, said: str, seconds: float = 4.0) -> None:
    """A video and its SRT, written beside and renamed in (as a copy finishing would land)."""
    write_video(folder / f".{name}.mp4", seconds=seconds)
    (folder / f".{name}.srt").write_text(f"1\n00:00:01,000 --> 00:00:03,000\n{said}\n")
    os.replace(folder / f".{name}.srt", folder / f"{name}.srt")
    os.replace(folder / f".{name}.mp4", folder / f"{name}.mp4")


@pytest.fixture()
def said_model(tmp_path_factory) -> Path:
    return pack("clip", tmp_path_factory.mktemp("m") / "said.pt", speech=True)


def test_the_watcher_follows_a_folder(tmp_path: Path, said_model: Path) -> None:
    videos = tmp_path / "videos"
    videos.mkdir()
    _clip(videos, "a", "the cat sleeps on the sofa")
    with pytest.raises(ConfigError, match="no index there yet; give --model"):
        Watcher(videos, tmp_path / "corpus", tmp_path / "index")
    w = Watcher(videos, tmp_path / "corpus", tmp_path / "index", said_model, interval=0.0, settle=1.0)
    assert w.step(now=100.0) is None  # just seen: not settled
    first = w.step(now=101.5)
    assert first is not None and first.ingest.encoded == ["a"] and first.index.encoded == ["a"]
    assert w.step(now=102.0) is None  # nothing changed
    _clip(videos, "b", "the kettle is boiling over")
    assert w.step(now=103.0) is None and w.step(now=103.5) is None  # settling
    got = w.step(now=104.1)
    assert got.ingest.encoded == ["b"] and got.index.encoded == ["b"] and got.index.kept == ["a"]
    assert momentsearch.load(tmp_path / "index").search("kettle boiling", k=1)[0].video_id == "b"
    (videos / "a.mp4").unlink()
    w.step(now=105.0)
    gone = w.step(now=106.5)
    assert gone.ingest.removed == ["a"] and gone.index.removed == ["a"]
    (videos / "b.srt").write_text("1\n00:00:01,000 --> 00:00:03,000\nthe dog barks at the door\n")
    w.step(now=107.0)
    changed = w.step(now=108.5)
    assert changed.ingest.encoded == ["b"] and changed.index.encoded == ["b"]
    s = momentsearch.load(tmp_path / "index")
    assert s.video_ids == ["b"] and s.stale is None
    assert s.search("a barking dog", k=1)[0].score > s.search("kettle boiling", k=1)[0].score


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_serve_watch_swaps_under_load_with_no_failed_request(tmp_path: Path, said_model: Path) -> None:
    """4 clients search without pause while a new video lands in the watched folder: it becomes searchable in the
    running service (time from landing measured), and every request of the run answers 200."""
    videos = tmp_path / "videos"
    videos.mkdir()
    _clip(videos, "first", "the cat sleeps on the sofa")
    w = Watcher(videos, tmp_path / "corpus", tmp_path / "index", said_model, settle=0.0)
    w.step()
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "serve.log").open("w")
    proc = subprocess.Popen([sys.executable, "-c", "from momentsearch.cli.main import main; main()", "serve",
                             str(tmp_path / "index"), "--port", str(port), "--device", "cpu", "--first-stage",
                             "exact", "--watch", str(videos), "--watch-interval", "0.25", "--no-access-log"],
                            stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    codes: dict[int, int] = {}
    stop = threading.Event()
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                if httpx.get(base + "/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        else:
            raise AssertionError("not ready: " + (tmp_path / "serve.log").read_text()[-2000:])

        def hammer() -> None:
            with httpx.Client(timeout=30) as c:
                while not stop.is_set():
                    r = c.post(base + "/v1/search", json={"query": "a sleeping cat", "k": 3})
                    codes[r.status_code] = codes.get(r.status_code, 0) + 1

        clients = [threading.Thread(target=hammer) for _ in range(4)]
        for t in clients:
            t.start()
        time.sleep(1.0)
        landed = time.time()
        _clip(videos, "second", "the kettle is boiling over")
        found = None
        while time.time() < landed + 90 and found is None:
            r = httpx.post(base + "/v1/search", json={"query": "kettle boiling", "k": 1}, timeout=30)
            codes[r.status_code] = codes.get(r.status_code, 0) + 1
            if r.status_code == 200 and r.json()["moments"] and r.json()["moments"][0]["video_id"] == "second":
                found = time.time() - landed
            time.sleep(0.05)
        time.sleep(1.0)  # load on after the swap, while the old app drains
        stop.set()
        for t in clients:
            t.join()
        out = (tmp_path / "serve.log").read_text()
        assert found is not None, out[-3000:]
        assert set(codes) == {200}, (codes, out[-3000:])
        assert "swapped to the rebuilt index" in out and sum(codes.values()) > 20
        health = httpx.get(base + "/health", timeout=5).json()
        assert health["videos"] == 2 and health["behind_corpus"] is None
        print(f"landing -> searchable: {found:.1f} s; {sum(codes.values())} requests, all 200")
    finally:
        stop.set()
        proc.terminate()
        proc.wait(30)
        log.close()
        shutil.rmtree(tmp_path / "index", ignore_errors=True)


def test_a_rebuilt_index_that_cannot_load_leaves_the_old_one_serving(tmp_path: Path) -> None:
    from momentsearch.service.loading import IndexReloader, LoadingApp

    (tmp_path / "index.json").write_text("{}")
    closed = threading.Event()

    class Old:
        class state:  # noqa: N801 - what a FastAPI app's state looks like to replace()
            class batcher:  # noqa: N801
                close = staticmethod(closed.set)

    loading = LoadingApp(lambda: None)
    loading.app = Old
    said: list[str] = []
    attempts = iter([RuntimeError("disk full"), "new app"])

    def load():
        got = next(attempts)
        if isinstance(got, Exception):
            raise got
        return got

    r = IndexReloader(loading, tmp_path, load, grace=0.05, log=said.append)
    assert r.check() is False  # nothing changed yet
    os.replace(tmp_path / "index.json", tmp_path / "old.json")
    (tmp_path / "index.json").write_text("{}")  # a new file: a rebuilt folder
    assert r.check() is False and loading.app is Old and "could not be loaded (RuntimeError: disk full)" in said[0]
    os.replace(tmp_path / "old.json", tmp_path / "index.json")
    assert r.check() is True and loading.app == "new app" and r.swaps == 1
    assert closed.wait(2.0)  # the old app's batcher, after its grace
