"""Exact first-stage search on a GPU: the library's ``exact`` stage (ClipMaxRetriever on a CUDA device) at 100k and 1M videos.

    python benchmarks/gpu_first_stage.py [--videos 100000 1000000] [--queries 192] [--batches 1 16 64] [--out FILE]

Needs a CUDA device. The corpus has the shape of the 1M benchmark of ``first_stage_scale.py`` (two
streams, d = 128, 10 to 58 clips a video, 34 on average: 17.4 KB of fp16 per video), filled with random
unit vectors (exact search reads every clip, so its time does not depend on the values). The retriever
keeps an fp32 unit copy of every clip on the device (as it does on the CPU) and takes each video's max
there (``video_max_torch``, a stream at a time) and the top 100 too: only (B, 100) comes back to the host.
Per corpus size: the one-off copy to the device, then per batch size (1, 16 and 64 queries) the p50/p95 time
of a batch's ``ExactFirstStage.retrieve`` (top 100 videos), and beside it the physical limit: the fp32 clip bytes
each batch reads over the device's memory bandwidth measured in the same run (a device-to-device
copy, bytes read + written). At 100k the top 100 is checked against the CPU path on 5 queries.

``--pieces 22 25 40``: rows for each of those sizes of the pieces the device scans at once (2^22 ... (query, clip)
scores; 40: one piece, the whole (B, N) matrix; default the library's ``PIECE_ELEMS``). ``--tf32``: rows with
TF32 products too (``torch.backends.cuda.matmul.allow_tf32``), and how many of their top 100 are fp32's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, command_line, report  # noqa: E402
from momentsearch.search.clipmax import PIECE_ELEMS, ClipMaxRetriever, as_read  # noqa: E402
from momentsearch.search.first_stage import ExactFirstStage  # noqa: E402
from momentsearch.search.index import VideoIndex  # noqa: E402
from momentsearch.search.stages import Queries  # noqa: E402

STREAMS, D = 2, 128


def corpus(n_videos: int, dev: torch.device, seed: int = 0) -> VideoIndex:
    """Random fp16 clips in host memory, as a loaded index holds them (drawn on ``dev``: faster)."""
    rng = np.random.default_rng(seed)
    n = rng.integers(10, 59, size=n_videos)
    offsets = np.concatenate([[0], np.cumsum(n)]).astype(np.int64)
    g = torch.Generator(dev).manual_seed(seed)
    rows = np.empty((int(offsets[-1]), STREAMS, D), np.float16)
    for s in range(0, len(rows), 1_000_000):
        part = rows[s: s + 1_000_000]
        part[:] = torch.randn(part.shape, generator=g, dtype=torch.float16, device=dev).cpu().numpy()
    return VideoIndex([f"v{i}" for i in range(n_videos)], np.full(n_videos, 60.0), np.full(n_videos, 2.0),
                      offsets, {"h1": rows}, meta={"family": "random", "fingerprint": f"random{seed}"})


def device_bandwidth_gib_s(dev: torch.device, gib: float = 4.0) -> float:
    a = torch.empty(int(gib * 2**30 / 4), dtype=torch.float32, device=dev)
    b = torch.empty_like(a)
    best = float("inf")
    for _ in range(6):
        torch.cuda.synchronize(dev)
        t = time.perf_counter()
        b.copy_(a)
        torch.cuda.synchronize(dev)
        best = min(best, time.perf_counter() - t)
    del a, b
    torch.cuda.empty_cache()
    return 2 * gib / best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--videos", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--queries", type=int, default=192)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 16, 64], help="queries a batch")
    ap.add_argument("--out", type=Path, default=RESULTS / "gpu_first_stage.json")
    ap.add_argument("--device", default="cuda", help="cpu: a smoke run of this script only (no bandwidth)")
    ap.add_argument("--pieces", type=int, nargs="+", default=[PIECE_ELEMS.bit_length() - 1],
                    help="log2 of the (query, clip) scores a piece of the scan holds")
    ap.add_argument("--tf32", action="store_true", help="rows with TF32 products too")
    args = ap.parse_args()
    dev = torch.device(args.device)
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    bw = device_bandwidth_gib_s(dev) if dev.type == "cuda" else float("nan")
    print(f"{name}: device-to-device {bw:.0f} GiB/s", flush=True)
    rows = []
    for v in args.videos:
        t = time.perf_counter()
        index = corpus(v, dev)
        gen_s = time.perf_counter() - t
        retriever = ClipMaxRetriever(as_read, index, "h1", cosine=True, device=dev, chunk_clips=1_000_000)
        stage = ExactFirstStage(retriever)
        rng = np.random.default_rng(1)
        q = torch.from_numpy(rng.normal(size=(args.queries, STREAMS, D)).astype(np.float32))
        mask = torch.ones(args.queries, STREAMS, dtype=torch.bool)
        t = time.perf_counter()
        stage.retrieve(Queries(q[:1], mask[:1]), 100)  # the fp32 unit copy of every clip, made once
        copy_s = time.perf_counter() - t
        print(f"{v} videos: corpus made in {gen_s:.1f} s, copied to the device in {copy_s:.1f} s", flush=True)
        checked = min(5, args.queries)  # queries whose top 100 is compared with the CPU's and across the rows
        fp32_top = [stage.retrieve(Queries(q[i: i + 1], mask[:1]), 100)[1] for i in range(checked)]
        if v <= 100_000:  # the same top 100 as the CPU path
            cpu = ExactFirstStage(ClipMaxRetriever(as_read, index, "h1", cosine=True))
            same = [np.array_equal(cpu.retrieve(Queries(q[i: i + 1], mask[:1]), 100)[1], fp32_top[i])
                    for i in range(checked)]
            print(f"  top 100 as on the CPU: {sum(same)}/{checked} queries", flush=True)
        clip_bytes = int(index.offsets[-1]) * STREAMS * D * 4
        for piece, tf32 in [(p, t) for p in args.pieces for t in ((False, True) if args.tf32 else (False,))]:
            retriever.piece_elems = 1 << piece
            torch.backends.cuda.matmul.allow_tf32 = tf32
            kept = sum(len(np.intersect1d(stage.retrieve(Queries(q[i: i + 1], mask[:1]), 100)[1], fp32_top[i]))
                       for i in range(checked)) / checked
            for b in args.batches:
                lat = []
                for i in range(0, args.queries - b + 1, b):
                    t = time.perf_counter()
                    stage.retrieve(Queries(q[i: i + b], mask[i: i + b]), 100)
                    lat.append((time.perf_counter() - t) * 1000)
                rows.append({"device": name, "videos": v, "clips": int(index.offsets[-1]), "batch": b,
                             "piece_log2": piece, "tf32": tf32, "of_fp32_top100": kept,
                             "copy_to_device_s": round(copy_s, 2), "device_GiB": round(clip_bytes / 2**30, 2),
                             "p50_ms_per_batch": float(np.median(lat)),
                             "p95_ms_per_batch": float(np.percentile(lat, 95)),
                             "p50_ms_per_query": float(np.median(lat)) / b,
                             "limit_ms_per_batch": clip_bytes / 2**30 / bw * 1000, "bandwidth_GiB/s": bw,
                             "batches": len(lat)})
                print(rows[-1], flush=True)
        torch.backends.cuda.matmul.allow_tf32 = False
        del stage, retriever, index
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    report("gpu_first_stage", rows, command_line(), out=args.out)


if __name__ == "__main__":
    main()
