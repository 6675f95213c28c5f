"""Keep an index current while videos arrive: ``momentsearch watch VIDEOS_DIR --index INDEX_DIR``.

Every ``interval`` seconds the watcher lists the folder (each file's size and modification time, sidecars
included). When the listing differs from the one last indexed and has stayed the same for ``settle`` seconds
(a file still being copied keeps growing), it runs ``ingest`` into the corpus (only new and changed files are
encoded; files that are gone leave it) and ``index`` into the index folder (only those videos are encoded),
which is replaced as a set. A running ``serve`` sees the new folder and swaps to it between requests
(:mod:`momentsearch.service.loading`). Settings come from what is already there: the corpus's encoder, clip
length and frame rate, the index's model (``model`` for an index not built yet).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from momentsearch.data.corpus_folder import CorpusFolder, is_corpus_folder
from momentsearch.errors import ConfigError
from momentsearch.serving.indexing import IndexReport, build_index, is_index_folder, read_index_info

Listing = dict[str, tuple[int, int]]


def listing(folder: Path, exclude: tuple[Path, ...] = ()) -> Listing:
    """Every visible file under ``folder`` (relative path -> (size, mtime_ns)), outside ``exclude``."""
    out: Listing = {}
    skip = {p.resolve() for p in exclude}
    for dirpath, dirnames, filenames in os.walk(folder):
        d = Path(dirpath)
        dirnames[:] = [n for n in dirnames if not n.startswith(".") and (d / n).resolve() not in skip]
        for n in filenames:
            if n.startswith("."):
                continue
            try:
                st = (d / n).stat()
            except OSError:
                continue  # gone between listing and stat
            out[(d / n).relative_to(folder).as_posix()] = (st.st_size, st.st_mtime_ns)
    return out


@dataclass
class Update:
    """One round of ingest + index: what it did, and when the change that started it was first seen."""

    ingest: Any  # IngestReport
    index: IndexReport | None
    seen_at: float  # time.time() when the change was first listed
    done_at: float
    alerts: list[Any] = field(default_factory=list)  # new moments of saved searches (serving.alerts)
    alert_error: str | None = None  # the saved searches could not be run (the index is updated all the same)

    def summary(self) -> str:
        lines = [self.ingest.summary()]
        if self.index is not None:
            lines.append(self.index.summary())
        lines.append(f"updated {self.done_at - self.seen_at:.1f} s after the change was seen")
        lines += [f"alert: {a.query!r} matched {a.video_id} {a.start:.1f}-{a.end:.1f} s (score {a.score:.3f})"
                  for a in self.alerts]
        if self.alert_error:
            lines.append(f"saved searches not run: {self.alert_error}")
        return "\n".join(lines)


@dataclass
class Watcher:
    videos: Path
    corpus: Path
    index: Path
    model: Path | None = None
    interval: float = 2.0
    settle: float = 2.0
    encoder: str | None = None  # default: the corpus's (builtin for a new one)
    encoder_options: dict[str, Any] = field(default_factory=dict)
    clip_seconds: float = 2.0  # for a new corpus
    fps: float = 2.0
    speech: str | None = None  # default: as the corpus's videos were ingested (none for a new one)
    read_text: bool | None = None
    ocr_weights: str | None = None
    alerts: bool = True  # run the saved searches (INDEX.alerts/) over each round's new and changed videos
    _done: Listing | None = None
    _last: Listing | None = None
    _since: float = 0.0
    _first_seen: float = 0.0

    def __post_init__(self) -> None:
        self.videos, self.corpus, self.index = Path(self.videos), Path(self.corpus), Path(self.index)
        if not self.videos.is_dir():
            raise ConfigError(f"{self.videos}: not a folder of videos to watch")
        if self.model is None and not is_index_folder(self.index):
            raise ConfigError(f"{self.index}: no index there yet; give --model CHECKPOINT for its first build")

    def _settings(self) -> dict[str, Any]:
        if not is_corpus_folder(self.corpus):
            return {"encoder": self.encoder or "builtin", "encoder_options": self.encoder_options,
                    "clip_seconds": self.clip_seconds, "fps": self.fps, "speech": self.speech or "none",
                    "read_text": bool(self.read_text)}
        man = CorpusFolder.open(self.corpus).manifest
        ident = man.encoder
        options = self.encoder_options or ({"weights": man.encoder_weights} if man.encoder_weights else {})
        # what the last ingested video was heard and read with (so that a new file is treated alike, and the
        # old ones are not done again without their speech and text)
        latest = max(man.videos, key=lambda v: str(v.get("ingested_at", "")), default={})
        listen = latest.get("listen") or {}
        return {"encoder": self.encoder or ident["name"], "encoder_options": options,
                "clip_seconds": man.clip_seconds, "fps": man.fps,
                "speech": self.speech or listen.get("speech", "none"),
                "read_text": bool(listen.get("read_text", False)) if self.read_text is None else self.read_text}

    def step(self, now: float | None = None) -> Update | None:
        """List the folder; ingest and index once a change has settled (the first call's listing counts as a
        change: an ingest of an unchanged folder encodes nothing). None when nothing was done."""
        from momentsearch.video.ingest import ingest

        now = time.time() if now is None else now
        current = listing(self.videos, exclude=(self.corpus, self.index))
        if current != self._last:  # still changing: the settle clock starts again
            self._last, self._since = current, now
        if current != self._done and not self._first_seen:
            self._first_seen = now
        if current == self._done or now - self._since < self.settle:
            return None
        s = self._settings()
        model = self.index / "model.pt" if is_index_folder(self.index) else self.model
        report = ingest(self.videos, self.corpus, s["encoder"], s["clip_seconds"], s["fps"],
                        encoder_options=s["encoder_options"] or None, progress=False, speech=s["speech"],
                        read_text=s["read_text"], ocr_weights=self.ocr_weights if s["read_text"] else None)
        fingerprint = CorpusFolder.open(self.corpus).fingerprint
        idx = None
        if not is_index_folder(self.index) or read_index_info(self.index).corpus.fingerprint != fingerprint:
            idx = build_index(model, self.corpus, self.index, progress=False)  # type: ignore[arg-type]
        done = Update(report, idx, self._first_seen, time.time())
        if self.alerts and report.encoded:
            self._alert(done, report.encoded)
        self._done, self._first_seen = current, 0.0
        return done

    def _alert(self, done: Update, videos: list[str]) -> None:
        """The saved searches over the videos this round encoded (none saved: nothing loaded)."""
        from momentsearch.errors import MomentSearchError
        from momentsearch.serving.alerts import AlertBook
        from momentsearch.serving.searcher import load_index

        book = AlertBook(self.index)
        try:
            if book.searches():
                done.alerts = book.check(load_index(self.index, device="cpu"), videos)
        except (MomentSearchError, OSError) as e:
            done.alert_error = f"{type(e).__name__}: {e}"
        done.done_at = time.time()

    def run(self, stop: threading.Event | None = None, on_update: Callable[[Update], None] | None = None,
            on_error: Callable[[BaseException], None] | None = None) -> None:
        """Watch until ``stop`` is set (or forever). A failed round (the disk full, a bad model) is reported to
        ``on_error`` and tried again at the next change; nothing already indexed is lost (folders are replaced
        as sets)."""
        stop = stop or threading.Event()
        while not stop.is_set():
            try:
                done = self.step()
            except (MemoryError, KeyboardInterrupt):
                raise
            except Exception as e:  # noqa: BLE001 - one failed round must not end the watch
                self._done = None  # try again once the folder settles
                if on_error is None:
                    raise
                on_error(e)
                done = None
            if done is not None and on_update is not None:
                on_update(done)
            stop.wait(self.interval)
