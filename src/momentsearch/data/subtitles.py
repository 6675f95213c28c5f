"""Subtitle files beside videos: SRT and WebVTT -> :class:`~momentsearch.data.corpus.Subtitle` lines,
and their alignment to a video's clips.

SRT: blocks of an optional number, ``HH:MM:SS,mmm --> HH:MM:SS,mmm`` and text lines, separated by
blank lines. WebVTT: a ``WEBVTT`` header, then cues (an optional id, ``[HH:]MM:SS.mmm --> [HH:]MM:SS.mmm``
with optional settings after it, text), and ``NOTE``, ``STYLE`` and ``REGION`` blocks, which are
skipped. Tags (``<i>``, ``<v Bob>``, ``{\\an8}``) are dropped from the text. A malformed timing line,
an end before its start, a time that is not finite, or invalid UTF-8 raise a
:class:`~momentsearch.errors.SubtitleError` naming the file and the line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from momentsearch.data.corpus import Subtitle
from momentsearch.errors import SubtitleError, annotation_error
from momentsearch.readers import decode_text, read_bytes

SUBTITLE_SUFFIXES = (".srt", ".vtt")
_TIME = r"(?:(\d{1,3}):)?([0-5]?\d):([0-5]\d)[,.](\d{1,3})"
_CUE = re.compile(rf"^\s*{_TIME}\s*-->\s*{_TIME}(?:\s+.*)?$")
_TAGS = re.compile(r"<[^>]*>|\{\\[^}]*\}")
MAX_SUBTITLE_BYTES = 50_000_000


def subtitle_error(p: Path) -> Callable[[str], SubtitleError]:
    """The ``error`` for :mod:`momentsearch.readers`: its "PATH:LINE: what" as a :class:`SubtitleError`."""
    return annotation_error(p, cls=SubtitleError)  # type: ignore[return-value]


def sidecar_text(p: Path, what: str) -> str:
    """A sidecar file's UTF-8 text (at most ``MAX_SUBTITLE_BYTES``); every failure a :class:`SubtitleError`."""
    try:
        if p.stat().st_size > MAX_SUBTITLE_BYTES:
            raise SubtitleError(p, f"larger than {MAX_SUBTITLE_BYTES // 1_000_000} MB: not a {what}")
    except OSError as e:
        raise SubtitleError(p, f"cannot read ({e.strerror or e})") from None
    error = subtitle_error(p)
    return decode_text(p, read_bytes(p, error, what), error)


def _seconds(h: str | None, m: str, s: str, ms: str) -> float:
    return round(int(h or 0) * 3600 + int(m) * 60 + int(s) + int(ms.ljust(3, "0")) / 1000, 3)


def read_subtitles(path: str | Path) -> list[Subtitle]:
    """The cues of an SRT or WebVTT file (chosen by suffix), in file order."""
    p = Path(path)
    text = sidecar_text(p, "subtitle file")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    vtt = p.suffix.lower() == ".vtt"
    i = 0
    if vtt:
        if not lines or not lines[0].startswith("WEBVTT"):
            raise SubtitleError(p, "a WebVTT file starts with the line 'WEBVTT'", line=1)
        i = 1
    out: list[Subtitle] = []
    while i < len(lines):
        if not lines[i].strip():
            i += 1
            continue
        block_start = i
        block = []
        while i < len(lines) and lines[i].strip():
            block.append(lines[i])
            i += 1
        if vtt and block[0].split(" ", 1)[0].split("\t", 1)[0] in ("NOTE", "STYLE", "REGION"):
            continue
        timing = next((k for k, ln in enumerate(block[:2]) if "-->" in ln), None)
        if timing is None:  # the timing line is the first, or the second after a cue number or id
            timed = [j for j, ln in enumerate(block[:2]) if re.search(r"\d:\d\d", ln)]  # a time, without its arrow
            k = timed[0] if timed else 1 if len(block) > 1 and (block[0].strip().isdigit() or vtt) else 0
            raise SubtitleError(p, f"malformed timing line {block[k][:80]!r} (expected 'HH:MM:SS"
                                   f"{',' if not vtt else '.'}mmm --> HH:MM:SS{',' if not vtt else '.'}mmm')",
                                line=block_start + k + 1)
        m = _CUE.match(block[timing])
        if m is None:
            raise SubtitleError(p, f"malformed timing line {block[timing][:80]!r}", line=block_start + timing + 1)
        g = m.groups()
        st, ed = _seconds(*g[:4]), _seconds(*g[4:])
        if ed < st:
            raise SubtitleError(p, f"the cue ends ({ed:.3f} s) before it starts ({st:.3f} s)",
                                line=block_start + timing + 1)
        words = " ".join(_TAGS.sub("", ln).strip() for ln in block[timing + 1:]).strip()
        if words:
            out.append(Subtitle(st, ed, words))
    return out


def find_subtitles(video: Path) -> Path | None:
    """The subtitle file beside a video with the same stem (``a.mp4`` -> ``a.srt`` or ``a.vtt``)."""
    for suffix in SUBTITLE_SUFFIXES:
        for cand in (video.with_suffix(suffix), video.with_suffix(suffix.upper())):
            if cand.is_file():
                return cand
    return None


def clip_texts(subtitles: list[Subtitle], n_clips: int, clip_seconds: float) -> list[str]:
    """Per clip, the subtitle lines that overlap it, joined in time order ("" where none does)."""
    out: list[list[str]] = [[] for _ in range(n_clips)]
    for s in sorted(subtitles, key=lambda s: (s.start, s.end)):
        first = int(s.start // clip_seconds)
        last = max(first, int(-(-s.end // clip_seconds)) - 1)
        for c in range(max(first, 0), min(last, n_clips - 1) + 1):
            out[c].append(s.text)
    return [" ".join(t) for t in out]
