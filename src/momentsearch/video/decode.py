"""Decode a video file into clips of sampled frames, streaming, with PyAV (anything ffmpeg reads).

``clip_frames(path, clip_seconds, fps, size)`` walks the file once and yields, clip by clip, the
frames sampled in it as one ``(n, H, W, 3)`` uint8 array; memory holds one clip's frames, whatever
the video's length. Sampling follows the frames' own timestamps, so a variable frame rate is
sampled at the asked rate too: a frame is taken when its time reaches the next sample time
(``k / fps``), and it belongs to clip ``floor(t / clip_seconds)``. A clip that no frame falls in
(a gap in a variable-rate stream) repeats the last frame seen. Rotation metadata (the display
matrix) is applied, so frames come out as a player shows them. Frames are scaled by ffmpeg's
swscale to ``size`` (width, height; the aspect ratio is not kept: the encoders say what they want).

Errors are :class:`~momentsearch.errors.VideoDecodeError` naming the file: not a media file, no
video stream (audio only), a video stream with no decoder (an unknown or damaged codec id), nothing
decodable (zero-length or truncated before its first frame), or a decode error part-way (the file is
not indexed half). A still image (a file ffmpeg reads with an image demuxer: JPEG, PNG, WebP...; or a GIF
of one frame) is not a video: :class:`StillImageError`, unless ``stills=True`` takes it as one clip.
An animated GIF is a video.

**Bounded** (:class:`DecodeLimits`, each configurable): a damaged file can neither hang nor exhaust
memory. A frame larger than ``max_pixels`` is refused from the stream header before anything is
decoded and again per frame before it is converted; a timestamp or frame duration past
``max_duration`` (a damaged timestamp claiming years), or a gap between frames past ``max_gap``, is
refused before any clip is made for it;
decoding stops with an error past ``max_frames`` decoded frames or ``max_seconds`` of wall time
(checked after every frame).
"""

from __future__ import annotations

import contextlib
import math
import re
import reprlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from momentsearch.data.corpus import Subtitle
from momentsearch.errors import VideoDecodeError
from momentsearch.readers import is_finite_number


def import_av() -> Any:
    try:
        import av
    except ImportError:
        raise VideoDecodeError("decoding videos needs PyAV: pip install 'momentsearch[video]' (or pip install av)") from None
    # No Python log callback: with one, a decoder thread that logs waits for the GIL while the main thread
    # holds it in avcodec_free_context waiting for that thread (a deadlock seen here in 3 of 5 runs of
    # probe). Errors still come back as exceptions.
    av.logging.set_level(None)
    return av


class StillImageError(VideoDecodeError):
    """A still image where a video was expected (skipped by ingest unless it is asked to take stills)."""


IMAGE_DEMUXERS = ("image2", "image2pipe")  # and every ``*_pipe`` demuxer (jpeg_pipe, png_pipe, webp_pipe...)


def _is_image_format(name: str) -> bool:
    return any(n in IMAGE_DEMUXERS or n.endswith("_pipe") for n in name.split(","))


def _still(path: Path, what: str) -> StillImageError:
    return StillImageError(f"{path}: a still image ({what}), not a video; skipped (ingest --stills takes each "
                           "photo as a one-clip item)")


@dataclass(frozen=True)
class VideoInfo:
    """What the container says, before decoding. ``duration`` may be None where the file does not say."""

    duration: float | None
    fps: float | None  # the stream's average frame rate
    width: int
    height: int
    rotation: int  # degrees, from the display matrix of the first frame (0, 90, 180, 270)
    codec: str
    container: str


@dataclass(frozen=True)
class DecodeLimits:
    """What one file may cost. The defaults pass any ordinary video: 48 h of timeline, 5 million decoded
    frames (46 h at 30 fps), 8192 x 8192 pixels a frame, 2 h of wall time a file, 10 minutes without a
    frame (a gap that long, filled by repeating the last frame, is taken for a damaged timestamp: a 2 s
    file whose one timestamp claims 36 h would otherwise be ingested as 36 h of one frame)."""

    max_duration: float = 48 * 3600.0  # seconds of video timeline
    max_frames: int = 5_000_000  # decoded frames
    max_pixels: int = 8192 * 8192  # width x height of a frame
    max_seconds: float = 7200.0  # wall-clock seconds decoding one file
    max_gap: float = 600.0  # seconds between two frames (or one frame's duration): more is damaged timestamps

    def __post_init__(self) -> None:
        for name in ("max_duration", "max_frames", "max_pixels", "max_seconds", "max_gap"):
            v = getattr(self, name)
            if not (is_finite_number(v) and v > 0):
                raise ValueError(f"DecodeLimits.{name} must be a positive number, got {reprlib.repr(v)}")


@dataclass
class DecodeStats:
    """Filled while :func:`clip_frames` runs; complete once it is exhausted."""

    duration: float = 0.0  # seconds: the end of the last decoded frame
    n_frames: int = 0  # decoded
    n_sampled: int = 0
    rotation: int = 0
    width: int = 0
    height: int = 0
    fps: float | None = None
    codec: str = ""


def _open(path: Path) -> Any:
    av = import_av()
    if not path.is_file():
        raise VideoDecodeError(f"{path}: not a file")
    if path.stat().st_size == 0:
        raise VideoDecodeError(f"{path}: zero-length file")
    try:
        return av.open(str(path), metadata_errors="ignore")
    except (av.FFmpegError, UnicodeDecodeError, ValueError, OSError) as e:
        raise VideoDecodeError(f"{path}: not a video ffmpeg can open ({_why(e)})") from None


@contextlib.contextmanager
def open_media(path: Path) -> Iterator[Any]:
    """The opened container (closed after), or a :class:`VideoDecodeError` naming the file."""
    container = _open(path)
    try:
        yield container
    finally:
        container.close()


def _why(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    text = re.sub(r"^\[Errno -?\d+\] ", "", text.splitlines()[0])
    return re.sub(r": '[^']*'", "", text, count=1)[:200]  # the path, which the message names already


def video_stream(path: Path, container: Any) -> Any:
    if not container.streams.video:
        kinds = sorted({s.type for s in container.streams}) or ["none"]
        container.close()
        raise VideoDecodeError(f"{path}: holds no video stream (streams: {', '.join(kinds)})")
    stream = container.streams.video[0]
    if stream.codec_context is None:  # PyAV found no decoder for the stream's codec id
        container.close()
        raise VideoDecodeError(f"{path}: its video stream has no decoder (its codec id is unknown to ffmpeg, or the "
                               "header is damaged)")
    stream.thread_type = "AUTO"
    return stream


def _check_size(path: Path, width: int, height: int, limits: DecodeLimits, where: str) -> None:
    if width * height > limits.max_pixels:
        raise VideoDecodeError(f"{path}: {where} says {width}x{height} pixels, over the limit of {limits.max_pixels:,} "
                               "(DecodeLimits.max_pixels); a damaged header, or a video too large to ingest")


def probe(path: str | Path) -> VideoInfo:
    """The container's description of its first video stream (no frame decoded but the first)."""
    p = Path(path)
    c = _open(p)
    try:
        s = video_stream(p, c)
        dur = None
        if s.duration is not None and s.time_base is not None:
            dur = float(s.duration * s.time_base)
        elif c.duration is not None:
            dur = c.duration / 1_000_000
        rate = float(s.average_rate) if s.average_rate else None
        rotation = 0
        try:
            first = next(c.decode(s), None)
            rotation = rotation_of(first) if first is not None else 0
        except import_av().FFmpegError:
            pass
        return VideoInfo(dur, rate, int(s.codec_context.width or 0), int(s.codec_context.height or 0), rotation,
                         s.codec_context.name, c.format.name)
    finally:
        c.close()


def rotation_of(frame: Any) -> int:
    """Degrees to turn counter-clockwise for display (0, 90, 180, 270)."""
    r = int(round(getattr(frame, "rotation", 0) or 0)) % 360
    return (r + 45) // 90 * 90 % 360


def _to_rgb(frame: Any, size: tuple[int, int], rotation: int) -> np.ndarray:
    w, h = size
    if rotation in (90, 270):  # scale to the turned size, then turn
        img = frame.to_ndarray(width=h, height=w, format="rgb24")
    else:
        img = frame.to_ndarray(width=w, height=h, format="rgb24")
    if rotation:
        img = np.ascontiguousarray(np.rot90(img, k=rotation // 90))
    return img


def clip_frames(path: str | Path, clip_seconds: float, fps: float, size: tuple[int, int],
                stats: DecodeStats | None = None, limits: DecodeLimits | None = None,
                stills: bool = False) -> Iterator[tuple[int, np.ndarray]]:
    """Yield ``(clip index, frames (n, H, W, 3) uint8)`` for clips 0, 1, ... in order, every clip of
    the video once (the last one may be partial). ``size`` is (width, height); ``limits``: the file's
    budget (:class:`DecodeLimits`; default: its defaults). A still image raises :class:`StillImageError`,
    or with ``stills`` is one clip of ``clip_seconds`` holding its one frame."""
    if clip_seconds <= 0 or fps <= 0:
        raise ValueError(f"clip_seconds and fps must be > 0, got {clip_seconds} and {fps}")
    av = import_av()
    p = Path(path)
    lim = limits or DecodeLimits()
    st = stats if stats is not None else DecodeStats()
    started = time.monotonic()
    c = _open(p)
    try:
        s = video_stream(p, c)
        image = _is_image_format(c.format.name)
        if image and not stills:
            raise _still(p, f"{s.codec_context.name}, read by ffmpeg's {c.format.name} demuxer")
        _check_size(p, int(s.codec_context.width or 0), int(s.codec_context.height or 0), lim, "the stream header")
        st.codec = s.codec_context.name
        st.fps = float(s.average_rate) if s.average_rate else None
        default_step = 1.0 / st.fps if st.fps else 1.0 / 25
        tb = float(s.time_base) if s.time_base else None
        t0: float | None = None
        next_sample = 0.0
        current: list[np.ndarray] = []
        clip = 0
        last: np.ndarray | None = None
        last_t = -math.inf
        try:
            for frame in c.decode(s):
                if frame.pts is not None and tb is not None:
                    t_abs = frame.pts * tb
                    t0 = t_abs if t0 is None else t0
                    t = t_abs - t0
                else:  # no timestamps: count frames at the average rate
                    t = st.n_frames * default_step
                if t < last_t:  # a reordered or repeated timestamp: keep time monotone
                    t = last_t
                _check_size(p, frame.width, frame.height, lim, f"frame {st.n_frames + 1}")
                if st.n_frames == 0:
                    st.rotation = rotation_of(frame)
                    st.width, st.height = ((frame.height, frame.width) if st.rotation in (90, 270)
                                           else (frame.width, frame.height))
                st.n_frames += 1
                dur = float(frame.duration * tb) if (frame.duration and tb) else default_step
                _check_budget(p, st, float(t), dur, float(last_t), lim, started)
                st.duration = max(st.duration, t + dur)
                last_t = t
                if t + 1e-9 < next_sample:
                    continue
                img = _to_rgb(frame, size, st.rotation)
                k = int(t // clip_seconds)
                while clip < k:  # close finished clips (an empty one repeats the last frame)
                    if current or last is not None:
                        yield clip, np.stack(current) if current else last[None]
                    current = []
                    clip += 1
                current.append(img)
                last = img
                st.n_sampled += 1
                next_sample = (math.floor(t * fps + 1e-9) + 1) / fps
        except av.FFmpegError as e:
            raise VideoDecodeError(f"{p}: decoding failed after {st.n_frames} frames ({_why(e)}); the file is "
                                   "corrupt or truncated") from None
        if st.n_frames == 0:
            raise VideoDecodeError(f"{p}: no frame could be decoded (empty or truncated video stream)")
        if st.n_frames == 1 and (image or c.duration is None):  # a photo, or a GIF of one frame
            if not stills:
                raise _still(p, f"one {st.codec} frame")
            st.duration = clip_seconds
        n_clips = max(1, math.ceil(st.duration / clip_seconds - 1e-9))
        while clip < n_clips:
            yield clip, np.stack(current) if current else last[None]  # type: ignore[index]
            current = []
            clip += 1
    finally:
        c.close()


def _check_budget(path: Path, st: DecodeStats, t: float, dur: float, last_t: float, lim: DecodeLimits,
                  started: float) -> None:
    if not (math.isfinite(t) and math.isfinite(dur) and t + dur <= lim.max_duration):
        raise VideoDecodeError(f"{path}: frame {st.n_frames} is stamped at {t:.0f} s (+{dur:.0f} s), past the limit of "
                               f"{lim.max_duration:.0f} s (DecodeLimits.max_duration): damaged timestamps")
    gap = max(dur, t - last_t if math.isfinite(last_t) else 0.0)
    if gap > lim.max_gap:
        raise VideoDecodeError(f"{path}: {gap:.0f} s without a frame at frame {st.n_frames} ({t:.0f} s), over the "
                               f"limit of {lim.max_gap:.0f} s (DecodeLimits.max_gap): damaged timestamps")
    if st.n_frames > lim.max_frames:
        raise VideoDecodeError(f"{path}: over {lim.max_frames:,} frames decoded (DecodeLimits.max_frames); stopped")
    if time.monotonic() - started > lim.max_seconds:
        raise VideoDecodeError(f"{path}: decoding took over {lim.max_seconds:.0f} s (DecodeLimits.max_seconds) after "
                               f"{st.n_frames} frames; stopped")


def n_clips_for(duration: float, clip_seconds: float) -> int:
    """Clips of a video on a grid of ``clip_seconds``: the last one may be partial."""
    return max(1, math.ceil(duration / clip_seconds - 1e-9))


def frame_at(path: str | Path, seconds: float, width: int = 320) -> np.ndarray:
    """The frame shown at ``seconds`` (from the first frame; the last frame past the end), RGB uint8,
    ``width`` wide at the video's display aspect (rotation applied), for thumbnails. Whatever goes wrong
    in the file is a :class:`VideoDecodeError` naming it."""
    p = Path(path)
    try:
        return _frame_at(p, seconds, width)
    except (VideoDecodeError, MemoryError, RecursionError):
        raise
    except Exception as e:  # noqa: BLE001 - a damaged file seeks or decodes in ways no check foresaw
        raise VideoDecodeError(f"{p}: no frame near {seconds:.1f} s could be read ({type(e).__name__}: "
                               f"{_why(e)}); the file is probably damaged") from None


def _frame_at(p: Path, seconds: float, width: int) -> np.ndarray:
    av = import_av()
    c = _open(p)
    try:
        s = video_stream(p, c)
        tb = float(s.time_base) if s.time_base else None
        start = s.start_time or 0
        if tb and seconds > 0:
            c.seek(int(start + seconds / tb), stream=s, backward=True)
        chosen = None
        try:
            for frame in c.decode(s):
                t = (frame.pts - start) * tb if (frame.pts is not None and tb) else 0.0
                if chosen is not None and t > seconds + 1e-6:
                    break
                chosen = frame
        except av.FFmpegError as e:
            if chosen is None:
                raise VideoDecodeError(f"{p}: no frame could be decoded near {seconds:.1f} s ({_why(e)})") from None
        if chosen is None:
            raise VideoDecodeError(f"{p}: no frame at or before {seconds:.1f} s")
        _check_size(p, chosen.width, chosen.height, DecodeLimits(), "a frame")
        rot = rotation_of(chosen)
        w, h = (chosen.height, chosen.width) if rot in (90, 270) else (chosen.width, chosen.height)
        size = (width, max(2, int(round(width * h / max(w, 1))) // 2 * 2))
        return _to_rgb(chosen, size, rot)
    finally:
        c.close()


def embedded_subtitles(path: str | Path) -> tuple[str, list[Any]] | None:
    """The first text subtitle stream inside the container, as (its codec, cues), times from the video's
    start; None when the file has none. Bitmap streams (DVD, PGS) hold no text and are passed over."""

    p = Path(path)
    c = _open(p)
    try:
        subs = [s for s in c.streams.subtitles if s.codec_context is not None
                and s.codec_context.name in TEXT_SUBTITLE_CODECS]
        if not subs:
            return None
        s = subs[0]
        video = c.streams.video[0] if c.streams.video else None
        t0 = float(video.start_time * video.time_base) if (video is not None and video.start_time is not None
                                                          and video.time_base) else 0.0
        out = []
        for packet in c.demux(s):
            if packet.pts is None or packet.time_base is None:
                continue
            start = float(packet.pts * packet.time_base) - t0
            end = start + float((packet.duration or 0) * packet.time_base)
            for sub in packet.decode():
                text = " ".join(bytes(getattr(sub, "dialogue", b"") or b"").decode("utf-8", "replace").split())
                if text and math.isfinite(start) and math.isfinite(end):
                    out.append(Subtitle(max(0.0, start), max(0.0, start, end), text))
        return s.codec_context.name, out
    finally:
        c.close()


TEXT_SUBTITLE_CODECS = ("mov_text", "subrip", "srt", "webvtt", "ass", "ssa", "text")
