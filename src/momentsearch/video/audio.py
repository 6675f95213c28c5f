"""A video's audio track as 16 kHz mono 16-bit samples, streamed, with PyAV: what speech recognisers read.

``audio_chunks(path)`` decodes the first audio stream packet by packet, resamples it (ffmpeg's swresample)
to 16 kHz mono s16 and yields int16 arrays; memory holds one chunk, whatever the file's length. ``None``
from :func:`has_audio` (no audio stream) is not an error: most screen recordings are silent. A stream that
cannot be decoded is an :class:`~momentsearch.errors.AudioDecodeError` naming the file, and the budget of
:class:`~momentsearch.video.decode.DecodeLimits` holds here too: at most ``max_duration`` seconds of audio
and ``max_seconds`` of wall time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from momentsearch.errors import AudioDecodeError, MomentSearchError
from momentsearch.video.decode import DecodeLimits, open_media

RATE = 16_000  # samples per second: what pocketsphinx's and Whisper's models were trained on


def has_audio(path: str | Path) -> bool:
    """Whether the file holds an audio stream with a decoder."""
    try:
        with open_media(Path(path)) as c:
            return any(s.codec_context is not None for s in c.streams.audio)
    except MomentSearchError:
        return False


def audio_chunks(path: str | Path, limits: DecodeLimits | None = None, chunk_seconds: float = 10.0
                 ) -> Iterator[np.ndarray]:
    """int16 chunks of about ``chunk_seconds`` of the first audio stream at 16 kHz mono (none: no audio)."""
    import av

    p, lim = Path(path), limits or DecodeLimits()
    started, done = time.monotonic(), 0
    with open_media(p) as container:
        streams = [s for s in container.streams.audio if s.codec_context is not None]
        if not streams:
            return
        resampler = av.AudioResampler(format="s16", layout="mono", rate=RATE)
        pending: list[np.ndarray] = []
        have = 0
        try:
            for frame in container.decode(streams[0]):
                for out in resampler.resample(frame):
                    a = out.to_ndarray().reshape(-1)
                    pending.append(a)
                    have += len(a)
                done += frame.samples / max(frame.sample_rate or RATE, 1)
                if done > lim.max_duration:
                    raise AudioDecodeError(f"{p}: over {lim.max_duration:.0f} s of audio (DecodeLimits.max_duration)")
                if time.monotonic() - started > lim.max_seconds:
                    raise AudioDecodeError(f"{p}: decoding its audio took over {lim.max_seconds:.0f} s "
                                           "(DecodeLimits.max_seconds); stopped")
                if have >= chunk_seconds * RATE:
                    yield np.concatenate(pending).astype(np.int16, copy=False)
                    pending, have = [], 0
            for out in resampler.resample(None):
                pending.append(out.to_ndarray().reshape(-1))
        except (av.FFmpegError, ValueError, OSError, EOFError) as e:
            raise AudioDecodeError(f"{p}: its audio stream could not be decoded ({str(e).strip()[:160] or type(e).__name__})"
                                   ) from None
        if pending:
            yield np.concatenate(pending).astype(np.int16, copy=False)
