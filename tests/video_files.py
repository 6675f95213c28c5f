"""Video files written by the tests: codecs, containers, rotation, variable frame rate, audio only, broken."""

from __future__ import annotations

import fractions
import struct
from pathlib import Path

import numpy as np

av = __import__("pytest").importorskip("av")


def frame(i: int, w: int, h: int) -> np.ndarray:
    """Left half white, a red band on top, a grey level that moves with i."""
    img = np.zeros((h, w, 3), np.uint8)
    img[:, : w // 2] = 255
    img[: max(2, h // 8), :, 0] = 200
    img[h // 2:, w // 2:] = (i * 7) % 256
    return img


def write_video(path: Path, fmt: str = "mp4", codec: str = "libx264", seconds: float = 2.0, rate: int = 10,
                w: int = 48, h: int = 32, times: list[float] | None = None, black: bool = False) -> Path:
    """``times``: frame times in seconds (a variable frame rate); default ``seconds * rate`` frames at ``rate``.
    ``black``: every frame black."""
    n = len(times) if times is not None else int(round(seconds * rate))
    with av.open(str(path), "w", format=fmt) as out:
        s = out.add_stream(codec, rate=rate)
        s.width, s.height = w, h
        s.pix_fmt = "yuvj420p" if codec == "mjpeg" else "yuv420p"
        if times is not None:
            s.codec_context.time_base = fractions.Fraction(1, 1000)
        for i in range(n):
            f = av.VideoFrame.from_ndarray(np.zeros((h, w, 3), np.uint8) if black else frame(i, w, h), format="rgb24")
            if times is not None:
                f.pts, f.time_base = int(round(times[i] * 1000)), fractions.Fraction(1, 1000)
            for p in s.encode(f):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    return path


def rotate_mp4(src: Path, dst: Path) -> Path:
    """The MP4 with its track matrix (tkhd) saying: turn 90 degrees clockwise to display, as phones write it."""
    b = bytearray(src.read_bytes())
    m = b.find(b"tkhd") + 44
    b[m: m + 36] = struct.pack(">9i", 0, 1 << 16, 0, -(1 << 16), 0, 0, 0, 0, 1 << 30)
    dst.write_bytes(bytes(b))
    return dst


def write_audio_only(path: Path) -> Path:
    with av.open(str(path), "w", format="mp4") as out:
        s = out.add_stream("aac", rate=8000)
        for i in range(10):
            fr = av.AudioFrame.from_ndarray(np.zeros((1, 1024), np.float32), format="fltp", layout="mono")
            fr.sample_rate, fr.pts = 8000, i * 1024
            for p in s.encode(fr):
                out.mux(p)
        for p in s.encode():
            out.mux(p)
    return path
