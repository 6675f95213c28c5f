"""Ingest throughput per encoder beside the decode alone of the same files (the limit), and peak memory
on a two-hour video.

    python benchmarks/ingest_speed.py [--videos runs/rendered/benchmark/videos] [--n 60]

Rows, in video-seconds per wall-second on this machine (2 cores; one ingest process):
* decode only: PyAV (ffmpeg's decoders) reads every frame of every file, nothing else;
* decode + sample + scale: ``clip_frames`` at 2 fps to 64 x 64 (what every encoder is fed);
* ingest with each encoder that can run here: ``builtin``, and ``hf_clip`` with CLIP ViT-B/32's
  architecture (transformers' default CLIPConfig) at random weights, which costs what the real weights
  cost (no weights can be fetched here); open_clip and torchvision need a torchvision that loads beside
  this torch, which this machine's CPU wheel lacks.
Then the peak resident memory of ``ingest`` on a generated two-hour video (64 x 64, 4 fps), in a
fresh process, beside a process that only decodes it. JSON in ``benchmarks/results/ingest_speed.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def decode_only(files: list[Path]) -> float:
    import av

    for f in files:
        with av.open(str(f)) as c:
            for _ in c.decode(c.streams.video[0]):
                pass
    return 0.0


def sample_only(files: list[Path]) -> None:
    from momentsearch.video.decode import clip_frames

    for f in files:
        for _ in clip_frames(f, 2.0, 2.0, (64, 64)):
            pass


def seconds_of(files: list[Path]) -> float:
    from momentsearch.video.decode import probe

    return sum(probe(f).duration or 0.0 for f in files)


CHILD = """
import sys, time
mode, path, out = sys.argv[1:4]
t = time.perf_counter()
n = 0
if mode == "decode":
    import av
    with av.open(path) as c:
        for _ in c.decode(c.streams.video[0]):
            n += 1
else:
    from momentsearch.video.ingest import ingest
    rep = ingest(path.rsplit("/", 1)[0], out, "builtin", clip_seconds=2.0, fps=2.0, progress=False)
    n = len(rep.encoded) if hasattr(rep, "encoded") else 0
# VmHWM: this process's peak resident set (ru_maxrss would carry the parent's peak across fork + exec)
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(hwm / 1024, time.perf_counter() - t, n)
"""


def vit_b32(folder: Path) -> None:
    """CLIP ViT-B/32's architecture (transformers' default CLIPConfig), random weights, saved as a model folder."""
    import torch
    from transformers import CLIPConfig, CLIPModel

    torch.manual_seed(0)
    CLIPModel(CLIPConfig()).save_pretrained(folder)


def peak(mode: str, video: Path, out: Path) -> tuple[float, float]:
    res = subprocess.run([sys.executable, "-c", CHILD, mode, str(video), str(out)], check=True, capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    mib, secs, n = res.stdout.split()
    print(f"{mode}: {n} {'frames' if mode == 'decode' else 'videos'}, {float(secs):.2f} s, peak {float(mib):.1f} MiB")
    return float(mib), float(secs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--videos", type=Path, default=ROOT / "runs" / "rendered" / "benchmark" / "videos")
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--clip-n", type=int, default=12, help="files for the (slow) CLIP ViT-B/32 row")
    ap.add_argument("--example", type=Path, default=ROOT.parent / "shared" / "data" / "examples" / "charades.mp4")
    args = ap.parse_args()
    from momentsearch.video.ingest import ingest

    files = sorted(args.videos.glob("*.mp4"))[: args.n]
    if args.example.is_file():
        files.append(args.example)
    if not files:
        raise SystemExit(f"no .mp4 under {args.videos}: run benchmarks/rendered_xml.py first, or pass --videos")
    total = seconds_of(files)
    rows = []
    for name, fn in (("decode only (PyAV, every frame)", lambda: decode_only(files)),
                     ("decode + sample 2 fps + scale to 64x64", lambda: sample_only(files))):
        t = time.perf_counter()
        fn()
        wall = time.perf_counter() - t
        rows.append({"what": name, "files": len(files), "video_s": round(total, 1), "wall_s": round(wall, 2),
                     "video_s_per_s": round(total / wall, 1)})
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "videos"
        src.mkdir()
        for f in files:  # the video files only (no subtitles): the visual encoder's cost
            os.symlink(f.resolve(), src / f.name)
        t = time.perf_counter()
        ingest(src, Path(tmp) / "corpus", "builtin", clip_seconds=2.0, fps=2.0, progress=False)
        wall = time.perf_counter() - t
        rows.append({"what": "ingest, encoder builtin (2 s clips, 2 fps)", "files": len(files), "video_s": round(total, 1),
                     "wall_s": round(wall, 2), "video_s_per_s": round(total / wall, 1)})
        clip_dir = Path(tmp) / "vit_b32"
        vit_b32(clip_dir)
        sub = src.parent / "clip_videos"
        sub.mkdir()
        for f in files[: args.clip_n]:
            os.symlink(f.resolve(), sub / f.name)
        sub_total = seconds_of(files[: args.clip_n])
        t = time.perf_counter()
        ingest(sub, Path(tmp) / "clip_corpus", "hf_clip", clip_seconds=2.0, fps=2.0,
               encoder_options={"weights": str(clip_dir)}, progress=False)
        wall = time.perf_counter() - t
        rows.append({"what": "ingest, encoder hf_clip ViT-B/32 (random weights; 2 s clips, 2 fps)",
                     "files": args.clip_n, "video_s": round(sub_total, 1), "wall_s": round(wall, 2),
                     "video_s_per_s": round(sub_total / wall, 1)})
        sys.path.insert(0, str(ROOT / "tests"))
        from video_files import write_video

        long = Path(tmp) / "long" / "two_hours.mp4"
        long.parent.mkdir()
        write_video(long, seconds=7200.0, rate=4, w=64, h=64)
        dec_mib, dec_s = peak("decode", long, Path(tmp) / "x")
        ing_mib, ing_s = peak("ingest", long, Path(tmp) / "long_corpus")
        rows.append({"what": "two-hour video (64x64, 4 fps): decode only, peak RSS MiB", "files": 1, "video_s": 7200.0,
                     "wall_s": round(dec_s, 2), "video_s_per_s": round(dec_mib, 1)})
        rows.append({"what": "two-hour video: ingest builtin, peak RSS MiB", "files": 1, "video_s": 7200.0,
                     "wall_s": round(ing_s, 2), "video_s_per_s": round(ing_mib, 1)})
    report("ingest_speed", rows, f"python benchmarks/ingest_speed.py --videos {args.videos} --n {args.n} "
                                 f"--clip-n {args.clip_n}")
    print("(the last two rows give peak resident memory in the last column, not a rate)")
    print(json.dumps({"open_clip / torchvision": "not measured here: no torchvision loads beside the CPU torch wheel"}))


if __name__ == "__main__":
    main()
