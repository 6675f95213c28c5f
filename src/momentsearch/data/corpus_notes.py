"""A dataset corpus's annotated moments, kept beside ``corpus.json`` instead of inside it.

A generated million has 9.6 M captions: inside the manifest they made it about 770 MB of JSON, which every
``index``, ``serve`` and ``search`` parsed whole to read a few. Here they are two files of the corpus folder::

    annotations.jsonl         one line per video, in the manifest's order: [[start, end, text], ...]
    annotations.offsets.npy   int64, (videos + 1,): where each video's line starts (the last: the file's size)

The service reads one line when it labels a result (a seek and a read); where the file is small beside the
machine's memory it reads the whole file once in the background when it starts
(:meth:`CorpusNotes.read_in_background`), so that those lines come from the page cache: at 100k videos (56 MB) a
request's ten lines read cold cost about 3 ms, warm 0.4. The manifest's ``annotations`` names
both files and the count; :class:`CorpusNotes` checks the offsets against the file before the first read, and
a line that does not parse is a :class:`~momentsearch.errors.CorpusFolderError` naming the video and the file.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np

from momentsearch.errors import CorpusFolderError
from momentsearch.readers import read_npy

NOTES = "annotations.jsonl"
OFFSETS = "annotations.offsets.npy"


class NotesWriter:
    """Writes the two files into a folder being built (a corpus's temporary folder: the set is renamed in
    whole), one :meth:`add` per video in the manifest's order."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self._fh = (self.folder / NOTES).open("wb")
        self._offsets = [0]

    def add(self, notes: list[list[Any]]) -> None:
        line = json.dumps(notes, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        self._fh.write(line)
        self._offsets.append(self._offsets[-1] + len(line))

    def close(self) -> dict[str, Any]:
        """Flush both files; the manifest's ``annotations`` record."""
        self._fh.close()
        np.save(self.folder / OFFSETS, np.asarray(self._offsets, np.int64))
        return {"path": NOTES, "offsets": OFFSETS, "count": len(self._offsets) - 1}


def check_record(rec: Any, n_videos: int, where: Path) -> None:
    """The manifest's ``annotations`` record: the two file names and one line per video."""
    ok = (isinstance(rec, dict) and rec.get("path") == NOTES and rec.get("offsets") == OFFSETS
          and type(rec.get("count")) is int and rec["count"] == n_videos)
    if not ok:
        raise CorpusFolderError(f"{where}: annotations must be {{'path': {NOTES!r}, 'offsets': {OFFSETS!r}, "
                                f"'count': {n_videos}}} (one line per video), got {str(rec)[:200]}")


class CorpusNotes:
    """Reads one video's annotations by its row in the manifest (:meth:`get`)."""

    def __init__(self, folder: str | Path, count: int):
        self.path = Path(folder) / NOTES
        offsets = read_npy(Path(folder) / OFFSETS, CorpusFolderError, mmap=True)
        try:
            size = self.path.stat().st_size
        except OSError as e:
            raise CorpusFolderError(f"{self.path}: cannot read ({e.strerror or e}); write the corpus again") from None
        if not (offsets.dtype == np.int64 and offsets.shape == (count + 1,) and offsets[0] == 0
                and offsets[-1] == size and bool(np.all(np.diff(offsets) > 0))):
            raise CorpusFolderError(f"{Path(folder) / OFFSETS}: does not index {self.path} ({count} lines, {size} "
                                    f"bytes; got {offsets.dtype} {offsets.shape}); write the corpus again")
        self._offsets = offsets

    @property
    def nbytes(self) -> int:
        return int(self._offsets[-1])

    def read_in_background(self) -> threading.Thread:
        """Read the whole file once in a background thread, so that the page cache holds it (``posix_fadvise``
        WILLNEED alone read only 8 MB of a 56 MB file here). Returns the thread (a daemon; ``join`` to wait)."""
        def read() -> None:
            try:
                with self.path.open("rb", buffering=0) as fh:
                    while fh.readinto(buf):
                        pass
            except OSError:  # a file gone since: each read of a line says so itself
                pass

        buf = bytearray(1 << 22)
        t = threading.Thread(target=read, name="momentsearch-captions", daemon=True)
        t.start()
        return t

    def get(self, row: int, video_id: str) -> list[list[Any]]:
        a, b = int(self._offsets[row]), int(self._offsets[row + 1])
        with self.path.open("rb") as fh:
            fh.seek(a)
            raw = fh.read(b - a)
        try:
            notes = json.loads(raw)
        except ValueError:
            notes = None
        if not (isinstance(notes, list) and all(isinstance(n, list) and len(n) == 3 for n in notes)):
            raise CorpusFolderError(f"{self.path}: the line of video {video_id!r} (bytes {a}-{b}) is not a list of "
                                    "[start, end, text]; write the corpus again")
        return notes
