"""Saved searches, and alerts when new videos match them: :class:`AlertBook`.

A saved search is words with a score threshold and optional filters (``momentsearch alerts add INDEX "a dog on
the sofa" --min-score 0.6``, ``POST /v1/alerts``). When ``watch`` (or ``serve --watch``) has ingested and indexed
new or changed videos, :meth:`AlertBook.check` runs every saved search over those videos only and appends each
new moment at or above its threshold to the alerts log; a search with a ``webhook`` also has each alert POSTed
there as JSON by :class:`WebhookSender`, a thread that retries with back-off and never holds indexing up.

Everything lives beside the index folder, in ``INDEX.alerts/`` (the index folder is replaced as a set when it is
rebuilt, so nothing in it would survive), and survives restarts:

* ``searches.json``: the saved searches (replaced atomically);
* ``log.jsonl``: every alert, one JSON line each, appended; an alert's ``id`` is a hash of its search and its
  moment, so the same moment of the same search is logged (and sent) once, whatever restarts;
* ``sent.jsonl``: the ids the webhook took (2xx), appended; at start-up what is logged and not sent is sent.

Each reader checks what it reads: a damaged ``searches.json`` is an :class:`AlertError` naming the file (nothing
is overwritten); a damaged line of a log is skipped with a warning, the rest kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from momentsearch.errors import MomentSearchError, QueryError
from momentsearch.fileio import json_line, write_json

FORMAT, VERSION = "momentsearch-alerts", 1
MAX_SEARCHES = 1000


class AlertError(MomentSearchError, ValueError):
    """A damaged saved-search store or a saved search that cannot be (names the file or the field)."""


def alerts_folder(index: str | Path) -> Path:
    p = Path(index)
    return p.parent / f"{p.name}.alerts"


def _utc() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class SavedSearch:
    id: str
    query: str
    min_score: float
    k: int = 10
    path_prefix: str | None = None
    webhook: str | None = None
    created: str = ""

    @classmethod
    def of(cls, d: Any, where: str = "a saved search") -> SavedSearch:
        """Checked: every field its type, a webhook an http(s) URL."""
        if not isinstance(d, dict):
            raise AlertError(f"{where}: must be an object")
        known = {"id", "query", "min_score", "k", "path_prefix", "webhook", "created"}
        if set(d) - known:
            raise AlertError(f"{where}: unknown field(s) {sorted(set(d) - known)}")
        q, s, k = d.get("query"), d.get("min_score"), d.get("k", 10)
        if not isinstance(q, str) or not q.strip() or len(q) > 1000 or not _is_text(q):
            raise AlertError(f"{where}: query must be a non-empty string of at most 1000 characters (UTF-8 text)")
        if isinstance(s, bool) or not isinstance(s, (int, float)) or s != s or abs(s) > 1e6:
            raise AlertError(f"{where}: min_score must be a number")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 100:
            raise AlertError(f"{where}: k must be an integer from 1 to 100")
        for name in ("id", "path_prefix", "webhook", "created"):
            if not isinstance(d.get(name), (str, type(None))) or len(d.get(name) or "") > 2000 or not _is_text(
                    d.get(name) or ""):
                raise AlertError(f"{where}: {name} must be a string (UTF-8 text, at most 2000 characters)")
        hook = d.get("webhook")
        if hook is not None and not _http_url(hook):
            raise AlertError(f"{where}: webhook must be an http:// or https:// URL, got {hook[:100]!r}")
        return cls(d.get("id") or "", q.strip(), float(s), k, d.get("path_prefix"), hook, d.get("created") or "")


def _is_text(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _http_url(url: str) -> bool:
    try:
        u = urlparse(url)
        return u.scheme in ("http", "https") and bool(u.netloc) and bool(u.hostname) and _is_text(url)
    except ValueError:  # a bracketed host that is no IPv6 address, a port out of range
        return False


@dataclass(frozen=True)
class Alert:
    id: str
    search_id: str
    query: str
    video_id: str
    start: float
    end: float
    score: float
    at: str
    webhook: str | None = field(default=None, compare=False)


def alert_id(search_id: str, video_id: str, start: float, end: float) -> str:
    return hashlib.sha1(json.dumps([search_id, video_id, round(start, 2), round(end, 2)]).encode()).hexdigest()[:20]


class AlertBook:
    """The saved searches and the alerts log of one index (``INDEX.alerts/``)."""

    def __init__(self, index: str | Path, folder: str | Path | None = None):
        self.root = Path(folder) if folder is not None else alerts_folder(index)
        self._lock = threading.Lock()

    @property
    def searches_file(self) -> Path:
        return self.root / "searches.json"

    @property
    def log_file(self) -> Path:
        return self.root / "log.jsonl"

    @property
    def sent_file(self) -> Path:
        return self.root / "sent.jsonl"

    # ---- saved searches --------------------------------------------------------------------------
    def searches(self) -> list[SavedSearch]:
        f = self.searches_file
        if not f.is_file():
            return []
        try:
            data = json.loads(f.read_text(encoding="utf-8"))
        except (ValueError, OSError, RecursionError) as e:  # (JSON, UTF-8, a 5,000-digit integer)
            raise AlertError(f"{f}: the saved searches cannot be read ({type(e).__name__}); fix or remove the file "
                             "(it is never overwritten while damaged)") from None
        if not (isinstance(data, dict) and data.get("format") == FORMAT and data.get("version") == VERSION
                and isinstance(data.get("searches"), list)):
            raise AlertError(f"{f}: not a momentsearch saved-search file (format {FORMAT} version {VERSION})")
        out = [SavedSearch.of(s, f"{f}: searches[{i}]") for i, s in enumerate(data["searches"])]
        if len({s.id for s in out}) != len(out) or any(not s.id for s in out):
            raise AlertError(f"{f}: saved-search ids must be present and distinct")
        return out

    def _write(self, searches: Sequence[SavedSearch]) -> None:
        write_json(self.searches_file, {"format": FORMAT, "version": VERSION,
                                        "searches": [asdict(s) for s in searches]}, indent=1)

    def add(self, query: str, min_score: float, k: int = 10, path_prefix: str | None = None,
            webhook: str | None = None) -> SavedSearch:
        with self._lock:
            have = self.searches()
            if len(have) >= MAX_SEARCHES:
                raise AlertError(f"at most {MAX_SEARCHES} saved searches; remove some first")
            sid = hashlib.sha1(f"{query}\0{min_score}\0{time.time_ns()}".encode()).hexdigest()[:12]
            s = SavedSearch.of({"id": sid, "query": query, "min_score": min_score, "k": k, "path_prefix": path_prefix,
                                "webhook": webhook, "created": _utc()})
            self._write([*have, s])
            return s

    def remove(self, search_id: str) -> None:
        with self._lock:
            have = self.searches()
            if search_id not in {s.id for s in have}:
                raise QueryError(f"no saved search {search_id[:40]!r}")
            self._write([s for s in have if s.id != search_id])

    # ---- the log ---------------------------------------------------------------------------------
    def _lines(self, f: Path) -> list[dict[str, Any]]:
        if not f.is_file():
            return []
        out, bad = [], 0
        with open(f, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except (ValueError, RecursionError):
                    bad += 1
                    continue
                if isinstance(rec, dict) and isinstance(rec.get("id"), str) and _is_text(
                        json.dumps(rec, ensure_ascii=False)):  # (a "\ud800" escape makes a lone surrogate: not text)
                    out.append(rec)
                else:
                    bad += 1
        if bad:
            warnings.warn(f"{f}: {bad} damaged line(s) skipped", stacklevel=3)
        return out

    def alerts(self) -> list[Alert]:
        """Every logged alert, oldest first (a damaged line skipped with a warning)."""
        out = []
        for r in self._lines(self.log_file):
            try:
                out.append(Alert(str(r["id"]), str(r["search_id"]), str(r["query"]), str(r["video_id"]),
                                 float(r["start"]), float(r["end"]), float(r["score"]), str(r["at"]),
                                 r.get("webhook") if isinstance(r.get("webhook"), str) else None))
            except (KeyError, TypeError, ValueError, OverflowError):
                warnings.warn(f"{self.log_file}: an alert with missing or damaged fields skipped", stacklevel=2)
        return out

    def sent(self) -> set[str]:
        return {str(r["id"]) for r in self._lines(self.sent_file)}

    def unsent(self) -> list[Alert]:
        """The logged alerts with a webhook that did not take them yet, oldest first."""
        done = self.sent()
        return [a for a in self.alerts() if a.webhook and a.id not in done]

    def _append(self, f: Path, records: Sequence[dict[str, Any]]) -> None:
        if not records:
            return
        f.parent.mkdir(parents=True, exist_ok=True)
        with open(f, "a+b") as fh:
            torn = fh.tell() > 0 and (fh.seek(-1, 2) or fh.read(1) != b"\n")  # a crash cut the last line short
            fh.write((b"\n" if torn else b"") + "".join(json_line(r) for r in records).encode("utf-8"))
            fh.flush()
            os.fsync(fh.fileno())

    def mark_sent(self, ids: Sequence[str]) -> None:
        with self._lock:
            self._append(self.sent_file, [{"id": i, "at": _utc()} for i in ids])

    def check(self, searcher: Any, videos: Sequence[str]) -> list[Alert]:
        """Run every saved search over ``videos`` only (those just added or changed) and log each video's best
        moment at or above its threshold that was not logged before. Returns the new alerts."""
        from momentsearch.serving.filters import VideoFilter

        held = set(searcher.video_ids)
        videos = [v for v in dict.fromkeys(videos) if v in held]
        if not videos:
            return []
        with self._lock:
            searches = self.searches()
            seen = {a.id for a in self.alerts()}
            new: list[Alert] = []
            for s in searches:
                where = VideoFilter.of(videos, s.path_prefix)
                for h in searcher.search(s.query, k=s.k, where=where, per_video=1):  # each video's best
                    if h.score < s.min_score:
                        continue
                    aid = alert_id(s.id, h.video_id, h.start, h.end)
                    if aid in seen:
                        continue
                    seen.add(aid)
                    new.append(Alert(aid, s.id, s.query, h.video_id, round(float(h.start), 3), round(float(h.end), 3),
                                     float(h.score), _utc(), s.webhook))
            self._append(self.log_file, [asdict(a) for a in new])
        return new


class WebhookSender:
    """Posts each logged alert with a webhook that it has not sent, as JSON (``{"alert": {...}}``), in a thread:
    a failed or hung post (``timeout`` s) is retried with back-off (1, 2, 4... up to ``max_backoff`` s) and never
    blocks the caller. What is sent is recorded (``sent.jsonl``), so a restart sends only what is left."""

    def __init__(self, book: AlertBook, timeout: float = 5.0, max_backoff: float = 60.0,
                 post: Callable[[str, bytes, float], int] | None = None):
        self.book, self.timeout, self.max_backoff = book, timeout, max_backoff
        self.post = post or _post
        self.stats = {"sent": 0, "failed": 0}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="momentsearch-webhooks", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=self.timeout + 1)

    def _run(self) -> None:
        self._wake.set()  # what an earlier run logged and did not send goes first
        while not self._stop.is_set():
            self._wake.wait(30.0)  # woken by wake(), or every 30 s anyway
            self._wake.clear()
            backoff = 0.0
            while not self._stop.is_set() and not self._send_pending():
                backoff = min(max(2 * backoff, 1.0), self.max_backoff)
                if self._stop.wait(backoff):
                    return

    def _send_pending(self) -> bool:
        """Post what is pending, in order; False at the first failure (the rest waits for the back-off)."""
        try:
            pending = self.book.unsent()
        except (MomentSearchError, OSError):
            return True
        for a in pending:
            if self._stop.is_set():
                return True
            body = json.dumps({"alert": {k: v for k, v in asdict(a).items() if k != "webhook"}}).encode()
            try:
                ok = 200 <= self.post(a.webhook, body, self.timeout) < 300  # type: ignore[arg-type]
            except (OSError, ValueError, urllib.error.URLError):
                ok = False
            if not ok:
                self.stats["failed"] += 1
                return False
            self.book.mark_sent([a.id])
            self.stats["sent"] += 1
        return True


def _post(url: str, body: bytes, timeout: float) -> int:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json",
                                                                        "User-Agent": "momentsearch-alerts"})
    with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 - the user's own http(s) URL
        return int(r.status)


__all__ = ["Alert", "AlertBook", "AlertError", "SavedSearch", "WebhookSender", "alert_id", "alerts_folder"]
