"""What is said in a video, as timed text (cues): read from the files beside it, and stored in a corpus.

**Sources**, tried in this order for ``VIDEO.ext`` (the first that reads is used; one that fails is reported
with its file and line, and the next is tried, so a bad sidecar never costs the video):

1. ``VIDEO.srt`` / ``VIDEO.vtt``: subtitles (:mod:`momentsearch.data.subtitles`);
2. ``VIDEO.json``: a speech-recognition transcript, as whisper's ``--output_format json`` writes it
   (``{"segments": [{"start": s, "end": s, "text": "..."}, ...]}``) or a bare list of such segments (what
   scripts around faster-whisper dump); other keys (``words``, ``avg_logprob``...) are ignored;
3. a text subtitle stream inside the container (mov_text in MP4, SubRip, WebVTT or ASS in MKV), read with
   PyAV (:func:`momentsearch.video.decode.embedded_subtitles`); bitmap subtitles (DVD, PGS) hold no text.

**Stored** in a corpus folder as ``transcripts/<video id>.json``: ``{"source": ..., "kind": ..., "cues":
[[start, end, text], ...]}``, read back by :func:`read_stored_transcript` (checked: times finite,
0 <= start <= end, text a string).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from momentsearch.data.corpus import Subtitle
from momentsearch.data.subtitles import SUBTITLE_SUFFIXES, read_subtitles, sidecar_text, subtitle_error
from momentsearch.errors import CorpusFolderError, SubtitleError
from momentsearch.readers import decode_text, is_finite_number, parse_json_text, read_bytes

TRANSCRIPT_SUFFIXES = (".json",)
SIDECAR_SUFFIXES = (*SUBTITLE_SUFFIXES, *TRANSCRIPT_SUFFIXES)  # files ingest never takes for videos
MAX_CUES = 1_000_000
TRANSCRIPTS = "transcripts"  # a corpus folder's sub-folder of stored transcripts
WRITTEN = "written"  # its sub-folder of the text read on screen (stored as transcripts are) and that stream's name


@dataclass(frozen=True)
class Transcript:
    """A video's cues and where they came from (``kind``: srt, vtt, whisper-json or stream:CODEC)."""

    source: str
    kind: str
    cues: list[Subtitle]

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "kind": self.kind,
                "cues": [[round(c.start, 3), round(c.end, 3), c.text] for c in self.cues]}


def sidecars(video: Path) -> list[Path]:
    """The files beside ``video`` that may hold what is said in it, in the order they are tried."""
    out = []
    for suffix in SIDECAR_SUFFIXES:
        for cand in (video.with_suffix(suffix), video.with_suffix(suffix.upper())):
            if cand != video and cand.is_file():
                out.append(cand)
                break
    return out


def _is_seconds(x: Any) -> bool:
    """A finite number of seconds below 10**12 (an int too large for a float is not)."""
    return is_finite_number(x) and abs(x) < 1e12


def _segment_error(path: Path, i: int, what: str) -> SubtitleError:
    return SubtitleError(path, f"segments[{i}]: {what} (a transcript segment is "
                               "{\"start\": seconds, \"end\": seconds, \"text\": \"...\"})")


def read_transcript_json(path: str | Path) -> list[Subtitle]:
    """The segments of a whisper-style JSON transcript, as cues (empty texts dropped)."""
    p = Path(path)
    data = parse_json_text(sidecar_text(p, "transcript"), str(p), subtitle_error(p))
    segs = data.get("segments") if isinstance(data, dict) else data
    if not isinstance(segs, list):
        raise SubtitleError(p, "not a transcript: expected whisper's JSON ({\"segments\": [...]}) or a list of "
                               "segments with start, end and text")
    if len(segs) > MAX_CUES:
        raise SubtitleError(p, f"more than {MAX_CUES:,} segments")
    out = []
    for i, s in enumerate(segs):
        if not isinstance(s, dict):
            raise _segment_error(p, i, f"a {type(s).__name__}, not an object")
        st, ed, text = s.get("start"), s.get("end"), s.get("text")
        if not (_is_seconds(st) and _is_seconds(ed)):
            raise _segment_error(p, i, "start and end must be finite numbers of seconds")
        if not 0 <= st <= ed:  # type: ignore[operator]
            raise _segment_error(p, i, f"start {st} and end {ed}: needs 0 <= start <= end")
        if not isinstance(text, str):
            raise _segment_error(p, i, "text must be a string")
        if text.strip():
            out.append(Subtitle(float(st), float(ed), " ".join(text.split())))  # type: ignore[arg-type]
    return out


def read_sidecar(path: Path) -> Transcript:
    """One sidecar file's cues (by suffix); a :class:`SubtitleError` naming the file (and line) if malformed."""
    suffix = path.suffix.lower()
    if suffix in SUBTITLE_SUFFIXES:
        return Transcript(path.name, suffix[1:], read_subtitles(path))
    return Transcript(path.name, "whisper-json", read_transcript_json(path))


def read_stored_transcript(path: Path) -> Transcript:
    """A transcript as a corpus stores it (``transcripts/<id>.json``), checked."""
    def error(message: str) -> CorpusFolderError:
        return CorpusFolderError(message if message.startswith(str(path)) else f"{path}: {message}")

    data = parse_json_text(decode_text(path, read_bytes(path, error, "transcript"), error), str(path), error)
    if not (isinstance(data, dict) and isinstance(data.get("source"), str) and isinstance(data.get("kind"), str)
            and isinstance(data.get("cues"), list)):
        raise error("a stored transcript is {\"source\": str, \"kind\": str, \"cues\": [[start, end, text], ...]}")
    cues = []
    for i, c in enumerate(data["cues"]):
        ok = (isinstance(c, list) and len(c) == 3 and _is_seconds(c[0]) and _is_seconds(c[1])
              and isinstance(c[2], str) and 0 <= c[0] <= c[1])
        if not ok:
            raise error(f"cues[{i}] must be [start, end, text] with 0 <= start <= end")
        cues.append(Subtitle(float(c[0]), float(c[1]), c[2]))
    return Transcript(data["source"], data["kind"], cues)


def cue_spans(cues: list[Subtitle], n_clips: int, clip_seconds: float) -> list[tuple[float, float] | None]:
    """Per clip, the span [first start, last end] of the cues overlapping it (None where no cue does): the
    boundaries a spoken moment takes."""
    out: list[tuple[float, float] | None] = [None] * n_clips
    for s in cues:
        first = int(s.start // clip_seconds)
        last = max(first, int(-(-s.end // clip_seconds)) - 1)
        for c in range(max(first, 0), min(last, n_clips - 1) + 1):
            cur = out[c]
            out[c] = (s.start, s.end) if cur is None else (min(cur[0], s.start), max(cur[1], s.end))
    return out
