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
