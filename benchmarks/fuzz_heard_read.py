"""The fuzz run's readers of issue 72: the audio track (``video.audio``), a recogniser's words
(``video.speech.cues_from_words``) and the text reader's lines (``video.written.cues_from_lines``).

* ``audio-track``: a 3 s MP4 that speaks and shows text (``tests/voices.py``), damaged like the video fuzzer
  damages files (element sizes, types, codec ids, timestamps, truncation, bytes; ``fuzz_video_mutations``); then
  what ``ingest --speech`` does with its audio: ``has_audio``, every chunk of ``audio_chunks`` at 16 kHz (with a
  5 s budget), and, for one mutant in 20 (it takes 0.3 s where decoding takes 20 ms), the chunks through
  PocketSphinx's endpointer and decoder when they hold at most 10 s.
* ``recognised-words``: a recogniser's words as JSON ``[[text, start, end], ...]`` (what the whisper and
  PocketSphinx wrappers make from their results), mutated as text; each entry of three becomes a ``Word``
  whatever its types, anything else is passed as it is; then cues, their clip texts and spans.
* ``text-lines``: per clip, the lines the text reader returned ``[[text, confidence, [x0, y0, x1, y1]], ...]``,
  mutated as text, each entry of three a ``TextLine``; then the cues of the text on screen.

A JSON text that no longer parses is the harness's, not an outcome (the recognisers hand over objects, not
text); everything after parsing counts.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

WORDS = [["the", 0.5, 0.7], ["red", 0.72, 1.0], ["door", 1.02, 1.4], ["opens", 2.1, 2.5]]
LINES = [[["Exit", 0.97, [10, 10, 60, 30]]], [["Exit", 0.9, [10, 10, 60, 30]], ["Sale today", 0.6, [5, 50, 90, 70]]],
         [], [["Sa1e today", 0.4, [5, 50, 90, 70]]]]
_RECOGNISER: list[Any] = []


def heard_fixture(root: Path) -> None:
    from voices import write_talking_video

    root.mkdir(parents=True, exist_ok=True)
    write_talking_video(root / "talking.mp4", 3, said=[(0.3, "the red door opens")], shown=[(0.0, 2.0, "Exit")],
                        size=(96, 64))
    (root / "words.json").write_text(json.dumps(WORDS))
    (root / "lines.json").write_text(json.dumps(LINES))


def _audio_mutant(work: Path, rng: random.Random) -> str:
    from benchmarks.fuzz_video_mutations import damage

    path = work / "heard" / "talking.mp4"
    data, how = damage(path.read_bytes(), "mp4", rng)
    path.write_bytes(data)
    return how


def _audio(folder: Path) -> None:
    from momentsearch.video.audio import audio_chunks, has_audio
    from momentsearch.video.decode import DecodeLimits
    from momentsearch.video.speech import PocketSphinx, cues_from_words

    path = folder / "heard" / "talking.mp4"
    has_audio(path)
    chunks = list(audio_chunks(path, DecodeLimits(max_seconds=5.0), chunk_seconds=1.0))
    if not _RECOGNISER:
        _RECOGNISER.extend([PocketSphinx(), 0])
    _RECOGNISER[1] += 1
    if _RECOGNISER[1] % 20 == 1 and sum(len(c) for c in chunks) <= 10 * 16_000:
        cues_from_words(_RECOGNISER[0].words(chunks))


def _parsed(path: Path) -> Any:
    try:
        return json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _words(folder: Path) -> None:
    from momentsearch.data.subtitles import clip_texts
    from momentsearch.data.transcripts import cue_spans
    from momentsearch.video.speech import Word, cues_from_words

    data = _parsed(folder / "heard" / "words.json")
    if not isinstance(data, list):
        return
    cues = cues_from_words([Word(*w) if isinstance(w, list) and len(w) == 3 else w for w in data])
    clip_texts(cues, 4, 1.0)
    cue_spans(cues, 4, 1.0)


def _lines(folder: Path) -> None:
    from momentsearch.video.ocr.reader import TextLine
    from momentsearch.video.written import cues_from_lines

    data = _parsed(folder / "heard" / "lines.json")
    if not isinstance(data, list):
        return
    per_clip = [[TextLine(*x) if isinstance(x, list) and len(x) == 3 else x for x in clip]
                if isinstance(clip, list) else clip for clip in data]
    cues_from_lines(per_clip, 2.0, 8.0)


def heard_targets(target: Any) -> list[Any]:
    """The three targets, as ``fuzz_targets.Target`` s (passed in: that module imports this one)."""
    return [target("audio-track", "heard/talking.mp4", _audio, _audio_mutant, text=False),
            target("recognised-words", "heard/words.json", _words),
            target("text-lines", "heard/lines.json", _lines)]
