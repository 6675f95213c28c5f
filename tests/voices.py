"""Videos that speak and show text, made offline for the tests and benchmarks of ``ingest --speech`` and
``--read-text``: eSpeak NG (the library and voices ``espeakng-loader`` bundles, through ctypes) says sentences
at given times into an AAC track; PIL draws text (DejaVu Sans) into H.264 frames."""

from __future__ import annotations

import contextlib
import ctypes
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import av
import numpy as np

_LOCK = threading.Lock()
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)


@contextlib.contextmanager
def voice(words_per_minute: int = 140, name: str = "en-us") -> Iterator[Callable[[str], tuple[np.ndarray, int]]]:
    """``say(text) -> (int16 samples, rate)`` from a private copy of eSpeak NG's library, loaded for this block
    and unloaded after: the library keeps state from one sentence to the next (its samples for a sentence
    differ with what it said before, even after espeak_Terminate), so each video gets a fresh one and the same
    sentences give the same samples in any process."""
    import _ctypes

    import espeakng_loader

    with _LOCK, tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "libespeak-ng.so"
        shutil.copyfile(espeakng_loader.get_library_path(), path)
        lib = ctypes.CDLL(str(path))
        rate = lib.espeak_Initialize(2, 0, espeakng_loader.get_data_path().encode(), 0)  # synchronous output
        if rate <= 0:
            raise RuntimeError("eSpeak NG did not initialise")
        chunks: list[np.ndarray] = []

        def take(wav, n, _events):  # noqa: ANN001
            if n > 0:
                chunks.append(np.ctypeslib.as_array(wav, shape=(n,)).copy())
            return 0

        cb = _CALLBACK(take)
        lib.espeak_SetSynthCallback(cb)
        lib.espeak_SetVoiceByName(name.encode())
        lib.espeak_SetParameter(1, words_per_minute, 0)  # espeakRATE

        def say(text: str) -> tuple[np.ndarray, int]:
            chunks.clear()
            data = text.encode("utf-8") + b"\0"
            lib.espeak_Synth(data, len(data), 0, 1, 0, 0, None, None)
            lib.espeak_Synchronize()
            return (np.concatenate(chunks) if chunks else np.zeros(0, np.int16)), rate

        try:
            yield say
        finally:
            lib.espeak_Terminate()
            _ctypes.dlclose(lib._handle)


def speak(text: str, words_per_minute: int = 140, voice_name: str = "en-us") -> tuple[np.ndarray, int]:
    """(int16 samples, sample rate) of eSpeak NG saying ``text`` (a fresh voice: the same samples every time)."""
    with voice(words_per_minute, voice_name) as say:
        return say(text)


def text_frame(size: tuple[int, int], lines: list[str], colour: tuple[int, int, int] = (40, 60, 90),
               font_px: int = 22, seed: int = 0) -> np.ndarray:
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", size, colour)
    d = ImageDraw.Draw(img)
    f = ImageFont.truetype(FONT, font_px)
    for i, line in enumerate(lines):
        d.text((16, 16 + i * int(font_px * 1.8)), line, font=f, fill=(255, 255, 240))
    a = np.asarray(img).astype(np.int16)
    a += np.random.default_rng(seed).integers(-3, 4, a.shape, dtype=np.int16)
    return np.clip(a, 0, 255).astype(np.uint8)


def write_talking_video(path: Path, seconds: float, said: list[tuple[float, str]] = (),
                        shown: list[tuple[float, float, str]] = (), size: tuple[int, int] = (320, 180),
                        fps: int = 4, colour: tuple[int, int, int] = (40, 60, 90), words_per_minute: int = 140,
                        with_audio: bool = True) -> Path:
    """An MP4 of ``seconds``: ``said`` (start s, sentence) spoken into its AAC track, ``shown`` (start s, end s,
    text) drawn in its frames; no subtitles."""
    rate = 22050
    track = np.zeros(int(seconds * rate), np.float32)
    with voice(words_per_minute) as say:
        for t, sentence in said:
            wav, rate = say(sentence)
            a = int(t * rate)
            n = min(len(wav), len(track) - a)
            track[a:a + n] += wav[:n].astype(np.float32) / 32768.0
    with av.open(str(path), "w", format="mp4") as out:
        vs = out.add_stream("libx264", rate=fps)
        vs.width, vs.height, vs.pix_fmt = size[0], size[1], "yuv420p"
        vs.options = {"preset": "ultrafast", "crf": "18"}
        aus = out.add_stream("aac", rate=rate) if with_audio else None
        if aus is not None:
            aus.layout = "mono"
        for f in range(int(seconds * fps)):
            t = (f + 0.5) / fps
            lines = [text for a, b, text in shown if a <= t < b]
            img = text_frame(size, lines, colour, seed=f)
            for p in vs.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                out.mux(p)
        for p in vs.encode():
            out.mux(p)
        if aus is not None:
            step = 1024
            for i in range(0, len(track), step):
                fr = av.AudioFrame.from_ndarray(np.clip(track[None, i:i + step], -1, 1), format="fltp", layout="mono")
                fr.sample_rate, fr.pts = rate, i
                for p in aus.encode(fr):
                    out.mux(p)
            for p in aus.encode():
                out.mux(p)
    return path


def write_damaged_audio(path: Path, seconds: int = 3, fps: int = 4) -> Path:
    """An MP4 whose pictures are sound and whose AAC track is random bytes: its audio cannot be decoded."""
    from fractions import Fraction

    with av.open(str(path), "w", format="mp4") as out:
        vs = out.add_stream("libx264", rate=fps)
        vs.width, vs.height, vs.pix_fmt = 160, 96, "yuv420p"
        aus = out.add_stream("aac", rate=16000)
        aus.layout = "mono"
        aus.codec_context.open()  # the header's extradata, as a real AAC track has
        rng = np.random.default_rng(0)
        for f in range(seconds * fps):
            for p in vs.encode(av.VideoFrame.from_ndarray(text_frame((160, 96), [], seed=f), format="rgb24")):
                out.mux(p)
        for p in vs.encode():
            out.mux(p)
        for i in range(seconds * 16):
            pk = av.Packet(rng.integers(0, 256, 200, dtype=np.uint8).tobytes())
            pk.stream, pk.pts, pk.dts, pk.time_base = aus, i * 1024, i * 1024, Fraction(1, 16000)
            out.mux(pk)
    return path
