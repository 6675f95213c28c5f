"""One video's work: decode it clip by clip and encode the clips (and what is said in it), or say why not.

:class:`VideoWorker` is what the serial ingest runs in-process and each Ray actor runs remotely
(:mod:`momentsearch.video.ray_ingest`); :mod:`momentsearch.video.ingest` writes what it returns. Whatever
goes wrong inside one file is that file's failure (:class:`Encoded` with an ``error``). What is said
(:mod:`momentsearch.data.transcripts`: a subtitle or transcript file beside the video, else a text
subtitle stream inside it) is read after the pictures; a source that cannot be read is a ``warning``
naming its file and line, the next source is tried, and the video is kept either way.
"""

from __future__ import annotations

import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from momentsearch.data.subtitles import clip_texts
from momentsearch.data.transcripts import Transcript, read_sidecar
from momentsearch.errors import MomentSearchError
from momentsearch.text.encoders import SENTENCE_ENCODER, MiniLMSentenceEncoder
from momentsearch.video.decode import DecodeLimits, DecodeStats, clip_frames, embedded_subtitles
from momentsearch.video.encoders import VisualEncoder

SUBTITLE_ENCODER = SENTENCE_ENCODER  # the subtitle stream: MiniLM sentence vectors of each clip's cue texts


@dataclass
class Encoded:
    """What one video's decode and encode gives: features, or the reason it was skipped."""

    feats: np.ndarray | None = None  # (n_clips, dim)
    subtitle: np.ndarray | None = None  # (n_clips, 384) when something said in the video was read
    stats: DecodeStats | None = None
    error: str | None = None
    unexpected: bool = False  # the error was not one of ours: a bug to report (the fuzz run counts these)
    transcript: Transcript | None = None
    warnings: list[str] | None = None  # sources of speech that could not be read (the video is kept)


def _unexpected(path: Path, e: Exception) -> str:
    """A person's reason for an error no check of ours caught, with where it came from."""
    tb = traceback.extract_tb(e.__traceback__)
    where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
    return (f"{path}: could not be read as a video ({type(e).__name__}{where}: {str(e)[:200] or 'no message'}); "
            "the file is probably damaged. If it plays elsewhere, please report this message")


class VideoWorker:
    """Decodes and encodes one video at a time with one visual encoder (and MiniLM for subtitles, made
    when first needed): what the serial ingest runs in-process and each Ray actor runs remotely."""

    def __init__(self, encoder: VisualEncoder, clip_seconds: float, fps: float, batch_clips: int,
                 limits: DecodeLimits | None = None, stills: bool = False):
        self.enc, self.clip_seconds, self.fps, self.batch_clips = encoder, clip_seconds, fps, batch_clips
        self.limits = limits or DecodeLimits()
        self.stills = stills
        self.sub_encoder: MiniLMSentenceEncoder | None = None

    def run(self, path: Path, sidecars: Sequence[Path] = ()) -> Encoded:
        """One file's features, or why not: whatever goes wrong inside this file is this file's failure
        (an interrupt, or memory running out, is not caught). ``sidecars``: the files beside it that may
        hold what is said (:func:`momentsearch.data.transcripts.sidecars`), in the order to try them."""
        try:
            feats, st = _encode_video(path, self.enc, self.clip_seconds, self.fps, self.batch_clips, self.limits,
                                      self.stills)
        except MomentSearchError as e:  # VideoDecodeError, StillImageError: reported, the rest goes on
            return Encoded(error=str(e))
        except (MemoryError, RecursionError):
            raise
        except Exception as e:  # noqa: BLE001 - PyAV, the codecs and our own decoding, one file at a time
            return Encoded(error=_unexpected(path, e), unexpected=True)
        said, warnings = _speech(path, sidecars)
        sub = None
        if said is not None:
            self.sub_encoder = self.sub_encoder or MiniLMSentenceEncoder()
            sub = self.sub_encoder.encode(clip_texts(said.cues, len(feats), self.clip_seconds))
        return Encoded(feats, sub, st, transcript=said, warnings=warnings or None)


def _speech(path: Path, sidecars: Sequence[Path]) -> tuple[Transcript | None, list[str]]:
    """The first source of what is said that reads (sidecars, then a subtitle stream in the file), and why
    each one before it did not."""
    warnings = []
    for f in sidecars:
        try:
            return read_sidecar(f), warnings
        except MomentSearchError as e:  # SubtitleError names the file and the line
            warnings.append(f"{e}; {path.name} was ingested without it")
    try:
        inside = embedded_subtitles(path)
    except (MemoryError, RecursionError):
        raise
    except Exception as e:  # noqa: BLE001 - the pictures decoded; a damaged subtitle stream costs only itself
        warnings.append(f"{path}: its subtitle stream could not be read ({type(e).__name__}: {str(e)[:160]}); "
                        "ingested without it")
        return None, warnings
    if inside is None:
        return None, warnings
    codec, cues = inside
    return Transcript(f"{path.name} (subtitle stream)", f"stream:{codec}", cues), warnings


def _encode_video(path: Path, enc: VisualEncoder, clip_seconds: float, fps: float, batch_clips: int,
                  limits: DecodeLimits | None = None, stills: bool = False) -> tuple[np.ndarray, DecodeStats]:
    stats = DecodeStats()
    feats: list[np.ndarray] = []
    pending: list[np.ndarray] = []
    previous: np.ndarray | None = None
    for _, frames in clip_frames(path, clip_seconds, fps, enc.frame_size, stats, limits, stills):
        pending.append(frames)
        if len(pending) >= batch_clips:
            feats.append(enc.encode(pending, previous))
            previous = pending[-1][-1]
            pending = []
    if pending:
        feats.append(enc.encode(pending, previous))
    return np.concatenate(feats), stats
