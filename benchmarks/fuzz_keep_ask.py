"""The fuzz run's readers of issue 73: an uploaded picture, a moment reference, the saved-search store and the
alerts log, each through what a user runs on it, over a clip index of three ingested videos
(``tests/example_index.py``: a tiny random CLIP in Hugging Face's layout).

* ``uploaded-image``: a PNG or a JPEG of a scene, damaged (the byte mutations of every reader, and the sizes in
  its header made huge, zero or negative), sent as ``POST /v1/search {"image": base64}`` to the service;
* ``moment-ref``: a ``/v1/search`` body asking ``like`` a moment (and with words), mutated as text, to the service;
* ``saved-searches``: ``INDEX.alerts/searches.json``, mutated as text; then what ``alerts list``, ``alerts add``,
  a watch round (``AlertBook.check`` over two videos) and ``GET /v1/alerts`` do with it;
* ``alerts-log``: ``INDEX.alerts/log.jsonl`` and its ``sent.jsonl``, mutated as text; then ``alerts log``, what
  the webhook sender would post, a watch round and ``GET /v1/alerts?since=1``.

The service's answer counts as the project's error when it is a 4xx with ``{"error": ...}``; a 5xx, or a 4xx
without that body, is a foreign exception.
"""

from __future__ import annotations

import base64
import io
import json
import random
import struct
from pathlib import Path
from typing import Any

_STATE: dict[str, Any] = {}


class BadResponse(Exception):
    """A service answer that is not the project's error: a 5xx, or a 4xx without its JSON body."""


def keep_fixture(root: Path) -> None:
    from PIL import Image

    from example_index import build_example_index, scene
    from momentsearch.serving.alerts import AlertBook

    index = build_example_index(root)
    for fmt in ("png", "jpeg"):
        buf = io.BytesIO()
        Image.fromarray(scene("checker", 96, 128)).save(buf, format=fmt.upper())
        (root / f"picture.{fmt}").write_bytes(buf.getvalue())
    (root / "upload.bin").write_bytes((root / "picture.png").read_bytes())
    (root / "like_body.json").write_text(json.dumps({"query": "the blue wall", "like": {"video_id": "kitchen",
                                                     "start": 3.0, "end": 6.0}, "k": 3, "group_by_video": True}))
    book = AlertBook(index)
    book.add("the blue wall is painted", 0.6, k=5, webhook="http://127.0.0.1:9/hook")
    book.add("a red room", 0.7, path_prefix="kit")
    a = book.check(_searcher(index), ["kitchen", "garden"])
    book.mark_sent([x.id for x in a[:1]])
    book.log_file.write_bytes(book.log_file.read_bytes() + json.dumps(
        {"id": "x1", "search_id": "s", "query": "q", "video_id": "garden", "start": 0.0, "end": 3.0, "score": 0.7,
         "at": "2026-12-02T00:00:00Z", "webhook": None}).encode() + b"\n")


def _searcher(index: Path) -> Any:
    if "searcher" not in _STATE:
        import momentsearch

        _STATE["searcher"] = momentsearch.load(index, device="cpu")
    return _STATE["searcher"]


def _client(work: Path) -> Any:
    if "client" not in _STATE:
        from fastapi.testclient import TestClient

        from momentsearch.service.app import create_app

        _STATE["client"] = TestClient(create_app(_searcher(work / "keep" / "index")))
    return _STATE["client"]


def _answer(r: Any) -> Any:
    body = r.json() if r.headers.get("content-type", "").startswith("application/json") else None
    if r.status_code >= 500 or not isinstance(body, dict) or (r.status_code >= 400 and "error" not in body):
        raise BadResponse(f"HTTP {r.status_code}: {r.text[:200]}")
    if r.status_code >= 400:
        from momentsearch.errors import QueryError

        raise QueryError(f"HTTP {r.status_code}: {body['error']}")
    return body


def _image_mutant(work: Path, rng: random.Random) -> str:
    from benchmarks.fuzz_mutations import mutate

    fmt = rng.choice(["png", "jpeg"])
    data = (work / "keep" / f"picture.{fmt}").read_bytes()
    kind = rng.choice(["bytes", "bytes", "bytes", "size"])
    if kind == "size":  # the header's width and height
        b = bytearray(data)
        big = rng.choice([0, 1, 65535, 40000, 2**31 - 1, 2**32 - 1])
        if fmt == "png":
            b[16:24] = struct.pack(">II", big, rng.choice([big, 1, 48]))
        else:
            i = data.find(b"\xff\xc0")
            if i > 0:
                b[i + 5: i + 9] = struct.pack(">HH", big & 0xFFFF, rng.choice([big & 0xFFFF, 1]))
        data, kind = bytes(b), f"{fmt}_size_{big}"
    else:
        data, kind = mutate(data, rng)
        kind = f"{fmt}_{kind}"
    (work / "keep" / "upload.bin").write_bytes(data)
    return kind


def _image(work: Path) -> None:
    data = (work / "keep" / "upload.bin").read_bytes()
    _answer(_client(work).post("/v1/search", json={"image": base64.b64encode(data).decode(), "k": 3}))


def _like(work: Path) -> None:
    _answer(_client(work).post("/v1/search", content=(work / "keep" / "like_body.json").read_bytes(),
                               headers={"content-type": "application/json"}))


def _book(work: Path) -> Any:
    from momentsearch.serving.alerts import AlertBook

    return AlertBook(work / "keep" / "index")


def _searches(work: Path) -> None:
    from momentsearch.errors import MomentSearchError

    book = _book(work)
    error = None
    try:
        book.searches()
    except MomentSearchError as e:
        error = e
    try:
        book.add("someone waves", 0.5)
    except MomentSearchError as e:
        error = error or e
    try:
        book.check(_searcher(work / "keep" / "index"), ["kitchen", "street"])
    except MomentSearchError as e:
        error = error or e
    _answer(_client(work).get("/v1/alerts"))
    if error is not None:
        raise error


def _log(work: Path) -> None:
    book = _book(work)
    book.alerts()
    book.unsent()  # what the webhook sender would post
    book.check(_searcher(work / "keep" / "index"), ["garden"])
    _answer(_client(work).get("/v1/alerts", params={"since": 1}))


def _log_mutant(work: Path, rng: random.Random) -> str:
    from benchmarks.fuzz_mutations import mutate

    name = rng.choice(["log.jsonl", "log.jsonl", "sent.jsonl"])
    path = work / "keep" / "index.alerts" / name
    data, kind = mutate(path.read_bytes(), rng)
    path.write_bytes(data)
    return f"{name}_{kind}"


def keep_targets(target: Any) -> list[Any]:
    """The four targets, as ``fuzz_targets.Target`` s (passed in: that module imports this one)."""
    return [target("uploaded-image", "keep/upload.bin", _image, _image_mutant, text=False),
            target("moment-ref", "keep/like_body.json", _like),
            target("saved-searches", "keep/index.alerts/searches.json", _searches),
            target("alerts-log", "keep/index.alerts", _log, _log_mutant)]
