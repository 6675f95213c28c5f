"""Text on screen as timed cues: one frame per clip read by :class:`~momentsearch.video.ocr.reader.TextReader`.

The frame at each clip's start (the decoder's sampling at one frame per clip), scaled so its longer side is
at most ``max_side`` pixels, keeping its shape and rotation as a player shows it. A frame that differs from
the last one read by less than ``same`` (mean absolute difference of its grey levels, 0-255) is not read
again: its lines are the last ones (slides and screen recordings change seldom). A line that stays on
screen over consecutive clips is one cue from the first clip's start to the last clip's end; two readings
are the same line when they are equal ignoring case and spaces, or when at least ``similar`` of their
characters match (:class:`difflib.SequenceMatcher`), which absorbs a character the reader gets wrong in one
frame; the cue keeps its most confident reading.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from momentsearch.data.corpus import Subtitle
from momentsearch.errors import EncoderError
from momentsearch.video.decode import DecodeLimits, DecodeStats, clip_frames, probe
from momentsearch.video.ocr.reader import TextLine, TextReader


def display_size(path: Path, max_side: int) -> tuple[int, int]:
    info = probe(path)
    w, h = (info.height, info.width) if info.rotation in (90, 270) else (info.width, info.height)
    scale = min(1.0, max_side / max(w, h, 1))
    return max(int(round(w * scale)) // 2 * 2, 16), max(int(round(h * scale)) // 2 * 2, 16)


def _key(text: str) -> str:
    return "".join(text.lower().split())


def _same(a: str, b: str, similar: float) -> bool:
    return a == b or difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() >= similar


def frame_lines(path: str | Path, reader: TextReader, clip_seconds: float, limits: DecodeLimits | None = None,
                max_side: int = 640, same: float = 1.0, stills: bool = False) -> Iterator[list[TextLine]]:
    """Per clip, in order, the lines read in its first frame (a frame like the last one read is not read again)."""
    p = Path(path)
    prev: np.ndarray | None = None
    lines: list[TextLine] = []
    for _, frames in clip_frames(p, clip_seconds, 1.0 / clip_seconds, display_size(p, max_side), DecodeStats(), limits,
                                 stills):
        grey = frames[0].astype(np.float32).mean(2)
        if prev is None or float(np.abs(grey - prev).mean()) >= same:
            lines, prev = reader.read(frames[0]), grey
        yield lines


def cues_from_lines(per_clip: Iterable[Sequence[Any]], clip_seconds: float, duration: float, similar: float = 0.8
                    ) -> list[Subtitle]:
    """Lines read per clip -> cues (see the module); an :class:`~momentsearch.errors.EncoderError` for a
    reading that is not a line of text with a confidence in [0, 1]."""
    if not (clip_seconds > 0 and math.isfinite(clip_seconds) and math.isfinite(duration) and duration >= 0):
        raise EncoderError(f"clip_seconds {clip_seconds} and duration {duration}: need clip_seconds > 0, duration >= 0")
    open_: list[list[Any]] = []  # [key, first clip, last clip, text, confidence]
    done: list[list[Any]] = []
    for c, lines in enumerate(per_clip):
        if not isinstance(lines, (list, tuple)):
            raise EncoderError(f"clip {c}: the text reader's lines are a list, not {type(lines).__name__}")
        still: list[list[Any]] = []
        for i, ln in enumerate(lines):
            ok = (isinstance(ln, TextLine) and isinstance(ln.text, str) and isinstance(ln.confidence, (int, float))
                  and not isinstance(ln.confidence, bool) and 0.0 <= ln.confidence <= 1.0)
            if not ok:
                raise EncoderError(f"clip {c}, line {i}: not a reading of the text reader (text, confidence in "
                                   f"[0, 1], box): {ln!r:.120}")
            k = _key(ln.text)
            if not k:
                continue
            match = next((o for o in open_ if o[2] == c - 1 and all(o is not x for x in still)
                          and _same(o[0], k, similar)), None)
            if match is None:
                still.append([k, c, c, " ".join(ln.text.split()), float(ln.confidence)])
                continue
            match[2] = c
            if ln.confidence > match[4]:
                match[3], match[4] = " ".join(ln.text.split()), float(ln.confidence)
            still.append(match)
        done += [o for o in open_ if all(o is not x for x in still)]
        open_ = still
    done += open_
    cues = [Subtitle(round(a * clip_seconds, 3), round(max(min((b + 1) * clip_seconds, duration), a * clip_seconds), 3),
                     text) for _, a, b, text, _ in done]
    return sorted(cues, key=lambda s: (s.start, s.end, s.text))


def written_cues(path: str | Path, reader: TextReader, clip_seconds: float, duration: float,
                 limits: DecodeLimits | None = None, stills: bool = False) -> list[Subtitle]:
    """The cues of the text on screen in one video."""
    return cues_from_lines(frame_lines(path, reader, clip_seconds, limits, stills=stills), clip_seconds, duration)
