"""Keeping a moment as a file (issue 73): speed and exactness of ``export_moment`` on every codec the ingest tests
use, and the real Charades video, beside the alternative (a remux from the key frame before the start, no
re-encoding: what ``ffmpeg -ss S -c copy`` does) and the floor (decoding the span alone, no encoding).

    python benchmarks/export_speed.py          # writes benchmarks/results/export_speed.json

Each source: 60 s at 640 x 360, 30 fps, a key frame every 2 s (x264's default GOP is 250 frames; a camera's is
1-2 s), with a 440 Hz AAC tone where the container takes it. Three moments each (10 s from 7.3 s, 20 s from 31.05 s
and 4 s from 52.5 s), best of 3 runs. Exactness: the source time of the first frame kept against the request's
start (the frame shown at start: it begins up to one frame before), and of the last against the end.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(ROOT / "tests"))  # the tests' tone writer
from _common import report  # noqa: E402

# HEVC first: libx265 has corrupted the heap encoding after libvpx-vp9 in one process (tests/test_damaged_videos.py)
SOURCES = [("matroska", "libx265", "mkv", True), ("mp4", "libx264", "mp4", True), ("matroska", "libx264", "mkv", True),
           ("webm", "libvpx-vp9", "webm", False), ("avi", "mpeg4", "avi", False), ("mov", "mjpeg", "mov", True)]
MOMENTS = [(7.3, 17.3), (31.05, 51.05), (52.5, 56.5)]
RATE, W, H, SECONDS = 30, 640, 360, 60


def write_source(path: Path, fmt: str, codec: str, audio: bool) -> Path:
    import av

    if path.is_file():
        return path
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:H, 0:W]
    with av.open(str(path), "w", format=fmt) as out:
        v = out.add_stream(codec, rate=RATE)
        v.width, v.height = W, H
        v.pix_fmt = "yuvj420p" if codec == "mjpeg" else "yuv420p"
        v.gop_size = 2 * RATE
        if codec == "libx265":
            v.options = {"x265-params": "log-level=error"}
        a = out.add_stream("aac", rate=48000, layout="stereo") if audio else None
        for i in range(SECONDS * RATE):  # a moving gradient with noise: something to encode
            img = ((x + 4 * i) % 256 + (y // 2)).astype(np.uint8)
            frame = np.stack([img, np.roll(img, i, 1), 255 - img], 2) + rng.integers(0, 8, (H, W, 3), dtype=np.uint8)
            for p in v.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(p)
        for p in v.encode():
            out.mux(p)
        if a is not None:
            from example_index import write_tone

            write_tone(out, a, SECONDS, 48000, "stereo", 0.2)
    return path


def decode_only(path: Path, start: float, end: float) -> int:
    """The floor: seek, then decode every frame up to ``end`` (nothing encoded)."""
    import av

    with av.open(str(path)) as c:
        s = c.streams.video[0]
        s.thread_type = "AUTO"
        tb, t0 = s.time_base, s.start_time or 0
        c.seek(int(t0 + start / tb), stream=s, backward=True)
        n = 0
        for f in c.decode(s):
            n += 1
            if (f.pts - t0) * tb >= end:
                break
    return n


def remux(path: Path, start: float, end: float, out: Path) -> tuple[float, float]:
    """The alternative: packets copied from the key frame at or before ``start`` up to ``end``, no re-encoding
    (what ``ffmpeg -ss START -to END -c copy`` keeps). Returns the source times of the first and last frames kept."""
    import av

    with av.open(str(path)) as c, av.open(str(out), "w", format="matroska") as o:
        s = c.streams.video[0]
        tb, t0 = s.time_base, s.start_time or 0
        os_ = o.add_stream_from_template(s)
        c.seek(int(t0 + start / tb), stream=s, backward=True)
        first = last = None
        dts = -(1 << 62)
        for p in c.demux(s):
            if p.pts is None:
                continue
            t = float((p.pts - t0) * tb)
            if t >= end:
                break
            first = t if first is None else min(first, t)
            last = t if last is None else max(last, t)
            dts = max(dts + 1, p.dts if p.dts is not None else dts + 1)  # Matroska's demuxer leaves some unset
            p.dts, p.pts = dts, max(p.pts, dts)
            p.stream = os_
            o.mux(p)
    return first, last  # type: ignore[return-value]


def best(fn, repeat: int = 3) -> tuple[float, object]:
    out, times = None, []
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main() -> None:
    from momentsearch.video.export import export_moment

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/export_speed"))
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    sources = [(f"{codec} in {suffix}", write_source(args.work / f"src_{codec}.{suffix}", fmt, codec, audio))
               for fmt, codec, suffix, audio in SOURCES]
    example = ROOT.parent / "shared" / "data" / "examples" / "charades.mp4"
    if example.is_file():
        sources.append(("Charades (real, h264 480x270)", example))
    rows = []
    for name, src in sources:
        import av

        with av.open(str(src)) as c:
            fps = float(c.streams.video[0].average_rate)
            dur = float(c.duration / 1e6)
        for a, b in (MOMENTS if dur > 57 else [(5.0, 15.0), (11.1, 21.1)]):
            secs, clip = best(lambda: export_moment(src, a, b, args.work / "out.mp4"))
            dsecs, _ = best(lambda: decode_only(src, a, b))
            rsecs, (rf, rl) = best(lambda: remux(src, a, b, args.work / "remux.mkv"))
            rows.append({"source": name, "moment": f"{a:g}-{b:g} s",
                         "export video-s/s": round((b - a) / secs, 1),
                         "first frame before start (ms)": round(1000 * (a - clip.first_frame), 1),
                         "last frame before end (ms)": round(1000 * (b - clip.last_frame), 1),
                         "one frame (ms)": round(1000 / fps, 1), "frames": clip.frames,
                         "decode only video-s/s (floor)": round((b - a) / dsecs, 1),
                         "remux video-s/s (alternative)": round((b - a) / rsecs, 1),
                         "remux starts before start (ms)": round(1000 * (a - rf), 1)})
            print(rows[-1], flush=True)
    report("export_speed", rows, "python benchmarks/export_speed.py",
           extra={"note": "export re-encodes every kept frame (H.264 crf 23 veryfast) and sample (AAC); 2 cores"})


if __name__ == "__main__":
    main()
