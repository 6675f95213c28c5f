"""Fuzz the video decoder: damaged files of every container and codec the project tests, ingested beside
good files, and a thumbnail taken of each.

    python benchmarks/fuzz_videos.py --n 10000 [--containers mp4 webm mkv avi mov m4a] [--jobs 2]

Per container a small valid file is made (2 s, 10 fps, 48x32; ``mp4`` H.264, ``webm`` VP9, ``mkv`` HEVC,
``avi`` MPEG-4 Part 2, ``mov`` MJPEG, ``m4a`` AAC audio only; ``mkv-subrip`` and ``mp4-movtext``: H.264 with a
text subtitle stream inside, which ingest reads as what is said) and damaged N times by
``fuzz_video_mutations.damage`` (element sizes, types, codec ids, timestamps, truncation at element
boundaries, random bytes, stacked). Each damaged file replaces the last in a folder that also holds two
good videos (H.264 MP4 and VP9 WebM), and the folder is ingested into the same corpus, as
``momentsearch ingest`` does it (``video.ingest.ingest``; the good files are kept from the first run,
the damaged one is new each time). Then the service's thumbnail of the damaged file at 0.5 s is
taken (``video.decode.frame_at``, what ``GET /thumbnails`` runs).

Outcomes per mutant: the damaged file *ingested* or *reported* (a failure with a reason), the
thumbnail made or refused with the project's error; *foreign* when anything else happened: an
exception out of ``ingest`` or the thumbnail that is not the project's, a failure the ingest could
only report as unexpected (an exception no check of ours caught), a good file missing from the corpus;
*hang* when one mutant took over ``--timeout`` seconds (the worker process is killed and restarted).
Writes ``benchmarks/results/fuzz_videos.json``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT), str(ROOT / "tests")]

from benchmarks._common import command_line  # noqa: E402
from benchmarks.fuzz_video_mutations import damage  # noqa: E402

CONTAINERS = {  # name -> (PyAV format, codec, element kind, suffix)
    "mp4": ("mp4", "libx264", "mp4", "mp4"), "webm": ("webm", "libvpx-vp9", "ebml", "webm"),
    "mkv": ("matroska", "libx265", "ebml", "mkv"), "avi": ("avi", "mpeg4", "riff", "avi"),
    "mov": ("mov", "mjpeg", "mp4", "mov"), "m4a": ("mp4", "aac", "mp4", "m4a"),
    # with a text subtitle stream inside (issue 40: ingest reads it as what is said)
    "mkv-subrip": ("matroska", "subrip", "ebml", "mkv"), "mp4-movtext": ("mp4", "mov_text", "mp4", "mp4")}


def seed_file(name: str, folder: Path) -> Path:
    """The valid file of ``name`` that every mutant of it starts from."""
    import av

    from video_files import write_audio_only, write_video

    fmt, codec, _, suffix = CONTAINERS[name]
    p = folder / f"seed.{suffix}"
    if name == "m4a":
        return write_audio_only(p)
    if codec in ("subrip", "mov_text"):
        from video_files import write_with_subtitle_stream

        return write_with_subtitle_stream(p, [(0.2, 0.9, "the first line"), (1.0, 1.9, "and the second")], fmt,
                                          codec, seconds=2.0, rate=10)
    av.logging.set_level(None)  # no Python log callback: with one, a codec thread that logs can deadlock (decode.py)
    return write_video(p, fmt, codec, seconds=2.0, rate=10)


def _write(what: str, root: str) -> None:
    from video_files import write_video

    videos = Path(root) / "videos"
    videos.mkdir(parents=True, exist_ok=True)
    if what == "good_h264":
        write_video(videos / "good_h264.mp4", "mp4", "libx264", seconds=2.0)
    elif what == "good_vp9":
        write_video(videos / "good_vp9.webm", "webm", "libvpx-vp9", seconds=2.0)
    else:
        seed_file(what, Path(root))


def make_files(name: str, root: Path) -> None:
    """The two good videos and the seed, each written by a process of its own: writing HEVC after VP9 in one
    process corrupts the heap in this PyAV build (glibc: "corrupted size vs. prev_size", then a hang)."""
    ctx = mp.get_context("spawn")
    for what in ("good_h264", "good_vp9", name):
        p = ctx.Process(target=_write, args=(what, str(root)))
        p.start()
        p.join(120)
        if p.exitcode != 0:
            p.kill()
            raise RuntimeError(f"writing {what} failed (exit code {p.exitcode})")


def mutant(name: str, seed_bytes: bytes, seed: int, i: int) -> tuple[bytes, str]:
    return damage(seed_bytes, CONTAINERS[name][2], random.Random(f"{name}:{seed}:{i}"))


def worker(name: str, seed: int, root: Path, conn: Any) -> None:
    """Set up the folder, then answer each mutant index the parent sends with its outcomes."""
    import warnings

    warnings.filterwarnings("ignore")
    from momentsearch.errors import MomentSearchError, VideoDecodeError
    from momentsearch.video.decode import frame_at
    from momentsearch.video.ingest import ingest

    videos, corpus = root / "videos", root / "corpus"
    good = ["good_h264", "good_vp9"]
    seed_bytes = next(root.glob("seed.*")).read_bytes()
    target = videos / f"damaged.{CONTAINERS[name][3]}"
    tmp = root / "next.bin"
    while True:
        i = conn.recv()
        if i is None:
            return
        data, how = mutant(name, seed_bytes, seed, i)
        tmp.write_bytes(data)
        os.replace(tmp, target)
        os.utime(target, ns=(i + 1, i + 1))  # a new mtime each time: the ingest never keeps an old mutant
        out: dict[str, Any] = {"i": i, "how": how}
        try:
            rep = ingest(videos, corpus, clip_seconds=1.0, fps=2.0, progress=False)
            failed = {f["path"]: f for f in rep.failures}
            lost = [g for g in good if g not in rep.kept and g not in rep.encoded]
            if lost:
                out["foreign"] = f"good files lost: {lost}"
            elif target.name in failed and failed[target.name].get("unexpected"):
                out["foreign"] = "unexpected: " + failed[target.name]["error"].split("(", 1)[-1][:200]
            elif "damaged" in rep.encoded:
                out["ingest"] = "ingested"
            elif target.name in failed:
                out["ingest"] = "reported"
            else:
                out["foreign"] = "the damaged file is neither in the corpus nor reported"
        except MomentSearchError as e:
            out["foreign"] = f"the ingest stopped: {type(e).__name__}: {str(e)[:200]}"
        except Exception as e:  # noqa: BLE001 - counted
            out["foreign"] = f"{type(e).__name__} out of ingest: {str(e)[:200]}"
        try:
            frame_at(target, 0.5, 64)
            out["thumbnail"] = "made"
        except VideoDecodeError:
            out["thumbnail"] = "refused"
        except Exception as e:  # noqa: BLE001 - counted
            out.setdefault("foreign", f"{type(e).__name__} out of frame_at: {str(e)[:200]}")
        conn.send(out)


def fuzz(name: str, n: int, seed: int, timeout: float) -> dict[str, Any]:
    """``n`` mutants of ``name`` through a worker process, restarted after a hang."""
    ctx = mp.get_context("spawn")
    counts: Counter[str] = Counter()
    foreign: dict[str, dict[str, Any]] = {}
    hangs: list[dict[str, Any]] = []
    by_how: Counter[str] = Counter()
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        make_files(name, Path(tmp))
        seed_bytes = next(Path(tmp).glob("seed.*")).read_bytes()
        proc = conn = None
        i, warm = 0, False
        while i < n:
            if proc is None:
                conn, child = ctx.Pipe()
                proc = ctx.Process(target=worker, args=(name, seed, Path(tmp), child), daemon=True)
                proc.start()
                warm = False
            conn.send(i)
            if not conn.poll(timeout if warm else timeout + 120):  # a new worker imports and ingests the good files first
                proc.kill()
                proc.join()
                proc = None
                hangs.append({"i": i, "how": mutant(name, seed_bytes, seed, i)[1], "first_after_start": not warm})
                counts["hang"] += 1
                i += 1
                continue
            try:
                r = conn.recv()
            except EOFError:  # the worker died (a crash inside a codec)
                proc.join()
                code, proc = proc.exitcode, None
                counts["crash"] += 1
                foreign.setdefault(f"the worker died (exit code {code})", {"count": 0, "first": i})["count"] += 1
                i += 1
                continue
            warm = True
            by_how[r["how"].split(":")[0]] += 1
            if "foreign" in r:
                counts["foreign"] += 1
                key = r["foreign"][:120]
                rec = foreign.setdefault(key, {"count": 0, "first": r["i"], "how": r["how"]})
                rec["count"] += 1
            else:
                counts[r["ingest"]] += 1
            counts["thumbnail " + r.get("thumbnail", "-")] += 1
            i += 1
            if i % 500 == 0:
                print(f"  {name}: {i}/{n} ({time.time() - t0:.0f} s) {dict(counts)}", flush=True)
        if proc is not None:
            conn.send(None)
            proc.join(timeout=30)
    return {"container": name, "codec": CONTAINERS[name][1], "n": n, "outcomes": dict(counts), "foreign": foreign,
            "hangs": hangs, "mutations": dict(by_how), "seconds": round(time.time() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000, help="mutants per container")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--containers", nargs="*", default=list(CONTAINERS), choices=list(CONTAINERS))
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds one mutant may take (a hang past it)")
    ap.add_argument("--jobs", type=int, default=1, help="containers fuzzed in parallel")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "fuzz_videos.json")
    args = ap.parse_args()
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda c: fuzz(c, args.n, args.seed, args.timeout), args.containers))
    print(f"{'container':<6} {'codec':<11} {'mutants':>8} {'ingested':>9} {'reported':>9} {'thumb ok':>9} "
          f"{'thumb refused':>14} {'foreign':>8} {'hang':>5} {'s':>7}")
    for r in results:
        o = r["outcomes"]
        print(f"{r['container']:<6} {r['codec']:<11} {r['n']:>8} {o.get('ingested', 0):>9} {o.get('reported', 0):>9} "
              f"{o.get('thumbnail made', 0):>9} {o.get('thumbnail refused', 0):>14} "
              f"{o.get('foreign', 0) + o.get('crash', 0):>8} {o.get('hang', 0):>5} {r['seconds']:>7}")
        for key, rec in sorted(r["foreign"].items(), key=lambda kv: -kv[1]["count"])[:6]:
            print(f"    {rec['count']:>5} x {key} (first: mutant {rec['first']}, {rec.get('how', '?')})")
    total = sum(r["outcomes"].get(k, 0) for r in results for k in ("foreign", "crash", "hang"))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    tmp.write_text(json.dumps({"command": command_line(),
                               "n_per_container": args.n, "seed": args.seed, "results": results,
                               "foreign_crashes_and_hangs": total}, indent=1))
    os.replace(tmp, args.out)
    print(f"foreign + crashes + hangs over {len(results)} containers x {args.n}: {total}; {args.out}")


if __name__ == "__main__":
    main()
