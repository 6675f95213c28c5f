"""Keep a moment as a file: :func:`export_moment` cuts ``[start, end)`` seconds of a video into an MP4 of its own.

* **Exact to the frame.** Every kept frame is re-encoded (H.264, yuv420p, at most the source's size; and the
  audio as AAC), so the cut does not snap to the source's key frames: the file opens on the frame shown at
  ``start`` and ends with the last frame that starts before ``end``. :class:`ExportedClip` reports the source
  times of the first and last frames kept, so a caller can check it. The audio is trimmed to the sample.
* **Streamed.** Frames go from the decoder to the encoder one at a time, so a long moment never sits in memory
  whole. A path gets an MP4 with its index at the front (``+faststart``). A stream (any object with ``write``,
  such as an HTTP response) gets a fragmented MP4, which needs no seek back. :func:`stream_moment` yields
  such a file in chunks, encoding in a thread.
* **Cues.** The cues said during the moment, shifted to the new start and clipped to it, as SRT or WebVTT
  (:func:`moment_cues`). They go beside the file, not inside it: most players read them there.

Times are seconds from the video's first frame, as ingest and the index count them. A span that is empty, lies
outside the video or is longer than ``max_seconds`` is a :class:`~momentsearch.errors.QueryError` that says so.
"""

from __future__ import annotations

import fractions
import queue
import re
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from momentsearch.errors import QueryError, VideoDecodeError
from momentsearch.video.decode import import_av, open_media, probe, video_stream

AAC_RATES = (96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000)
OUT_TB = fractions.Fraction(1, 90_000)  # the output's video time base (MPEG's clock)
FRAGMENTED = {"movflags": "frag_keyframe+empty_moov+default_base_moof"}
REENCODED = "all"  # what is re-encoded: every kept frame and sample (said in ExportedClip and the docs)


@dataclass(frozen=True)
class ExportedClip:
    """What :func:`export_moment` wrote. ``first_frame`` / ``last_frame``: the source times (s) of the first and
    last video frames kept (the first is the frame shown at ``start``, so it may begin up to one frame before it);
    ``audio_seconds``: the audio kept; ``reencoded``: ``"all"``, every frame and sample."""

    start: float
    end: float
    frames: int
    first_frame: float | None
    last_frame: float | None
    audio_seconds: float
    width: int
    height: int
    reencoded: str = REENCODED


def clip_name(video_id: str, start: float, end: float, suffix: str = ".mp4") -> str:
    """``VIDEO_12.50-17.00.mp4``: the video id (characters unsafe in a file name replaced) and the times."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", video_id).strip("._") or "video"
    return f"{safe[:120]}_{start:.2f}-{end:.2f}{suffix}"


def check_span(start: Any, end: Any, duration: float | None, max_seconds: float | None = None) -> tuple[float, float]:
    """(start, end) as floats, or a :class:`QueryError` a user can act on."""
    for name, x in (("start", start), ("end", end)):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not np.isfinite(x):
            raise QueryError(f"{name} must be a number of seconds, got {str(x)[:40]!r}")
    s, e = float(start), float(end)
    if s < 0:
        raise QueryError(f"start must be >= 0 s, got {s:g}")
    if e <= s:
        raise QueryError(f"end ({e:g} s) must be after start ({s:g} s)")
    if duration is not None and s >= duration:
        raise QueryError(f"start {s:g} s is past the video's end ({duration:.2f} s)")
    if duration is not None and e > duration + 0.05:
        raise QueryError(f"end {e:g} s is past the video's end ({duration:.2f} s)")
    if max_seconds is not None and e - s > max_seconds:
        raise QueryError(f"the moment is {e - s:.1f} s long; at most {max_seconds:g} s may be exported at once")
    return s, e


def moment_cues(cues: Sequence[Any], start: float, end: float, fmt: str = "srt") -> str:
    """The cues (``.start``, ``.end``, ``.text``) overlapping ``[start, end)``, shifted so ``start`` is 0 and
    clipped to the moment, as SRT or WebVTT (``fmt``: ``srt`` or ``vtt``)."""
    if fmt not in ("srt", "vtt"):
        raise QueryError(f"cues are written as srt or vtt, not {fmt!r}")
    sep = "," if fmt == "srt" else "."

    def stamp(t: float) -> str:
        ms = int(round(max(t, 0.0) * 1000))
        return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}{sep}{ms % 1000:03d}"

    out = ["WEBVTT", ""] if fmt == "vtt" else []
    n = 0
    for c in cues:
        a, b = max(float(c.start), start), min(float(c.end), end)
        if b <= a:
            continue
        n += 1
        text = str(c.text).replace("\r", "").replace("-->", "->").strip() or "..."
        out += ([str(n)] if fmt == "srt" else []) + [f"{stamp(a - start)} --> {stamp(b - start)}", text, ""]
    return "\n".join(out) + ("\n" if out else "")


def _even(x: int) -> int:
    return max(2, x - x % 2)


def export_moment(path: str | Path, start: float, end: float, out: str | Path | BinaryIO,
                  max_seconds: float | None = None, duration: float | None = None, max_width: int | None = None,
                  crf: int = 23, preset: str = "veryfast") -> ExportedClip:
    """Cut ``[start, end)`` seconds of the video at ``path`` into ``out`` (a path: MP4 with the index in front; a
    writable stream: fragmented MP4), re-encoding every kept frame (H.264) and sample (AAC). ``duration``: the
    video's length as ingest recorded it (checked against); ``max_width``: scale wider videos down."""
    s, e = check_span(start, end, duration, max_seconds)
    src = Path(path)
    av = import_av()
    try:
        with open_media(src) as c:
            return _cut(av, src, c, s, e, out, max_width, crf, preset)
    except (QueryError, VideoDecodeError):
        raise
    except (av.FFmpegError, ValueError, OSError, EOFError, RuntimeError) as err:
        raise VideoDecodeError(f"{src}: the moment {s:g}-{e:g} s could not be exported "
                               f"({type(err).__name__}: {str(err).strip()[:160]})") from None


def _cut(av: Any, src: Path, c: Any, s: float, e: float, out: str | Path | BinaryIO, max_width: int | None,
         crf: int, preset: str) -> ExportedClip:
    vs = video_stream(src, c)
    auds = [a for a in c.streams.audio if a.codec_context is not None]
    tb = vs.time_base or fractions.Fraction(1, 1000)
    v0 = vs.start_time or 0
    if s > 0:
        c.seek(int(v0 + s / tb), stream=vs, backward=True)
    opts = {"movflags": "+faststart"} if isinstance(out, (str, Path)) else dict(FRAGMENTED)
    dst = av.open(str(out) if isinstance(out, (str, Path)) else out, "w", format="mp4", options=opts)
    video = _VideoOut(av, dst, vs, probe(src), max_width, crf, preset, fragmented="empty_moov" in opts["movflags"])  # the streams are added before any packet
    audio = _AudioOut(av, dst, auds[0], s, e) if auds else None
    prev: tuple[float, Any] | None = None
    ended = False
    for packet in c.demux([vs] + ([auds[0]] if audio else [])):
        if packet.stream.index != vs.index:
            for f in packet.decode():
                audio.add(f)  # type: ignore[union-attr]
            continue
        if ended:  # past the end: read on only for the audio interleaved behind (at most a few seconds)
            if packet.pts is not None and float((packet.pts - v0) * tb) > e + 5.0:
                break
            continue
        for frame in packet.decode():
            t = float((frame.pts - v0) * tb) if frame.pts is not None else 0.0
            if t <= s + 1e-6:
                prev = (t, frame)  # the latest frame at or before start: the one shown at start
                continue
            if prev is not None:
                video.add(prev[1], prev[0], s)
                prev = None
            if t >= e - 1e-6:
                ended = True
                break
            video.add(frame, t, s)
        if ended and (audio is None or audio.done):
            break
    if prev is not None:  # the video ends at or before start's frame: that frame alone
        video.add(prev[1], prev[0], s)
    if not video.frames:
        dst.close()
        raise QueryError(f"{src}: no frame between {s:g} and {e:g} s")
    video.flush()
    if audio is not None:
        audio.flush()
    dst.close()
    return ExportedClip(s, e, video.frames, video.first, video.last, audio.kept if audio else 0.0,
                        video.width, video.height)


class _VideoOut:
    """H.264 frames at their source times minus ``start``."""

    def __init__(self, av: Any, dst: Any, vs: Any, info: Any, max_width: int | None, crf: int, preset: str,
                 fragmented: bool = False):
        self.av, self.dst = av, dst
        self.frames, self.first, self.last = 0, None, None
        self._last_pts = -1
        self.rot = info.rotation
        w, h = (info.height, info.width) if self.rot in (90, 270) else (info.width, info.height)
        if max_width and w > max_width:
            w, h = max_width, int(round(h * max_width / w))
        self.width, self.height = _even(w), _even(h)
        st = dst.add_stream("libx264", rate=vs.average_rate or fractions.Fraction(25))
        st.width, st.height, st.pix_fmt = self.width, self.height, "yuv420p"
        st.time_base = st.codec_context.time_base = OUT_TB
        # a fragmented MP4 has no edit list to hide B-frames' reordering delay: none, so the video starts at 0
        st.options = {"crf": str(crf), "preset": preset, **({"bf": "0"} if fragmented else {})}
        self.stream = st

    def add(self, frame: Any, t: float, start: float) -> None:
        if self.rot:
            w, h = (self.height, self.width)
            img = np.ascontiguousarray(np.rot90(frame.to_ndarray(width=w, height=h, format="rgb24"), k=self.rot // 90))
            out = self.av.VideoFrame.from_ndarray(img, format="rgb24").reformat(format="yuv420p")
        else:
            out = frame.reformat(width=self.width, height=self.height, format="yuv420p")
        pts = max(int(round(max(t - start, 0.0) / OUT_TB)), self._last_pts + 1)
        out.pts, out.time_base = pts, OUT_TB
        self._last_pts = pts
        for p in self.stream.encode(out):
            self.dst.mux(p)
        self.frames += 1
        self.first = t if self.first is None else self.first
        self.last = t

    def flush(self) -> None:
        for p in self.stream.encode(None):
            self.dst.mux(p)


class _AudioOut:
    """AAC samples of ``[start, end)``: resampled to planar float (at most stereo, an AAC rate) and trimmed to the
    sample; output times from 0."""

    def __init__(self, av: Any, dst: Any, stream: Any, start: float, end: float):
        ctx = stream.codec_context
        self.av, self.dst = av, dst
        self.rate = int(ctx.sample_rate) if int(ctx.sample_rate or 0) in AAC_RATES else 48000
        self.layout = "mono" if (ctx.channels or 1) == 1 else "stereo"
        self.resampler = av.AudioResampler(format="fltp", layout=self.layout, rate=self.rate)
        self.stream = dst.add_stream("aac", rate=self.rate, layout=self.layout)
        self.tb, self.a0 = stream.time_base or fractions.Fraction(1, self.rate), stream.start_time or 0
        self.start, self.end = start, end
        self.pos: float | None = None  # the source time of the next resampled sample
        self.written = 0  # samples written
        self.done = False

    @property
    def kept(self) -> float:
        return self.written / self.rate

    def add(self, frame: Any) -> None:
        if self.done:
            return
        if frame.pts is not None:
            t = float((frame.pts - self.a0) * self.tb)
            if self.pos is None or abs(t - self.pos) > 0.2:  # (re)anchor: the first frame, or a gap in the track
                self.pos = t
        for r in self.resampler.resample(frame):
            self._keep(r.to_ndarray())

    def _keep(self, x: np.ndarray) -> None:
        pos = self.pos or 0.0
        n = x.shape[1]
        a = int(round((self.start - pos) * self.rate))
        b = int(round((self.end - pos) * self.rate))
        self.pos = pos + n / self.rate
        a, b = max(a, 0), min(b, n)
        if b <= a:
            self.done = self.pos >= self.end
            return
        out = self.av.AudioFrame.from_ndarray(np.ascontiguousarray(x[:, a:b]), format="fltp", layout=self.layout)
        out.sample_rate, out.pts, out.time_base = self.rate, self.written, fractions.Fraction(1, self.rate)
        self.written += b - a
        for p in self.stream.encode(out):
            self.dst.mux(p)

    def flush(self) -> None:
        for r in self.resampler.resample(None):
            self._keep(r.to_ndarray())
        for p in self.stream.encode(None):
            self.dst.mux(p)


class _Pipe:
    """A write-only stream into a bounded queue: the encoder thread writes, the reader yields (back-pressure)."""

    def __init__(self, depth: int = 8):
        self.chunks: queue.Queue[bytes | None] = queue.Queue(depth)
        self.stop = threading.Event()

    def write(self, data: bytes) -> int:
        while not self.stop.is_set():
            try:
                self.chunks.put(bytes(data), timeout=0.5)
                return len(data)
            except queue.Full:
                continue
        raise OSError("the reader went away")


def stream_moment(path: str | Path, start: float, end: float, **options: Any) -> Iterator[bytes]:
    """:func:`export_moment` into a fragmented MP4, yielded in chunks as it is encoded (bounded memory: a few
    chunks wait at most). Checks the span first, so a bad request fails before the first byte. Closing the
    iterator early stops the encoder."""
    check_span(start, end, options.get("duration"), options.get("max_seconds"))
    pipe = _Pipe()
    failure: list[BaseException] = []

    def work() -> None:
        try:
            export_moment(path, start, end, pipe, **options)  # type: ignore[arg-type]
        except BaseException as err:  # noqa: BLE001 - handed to the reader
            failure.append(err)
        finally:
            while not pipe.stop.is_set():
                try:
                    pipe.chunks.put(None, timeout=0.5)
                    break
                except queue.Full:
                    continue

    worker = threading.Thread(target=work, name="momentsearch-export", daemon=True)
    worker.start()
    try:
        while True:
            chunk = pipe.chunks.get()
            if chunk is None:
                break
            yield chunk
        if failure:  # (export_moment's own errors: a QueryError or a VideoDecodeError naming the file)
            raise failure[0]
    finally:
        pipe.stop.set()
        worker.join(timeout=10)


__all__ = ["ExportedClip", "check_span", "clip_name", "export_moment", "moment_cues", "stream_moment"]
