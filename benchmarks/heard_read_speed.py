"""What ``ingest --speech`` and ``--read-text`` cost (issue 72): video-seconds per second and peak memory, each
setting in a fresh process, on the same files, nothing else running.

    python benchmarks/heard_read_speed.py [--videos runs/rendered/voiced] [--n 12] [--long-minutes 20]

Rows: ingest with the builtin encoder alone, + ``--speech pocketsphinx``, + ``--read-text``, + both, and the
two decoding floors under them (the audio track decoded to 16 kHz with no recogniser; the reader's frames
decoded with no reading), over the
first N voiced renders of ``speech_vision.py --voiced`` (256 x 256, 4 fps, a voice saying the subtitle lines,
an event's object drawn in the frames); then the same four on one long talking video (320 x 180, 4 fps, a
sentence every 10 s, a caption every 30 s), whose peak memory shows the audio and the frames are streamed.
Peak memory is the child process's VmHWM. JSON in ``benchmarks/results/heard_read_speed.json``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import sys, time, json
src, out, speech, read = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
from momentsearch.video.ingest import ingest
t = time.perf_counter()
rep = ingest(src, out, "builtin", clip_seconds=2.0, fps=2.0, progress=False, speech=speech, read_text=read)
wall = time.perf_counter() - t
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"wall": wall, "video_s": rep.video_seconds, "mib": hwm / 1024, "n": len(rep.encoded)}))
"""
DECODE = """
import sys, time, json
from pathlib import Path
src, what = Path(sys.argv[1]), sys.argv[2]
from momentsearch.video.audio import audio_chunks
from momentsearch.video.decode import DecodeStats, clip_frames, probe
from momentsearch.video.written import display_size
t, secs = time.perf_counter(), 0.0
for f in sorted(src.glob("*.mp4")):
    secs += probe(f).duration or 0.0
    if what == "audio":
        for _ in audio_chunks(f):
            pass
    else:
        for _ in clip_frames(f, 2.0, 0.5, display_size(f, 640), DecodeStats()):
            pass
wall = time.perf_counter() - t
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"wall": wall, "video_s": secs, "mib": hwm / 1024, "n": 0}))
"""
LIMITS = (("limit: the audio decoded to 16 kHz only (no recogniser)", "audio"),
          ("limit: the reader's frames decoded only (one per 2 s clip, <= 640 px; no reading)", "frames"))
SETTINGS = (("builtin encoder only", "none", "0"), ("+ --speech pocketsphinx", "pocketsphinx", "0"),
            ("+ --read-text", "none", "1"), ("+ --speech pocketsphinx --read-text", "pocketsphinx", "1"))


def _child(code: str, *args: str) -> dict:
    import json

    res = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    return json.loads(res.stdout.strip().splitlines()[-1])


def run(src: Path, out: Path, speech: str, read: str) -> dict:
    return _child(CHILD, str(src), str(out), speech, read)


def run_decode(src: Path, what: str) -> dict:
    return _child(DECODE, str(src), what)


def long_video(path: Path, minutes: float) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from voices import write_talking_video

    lines = ["the person opens the red door", "a dog runs across the garden", "she picks up the phone",
             "he pours a cup of coffee", "two children play with a ball"]
    secs = minutes * 60
    said = [(t, lines[i % len(lines)]) for i, t in enumerate(range(1, int(secs) - 5, 10))]
    shown = [(t, t + 8.0, f"Chapter {i + 1}") for i, t in enumerate(range(0, int(secs) - 10, 30))]
    write_talking_video(path, secs, said=said, shown=shown, size=(320, 180), fps=4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--videos", type=Path, default=ROOT / "runs" / "rendered" / "voiced")
    ap.add_argument("--n", type=int, default=12)
    ap.add_argument("--long-minutes", type=float, default=20.0)
    args = ap.parse_args()
    files = sorted(args.videos.glob("*.mp4"))[: args.n]
    if not files:
        raise SystemExit(f"no .mp4 under {args.videos}: run python benchmarks/speech_vision.py --voiced-only first")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        short, long_dir = Path(tmp) / "short", Path(tmp) / "long"
        short.mkdir()
        long_dir.mkdir()
        for f in files:
            os.symlink(f.resolve(), short / f.name)
        long_video(long_dir / "talk.mp4", args.long_minutes)
        for where, src in ((f"{len(files)} voiced renders (256x256)", short),
                           (f"one {args.long_minutes:g}-minute talking video (320x180)", long_dir)):
            results = [(name, run(src, Path(tmp) / f"c_{where[:3]}_{i}", speech, read))
                       for i, (name, speech, read) in enumerate(SETTINGS)]
            results += [(name, run_decode(src, what)) for name, what in LIMITS]
            for name, r in results:
                print(where, name, r, flush=True)
                rows.append({"files": where, "ingest": name, "video_s": round(r["video_s"], 1),
                             "wall_s": round(r["wall"], 1), "video_s_per_s": round(r["video_s"] / r["wall"], 2),
                             "peak_MiB": round(r["mib"], 0)})
    report("heard_read_speed", rows, f"python benchmarks/heard_read_speed.py --videos {args.videos} --n {args.n} "
                                     f"--long-minutes {args.long_minutes:g}")


if __name__ == "__main__":
    main()
