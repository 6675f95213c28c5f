"""Charades' action annotations: the ``actions`` column of ``Charades_v1_<split>.csv``, e.g.
``c092 11.90 21.20;c147 0.00 12.60`` (class, start s, end s; 157 classes ``c000``-``c156``).

A video with no actions has an empty field. A malformed item (not three fields, a class that is not
``c`` and three digits, a time that is not a finite number >= 0) is the project's error naming the file
and line. An interval whose start is after its end (7 of 66,500 in the real train and test files) is read
as the span between the two and counted in :attr:`ActionTable.reversed`.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from momentsearch.data.corpus import Corpus
from momentsearch.data.loaders._common import names_its_file, read_text, require_file
from momentsearch.errors import AnnotationError

CLASS = re.compile(r"c\d{3}")


@dataclass(frozen=True)
class Action:
    cls: str
    start: float
    end: float


@dataclass
class ActionTable:
    """video id -> its action intervals, in file order; ``reversed``: intervals read with start and end swapped."""
    actions: dict[str, list[Action]] = field(default_factory=dict)
    reversed: int = 0

    def classes(self) -> set[str]:
        return {a.cls for acts in self.actions.values() for a in acts}


@names_its_file
def load_charades_actions(*paths: str | Path) -> ActionTable:
    """One or more Charades CSVs (train, test) -> their action intervals; a video in two files is an error."""
    table = ActionTable()
    for path in paths:
        p = require_file(path)
        reader = csv.DictReader(io.StringIO(read_text(p), newline=""))
        try:
            if not {"id", "actions"} <= set(reader.fieldnames or []):
                raise AnnotationError(p, "CSV lacks the column(s) 'id' and 'actions'", line=1)
            for row in reader:
                vid = row["id"] or ""
                if not vid:
                    raise AnnotationError(p, "empty video id", line=reader.line_num)
                if vid in table.actions:
                    raise AnnotationError(p, f"video {vid[:80]!r} appears twice (in this file or an earlier one)",
                                          line=reader.line_num)
                table.actions[vid] = _parse(row["actions"] or "", p, reader.line_num, table)
        except csv.Error as e:
            raise AnnotationError(p, f"malformed CSV: {e}", line=reader.line_num) from None
    return table


def _parse(text: str, p: Path, line: int, table: ActionTable) -> list[Action]:
    out = []
    for item in (x.strip() for x in text.split(";")):
        if not item:
            continue
        parts = item.split()
        if len(parts) != 3 or not CLASS.fullmatch(parts[0]):
            raise AnnotationError(p, f"an action must be 'cNNN START END', got {item[:80]!r}", line=line)
        try:
            st, ed = float(parts[1]), float(parts[2])
        except ValueError:
            raise AnnotationError(p, f"action times must be numbers, got {item[:80]!r}", line=line) from None
        if not (math.isfinite(st) and math.isfinite(ed) and st >= 0 and ed >= 0):
            raise AnnotationError(p, f"action times must be finite seconds >= 0, got {item[:80]!r}", line=line)
        if st > ed:
            st, ed = ed, st
            table.reversed += 1
        out.append(Action(parts[0], st, ed))
    return out


def tiou(a: tuple[float, float], b: tuple[float, float]) -> float:
    inter = min(a[1], b[1]) - max(a[0], b[0])
    union = max(a[1], b[1]) - min(a[0], b[0])
    return max(0.0, inter) / union if union > 0 else 0.0


def query_classes(corpus: Corpus, table: ActionTable, min_tiou: float = 0.5) -> dict[str, str | None]:
    """query id -> its action class (None: no interval of its video overlaps its span at ``min_tiou``)."""
    out: dict[str, str | None] = {}
    for m in corpus.moments:
        best, best_iou = None, -1.0
        for a in table.actions.get(m.video_id or "", []):
            iou = tiou(m.span, (a.start, a.end))
            if iou > best_iou:
                best, best_iou = a.cls, iou
        out[m.query_id] = best if best_iou >= min_tiou else None
    return out


def grade(table: ActionTable, cls: str | None, video_id: str, start: float, end: float) -> float:
    """The moment's grade for a query of class ``cls``: its best tIoU with a ``cls`` interval of the video."""
    if cls is None:
        return 0.0
    return max((tiou((start, end), (a.start, a.end)) for a in table.actions.get(video_id, []) if a.cls == cls),
               default=0.0)
