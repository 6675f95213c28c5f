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


ASS_HEADER = (b"[Script Info]\nScriptType: v4.00+\n\n[V4+ Styles]\nFormat: Name, Fontname, Fontsize, PrimaryColour, "
              b"SecondaryColour, OutlineColour, BackColour, Bold, Italic, Underline, StrikeOut, ScaleX, ScaleY, "
              b"Spacing, Angle, BorderStyle, Outline, Shadow, Alignment, MarginL, MarginR, MarginV, Encoding\n"
              b"Style: Default,Arial,16,&Hffffff,&Hffffff,&H0,&H0,0,0,0,0,100,100,0,0,1,1,0,2,10,10,10,0\n\n"
              b"[Events]\nFormat: Layer, Start, End, Style, Name, MarginL, MarginR, MarginV, Effect, Text\n")


def write_with_subtitle_stream(path: Path, cues: list[tuple[float, float, str]], fmt: str = "mp4",
                               codec: str = "mov_text", seconds: float = 4.0, rate: int = 10) -> Path:
    """An H.264 video with a text subtitle stream inside (mov_text in MP4, subrip or webvtt in MKV), as
    phones, screen recorders and muxers write them."""
    tb = fractions.Fraction(1, 1000)
    with av.open(str(path), "w", format=fmt) as out:
        v = out.add_stream("libx264", rate=rate)
        v.width, v.height, v.pix_fmt = 48, 32, "yuv420p"
        s = out.add_stream(codec)
        s.time_base = tb
        s.codec_context.subtitle_header = ASS_HEADER
        packets = []
        for st, ed, text in cues:
            raw = text.encode()
            p = av.Packet(struct.pack(">H", len(raw)) + raw if codec == "mov_text" else raw)
            p.stream, p.time_base = s, tb
            p.pts = p.dts = int(st * 1000)
            p.duration = int((ed - st) * 1000)
            packets.append((st, p))
        for i in range(int(seconds * rate)):
            for p in v.encode(av.VideoFrame.from_ndarray(frame(i, 48, 32), format="rgb24")):
                out.mux(p)
            while packets and packets[0][0] <= i / rate:
                out.mux(packets.pop(0)[1])
        for p in v.encode():
            out.mux(p)
        for _, p in packets:
            out.mux(p)
    return path


def write_hevc(path: Path, seconds: float) -> Path:
    """An HEVC (libx265) MP4, written in a child process: the x265 inside PyAV's wheel corrupts the heap when a
    process uses it a second time, or after libvpx ("corrupted size vs. prev_size", seen here every time)."""
    import subprocess
    import sys

    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); from pathlib import Path; "
            f"from video_files import write_video; write_video(Path({str(path)!r}), codec='libx265', seconds={seconds})")
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, timeout=120)
    return path


def write_user_folder(root: Path) -> Path:
    """A folder like a new user's: phone MJPEG, H.264 with an SRT, VP9 with a malformed VTT, HEVC with a whisper
    transcript, an AVI at 12.5 fps, variable frame rate, MKV and MP4 with subtitle streams, an audio-only file, a
    broken file, a JPEG photo and an animated GIF."""
    import json

    from PIL import Image

    root.mkdir(parents=True, exist_ok=True)
    write_video(root / "phone_mjpeg.mov", fmt="mov", codec="mjpeg", seconds=3.0)
    write_video(root / "kitchen_h264.mp4", seconds=6.0)
    (root / "kitchen_h264.srt").write_text("1\n00:00:00,500 --> 00:00:02,000\nwho left the milk out\n\n"
                                           "2\n00:00:03,000 --> 00:00:05,500\nthe kettle is boiling over\n")
    write_video(root / "garden_vp9.webm", fmt="webm", codec="libvpx-vp9", seconds=4.0)
    (root / "garden_vp9.vtt").write_text("WEBVTT\n\n00:00:01.000 -> 00:00:02.000\nthe roses need water\n")
    write_hevc(root / "drone_hevc.mp4", seconds=4.0)
    (root / "drone_hevc.json").write_text(json.dumps({"text": " flying over the lake", "language": "en", "segments": [
        {"id": 0, "start": 1.0, "end": 3.5, "text": " flying over the lake", "avg_logprob": -0.2}]}))
    write_video(root / "old_camcorder.avi", fmt="avi", codec="mpeg4", seconds=4.0,
                rate=fractions.Fraction(25, 2))  # type: ignore[arg-type]
    write_video(root / "screen_vfr.mp4", times=[0.0, 0.1, 0.15, 1.4, 1.45, 2.9, 3.0, 3.6])
    write_with_subtitle_stream(root / "lecture_subrip.mkv", [(0.5, 2.5, "the derivative of a constant is zero")],
                               fmt="matroska", codec="subrip")
    write_with_subtitle_stream(root / "phone_movtext.mp4", [(2.0, 3.5, "happy birthday to you")])
    write_audio_only(root / "voice_memo.m4a")
    (root / "broken.mp4").write_bytes((root / "kitchen_h264.mp4").read_bytes()[:300])
    Image.fromarray(frame(3, 48, 32)).save(root / "photo.jpg")
    frames = [Image.fromarray(frame(i * 9, 48, 32)) for i in range(12)]
    frames[0].save(root / "cat.gif", save_all=True, append_images=frames[1:], duration=100, loop=0)
    return root
