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
from typing import Any

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
    written: Transcript | None = None  # text read on screen (ingest --read-text), when any was
    written_feats: np.ndarray | None = None  # (n_clips, 384): MiniLM of each clip's text on screen


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
                 limits: DecodeLimits | None = None, stills: bool = False, speech: str = "none",
                 read_text: bool = False, ocr_weights: str | None = None):
        self.enc, self.clip_seconds, self.fps, self.batch_clips = encoder, clip_seconds, fps, batch_clips
        self.limits = limits or DecodeLimits()
        self.stills = stills
        self.sub_encoder: MiniLMSentenceEncoder | None = None
        self.speech, self.read_text, self.ocr_weights = speech, read_text, ocr_weights
        self.recogniser: Any = None  # made when first needed (on the Ray actor, for a Ray ingest)
        self.reader: Any = None

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
        if said is None and self.speech != "none":
            said = self._hear(path, warnings)
        written = self._read(path, st.duration, warnings) if self.read_text else None
        sub = self._sentences(said, len(feats))
        return Encoded(feats, sub, st, transcript=said, warnings=warnings or None, written=written,
                       written_feats=self._sentences(written, len(feats)))

    def _sentences(self, cues: Transcript | None, n: int) -> np.ndarray | None:
        if cues is None or not cues.cues:
            return None
        self.sub_encoder = self.sub_encoder or MiniLMSentenceEncoder()
        return self.sub_encoder.encode(clip_texts(cues.cues, n, self.clip_seconds))

    def _hear(self, path: Path, warnings: list[str]) -> Transcript | None:
        """What is said, recognised from the audio track (None: no audio, nothing recognised, or it failed)."""
        from momentsearch.video.audio import audio_chunks
        from momentsearch.video.speech import create_recogniser, cues_from_words

        self.recogniser = self.recogniser or create_recogniser(self.speech)  # a SpeechError: the whole ingest's
        try:
            cues = cues_from_words(self.recogniser.words(audio_chunks(path, self.limits)))
        except MomentSearchError as e:  # AudioDecodeError, SpeechError: this file's speech only
            warnings.append(f"{e}; {path.name} was ingested without recognised speech")
            return None
        except (MemoryError, RecursionError):
            raise
        except Exception as e:  # noqa: BLE001 - a damaged audio stream reaching the decoder or the recogniser
            warnings.append(f"{path}: its audio could not be recognised ({type(e).__name__}: {str(e)[:160]}); "
                            "ingested without it")
            return None
        if not cues:
            return None
        ident = self.recogniser.identity()
        return Transcript(f"{path.name} (speech: {ident['name']})", f"asr:{ident['name']}", cues)

    def _read(self, path: Path, duration: float, warnings: list[str]) -> Transcript | None:
        """The text on screen as cues (None where none was read)."""
        from momentsearch.video.ocr.reader import READER_NAME, TextReader
        from momentsearch.video.written import written_cues

        self.reader = self.reader or TextReader(self.ocr_weights)
        try:
            cues = written_cues(path, self.reader, self.clip_seconds, duration, self.limits, stills=self.stills)
        except MomentSearchError as e:
            warnings.append(f"{e}; {path.name} was ingested without its text on screen")
            return None
        except (MemoryError, RecursionError):
            raise
        except Exception as e:  # noqa: BLE001 - the pictures decoded once; a second pass failing costs only the text
            warnings.append(f"{path}: its text on screen could not be read ({type(e).__name__}: {str(e)[:160]}); "
                            "ingested without it")
            return None
        return Transcript(f"{path.name} (text on screen)", f"ocr:{READER_NAME}", cues) if cues else None


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
