"""``momentsearch.Client``: search a running ``momentsearch serve`` from Python, with the signature and the
result type of ``momentsearch.load(INDEX_DIR)``.

    import momentsearch
    client = momentsearch.Client("http://127.0.0.1:8000", api_key="...")   # or MOMENTSEARCH_API_KEY
    for hit in client.search("a person opens the fridge", k=5):
        print(hit.video_id, hit.start, hit.end, hit.score)

Only the standard library (``urllib``): no torch, no model, no HTTP package. ``search`` pages through
``POST /v1/search`` (100 moments a page), ``search_many`` sends ``POST /v1/search/batch`` (64 queries a
request). Start and end come back rounded to the millisecond, as the service writes them. ``where`` takes the
same :class:`~momentsearch.serving.filters.VideoFilter` as ``load(...).search``.
"""

from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from momentsearch.errors import ConfigError, MomentSearchError, QueryError
from momentsearch.search.ranked import Hit
from momentsearch.serving.filters import VideoFilter

PAGE = 100
BATCH = 64


class Client:
    def __init__(self, url: str, api_key: str | None = None, timeout: float = 60.0):
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"the service URL must start with http:// or https://, got {url[:80]!r}")
        self.url = url.rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("MOMENTSEARCH_API_KEY")
        self.timeout = timeout

    def _call(self, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method="GET" if body is None else "POST",
                                     headers={"Content-Type": "application/json"})
        if self.api_key:
            req.add_header("Authorization", f"Bearer {self.api_key}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            try:
                message = json.loads(e.read()).get("error", e.reason)
            except ValueError:
                message = str(e.reason)
            if e.code == 401:
                raise ConfigError(f"{self.url}: {message} (pass api_key=, or set MOMENTSEARCH_API_KEY)") from None
            raise QueryError(f"{self.url}{path}: {e.code}: {message}") from None
        except (urllib.error.URLError, OSError) as e:
            raise MomentSearchError(f"cannot reach {self.url} ({getattr(e, 'reason', e)}); is `momentsearch serve` "
                                    "running there?") from None

    def health(self) -> dict[str, Any]:
        return self._call("/health")

    def search(self, text: str | None = None, k: int = 10, videos: Sequence[str] | None = None,
               where: VideoFilter | None = None, time_from: float | None = None, time_to: float | None = None,
               per_video: int | None = None, image: str | Path | bytes | None = None,
               like: tuple[str, float, float] | None = None) -> list[Hit]:
        """Ranked moments for ``text``, best first (at most ``k``, up to 1000); ``videos``: only these ids;
        ``where``: only the videos the filter passes; ``time_from``/``time_to``: only moments overlapping that
        range of seconds; ``per_video``: grouped by video, each video's best ``per_video`` moments together;
        ``image``: a picture (a file's path or its bytes) and ``like``: a found moment (video_id, start, end), as
        ``load(...).search`` takes them."""
        if not 1 <= k <= 1000:
            raise QueryError(f"k must be between 1 and 1000, got {k}")
        asked: dict[str, Any] = {} if text is None else {"query": text}
        if image is not None:
            data = image if isinstance(image, bytes) else Path(image).read_bytes()
            asked["image"] = base64.b64encode(data).decode("ascii")
        if like is not None:
            if not (isinstance(like, (tuple, list)) and len(like) == 3):
                raise QueryError("like= takes (video_id, start, end): a found moment")
            asked["like"] = {"video_id": like[0], "start": like[1], "end": like[2]}
        if not asked:
            raise QueryError("search needs words, image= or like=")
        fields = _filter_body(videos, where)
        if fields is not None:
            fields.update(_arrange_body(time_from, time_to, per_video))
        out: list[Hit] = []
        offset: int | None = 0 if fields is not None else None
        while offset is not None and len(out) < k:
            body: dict[str, Any] = {**asked, "k": min(PAGE, k - len(out)), "offset": offset, **(fields or {})}
            page = self._call("/v1/search", body)
            out += [_hit(m) for m in page["moments"]]
            offset = page["next_offset"]
        return out

    def search_many(self, texts: Sequence[str], k: int = 10, videos: Sequence[str] | None = None,
                    where: VideoFilter | None = None) -> list[list[Hit]]:
        """``search`` for each text, ``BATCH`` texts a request (searched together by the service)."""
        if isinstance(texts, str):
            raise QueryError("search_many takes a list of texts; use search() for one")
        if not 1 <= k <= PAGE:
            return [self.search(t, k, videos, where) for t in texts]
        fields = _filter_body(videos, where)
        if fields is None:
            return [[] for _ in texts]
        out: list[list[Hit]] = []
        for s in range(0, len(texts), BATCH):
            body: dict[str, Any] = {"queries": list(texts[s: s + BATCH]), "k": k, **fields}
            out += [[_hit(m) for m in r["moments"]] for r in self._call("/v1/search/batch", body)["results"]]
        return out


def _arrange_body(time_from: float | None, time_to: float | None, per_video: int | None) -> dict[str, Any]:
    body: dict[str, Any] = {k: v for k, v in (("time_from", time_from), ("time_to", time_to)) if v is not None}
    if per_video is not None:
        body.update(group_by_video=True, per_video=per_video)
    return body


def _filter_body(videos: Sequence[str] | None, where: VideoFilter | None) -> dict[str, Any] | None:
    """The request fields of ``videos`` and a filter (both apply, as in ``Searcher``); None: no video can pass."""
    body: dict[str, Any] = {}
    if isinstance(videos, str):
        raise QueryError("videos must be a list of video ids")
    ids = list(videos or ()) + list((where.videos if where is not None else None) or ())
    if videos is not None and where is not None and where.videos is not None:
        ids = [v for v in dict.fromkeys(videos) if v in set(where.videos)]  # both apply: the ids in both
        if not ids:
            return None
    if ids:
        body["videos"] = list(dict.fromkeys(ids))
    if where is not None:
        for name in ("path_prefix", "min_duration", "max_duration"):
            if getattr(where, name) is not None:
                body[name] = getattr(where, name)
        for name in ("ingested_after", "ingested_before", "modified_after", "modified_before"):
            if getattr(where, name) is not None:
                body[name] = getattr(where, name).isoformat()
    return body


def _hit(m: dict[str, Any]) -> Hit:
    return Hit(str(m["video_id"]), float(m["start"]), float(m["end"]), float(m["score"]))
