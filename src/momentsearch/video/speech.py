"""What is said, recognised from the audio track, offline: a registry of speech recognisers.

``create_recogniser(spec)`` with ``spec``:

* ``pocketsphinx``: CMU PocketSphinx 5 with the US English acoustic model, dictionary and language model its
  wheel carries (no download). The audio is cut into utterances by its voice-activity endpointer (WebRTC's
  VAD over 30 ms frames), each utterance decoded alone, so memory and latency stay bounded on any length;
  word times are its frames (10 ms) from the utterance's start.
* ``whisper:PATH_OR_NAME``: faster-whisper (CTranslate2) with a model folder you downloaded elsewhere, or
  a name found in its cache; 10-minute windows, word times from ``word_timestamps``. Better by far than
  PocketSphinx where you have the weights; nothing here downloads them.
* ``auto``: ``pocketsphinx`` (the only recogniser whose weights come with a package); ``none``: no speech.

Each returns timed :class:`Word` s; :func:`cues_from_words` checks them (finite times, 0 <= start <= end,
text a string, in time order) and groups them into cues: a new cue after a pause of ``pause`` seconds, or
at ``max_words`` words, or ``max_seconds``. Those cues are the video's transcript, as subtitles would be.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from momentsearch.data.corpus import Subtitle
from momentsearch.errors import SpeechError
from momentsearch.video.audio import RATE

MAX_WORDS = 5_000_000
FIRST_PASS_SECONDS = 60.0  # a first utterance longer than this is not decoded a second time (memory: 1.9 MB)


@dataclass(frozen=True)
class Word:
    text: str
    start: float
    end: float


class SpeechRecogniser:
    name = ""

    def identity(self) -> dict[str, Any]:
        return {"name": self.name}

    def words(self, chunks: Iterable[np.ndarray]) -> list[Word]:  # int16 chunks at 16 kHz mono
        raise NotImplementedError


class PocketSphinx(SpeechRecogniser):
    name = "pocketsphinx"

    def __init__(self) -> None:
        try:
            import pocketsphinx
        except ImportError:
            raise SpeechError("--speech pocketsphinx needs the pocketsphinx package (its English model is inside "
                              "it): pip install 'momentsearch[speech]'") from None
        self._ps = pocketsphinx
        self.decoder = pocketsphinx.Decoder(samprate=RATE, loglevel="FATAL")
        self.frame_rate = int(self.decoder.config["frate"])
        self.cmn0 = self.decoder.get_cmn()

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "version": getattr(self._ps, "__version__", "5"), "model": "en-us"}

    def words(self, chunks: Iterable[np.ndarray]) -> list[Word]:
        ep = self._ps.Endpointer(sample_rate=RATE)
        self.decoder.set_cmn(self.cmn0)  # each video starts from the model's own normalisation: its words do
        # not depend on the videos this process heard before (the same on one process or many)
        step = ep.frame_bytes
        out: list[Word] = []
        utt = _Utterance()
        rest = b""
        for chunk in chunks:
            buf = rest + np.asarray(chunk, np.int16).tobytes()
            n = len(buf) // step * step
            for i in range(0, n, step):
                self._feed(ep, ep.process(buf[i: i + step]), utt, out)
            rest = buf[n:]
        # (PocketSphinx 5.1.1's end_stream indexes past an empty buffer: found by the fuzz run)
        self._feed(ep, ep.end_stream(rest) if rest else None, utt, out, last=True)
        return out

    def _feed(self, ep: Any, speech: bytes | None, utt: _Utterance, out: list[Word], last: bool = False) -> None:
        if speech is not None:
            if not utt.open:
                self.decoder.start_utt()
                utt.open, utt.start = True, float(ep.speech_start)
            if utt.first is not None:  # kept for a second pass, up to a minute (then it is decoded once only)
                utt.first.append(speech)
                utt.first_bytes += len(speech)
                if utt.first_bytes > FIRST_PASS_SECONDS * RATE * 2:
                    utt.first = None
            self.decoder.process_raw(speech)
        if utt.open and (last or not ep.in_speech):
            self.decoder.end_utt()
            utt.open = False
            if utt.first is not None:  # the first utterance again, now that the normalisation has heard speech
                self.decoder.start_utt()
                self.decoder.process_raw(b"".join(utt.first))
                self.decoder.end_utt()
                utt.first = None
            for s in self.decoder.seg():
                w = s.word.split("(")[0]
                if w and not w.startswith(("<", "[")):
                    out.append(Word(w, round(utt.start + s.start_frame / self.frame_rate, 3),
                                    round(utt.start + (s.end_frame + 1) / self.frame_rate, 3)))


@dataclass
class _Utterance:
    """Where a video's decoding stands: inside an utterance or not, its start (s), and the first utterance's
    speech while it is kept for a second pass (None once decoded, or past ``FIRST_PASS_SECONDS``)."""

    open: bool = False
    start: float = 0.0
    first: list[bytes] | None = field(default_factory=list)
    first_bytes: int = 0


class FasterWhisper(SpeechRecogniser):
    name = "whisper"
    window = 600.0  # seconds of audio transcribed at once (Whisper reads 30 s windows within it)

    def __init__(self, model: str):
        try:
            from faster_whisper import WhisperModel
        except ImportError:
            raise SpeechError(f"--speech whisper:{model} needs faster-whisper (pip install faster-whisper) and "
                              "the model's weights on disk; or use --speech pocketsphinx") from None
        try:
            self.model = WhisperModel(model, device="cpu", compute_type="int8", local_files_only=True)
        except Exception as e:  # noqa: BLE001 - a missing or damaged model folder, reported by name
            raise SpeechError(f"whisper:{model}: cannot load the model ({type(e).__name__}: {str(e)[:200]}); give a "
                              "folder of a CTranslate2 Whisper model downloaded elsewhere (no download here)") from None
        self.source = model

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "model": Path(self.source).name or self.source}

    def words(self, chunks: Iterable[np.ndarray]) -> list[Word]:
        out: list[Word] = []
        window, pending, offset = int(self.window * RATE), [], 0.0
        for chunk in [*chunks, None]:
            if chunk is not None:
                pending.append(np.asarray(chunk, np.int16))
            if pending and (chunk is None or sum(map(len, pending)) >= window):
                audio = np.concatenate(pending).astype(np.float32) / 32768.0
                segments, _ = self.model.transcribe(audio, word_timestamps=True, language="en")
                out += [Word(w.word.strip(), offset + float(w.start), offset + float(w.end))
                        for s in segments for w in (s.words or [])]
                offset += len(audio) / RATE
                pending = []
        return out


def create_recogniser(spec: str) -> SpeechRecogniser | None:
    """``auto`` | ``pocketsphinx`` | ``whisper:PATH_OR_NAME`` | ``none`` (see the module)."""
    kind, _, arg = spec.partition(":")
    if kind == "none":
        return None
    if kind in ("auto", "pocketsphinx") and not arg:
        return PocketSphinx()
    if kind == "whisper" and arg:
        return FasterWhisper(arg)
    raise SpeechError(f"--speech {spec!r}: choose auto, pocketsphinx, whisper:PATH_OR_NAME or none")


def cues_from_words(words: Iterable[Any], pause: float = 0.6, max_words: int = 12, max_seconds: float = 6.0
                    ) -> list[Subtitle]:
    """Recognised words -> cues (see the module); a :class:`SpeechError` for words that are not timed words."""
    cues: list[Subtitle] = []
    cur: list[Word] = []
    last_end = -math.inf
    for i, w in enumerate(words):
        if i >= MAX_WORDS:
            raise SpeechError(f"the recogniser returned more than {MAX_WORDS:,} words")
        ok = (isinstance(w, Word) and isinstance(w.text, str) and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x < 1e9  # (nan and inf fail it)
            for x in (w.start, w.end)) and w.start <= w.end)
        if not ok:
            raise SpeechError(f"the recogniser's word {i} is not a timed word (text, 0 <= start <= end): {w!r:.120}")
        if w.start < last_end - 1.0:
            raise SpeechError(f"the recogniser's word {i} starts at {w.start:.2f} s, before the word ending at "
                              f"{last_end:.2f} s: words must come in time order")
        text = " ".join(w.text.split())
        if not text:
            continue
        if cur and (w.start - cur[-1].end >= pause or len(cur) >= max_words or w.end - cur[0].start > max_seconds):
            cues.append(Subtitle(cur[0].start, max(x.end for x in cur), " ".join(x.text for x in cur)))
            cur = []
        cur.append(Word(text, float(w.start), float(w.end)))
        last_end = max(last_end, w.end)
    if cur:
        cues.append(Subtitle(cur[0].start, max(x.end for x in cur), " ".join(x.text for x in cur)))
    return cues
