"""The first stage at scale: exact search against FAISS (Flat, IVF, HNSW) and Milvus on XML's clip vectors.

    python benchmarks/first_stage_scale.py --videos 100000 [--work /tmp/fs_scale]

1. the synthetic generator's ``large`` preset, cut to ``--videos`` videos (features and queries);
2. XML with ``configs/xml/demo.yaml`` trained 2 epochs on the ``default`` preset (or ``--checkpoint``),
   so that the vectors are a trained model's (two streams, d = 128, unit vectors: Eq. 1's cosine);
3. the corpus encoded once into H1 (fp16, as an index folder stores it);
4. per first stage: build time, bytes per video, and at batch 1 the p50/p95 latency of retrieving a
   query's top 100 videos (``retrieve``: query encoding, the vector search, the candidates' exact
   scores), with recall@100 against exact search over the same queries;
5. the physical limit beside them: the bytes an exact query must read (every clip's vector, fp32 as
   exact search holds them, and fp16 as stored) over this machine's memory bandwidth measured in
   the same run (the best of 5 sums over a 2 GiB array).
Everything is cached under ``--work``: a rerun reuses the benchmark, model and encoded corpus.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import peak_rss_mib, report  # noqa: E402

from momentsearch.config import CONFIG_DIR  # noqa: E402
from momentsearch.data.batching import pad_tokens  # noqa: E402
from momentsearch.data.synthetic import SyntheticBenchmark, generate, load_preset  # noqa: E402
from momentsearch.models.xml.search import XMLRetriever, encode_corpus  # noqa: E402
from momentsearch.search.first_stage import ExactFirstStage, build_first_stage  # noqa: E402
from momentsearch.search.index import VideoIndex  # noqa: E402
from momentsearch.text.queries import CachedTextFeatures  # noqa: E402
from momentsearch.training.checkpoint import load_checkpoint  # noqa: E402

CPU = torch.device("cpu")
SPECS = [("faiss:Flat", {}),
         ("faiss:IVF4096,Flat", {"nprobe": "128", "clips_per_video": "16"}),
         ("faiss:HNSW32", {"efSearch": "800", "clips_per_video": "8"}),
         ("faiss:HNSW32", {"efSearch": "1600", "clips_per_video": "16"}),
         ("faiss:HNSW32", {"efSearch": "3200", "clips_per_video": "32"}),
         ("faiss:HNSW32", {"efSearch": "6400", "clips_per_video": "64"}),
         ("milvus", {"index_type": "IVF_FLAT", "nlist": "4096", "nprobe": "128", "clips_per_video": "16"})]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def bandwidth_gib_s(gib: float = 2.0, repeat: int = 5) -> float:
    a = np.ones(int(gib * 2**30 / 4), np.float32)
    best = min(_timed_sum(a) for _ in range(repeat))
    return a.nbytes / best / 2**30


def _timed_sum(a: np.ndarray) -> float:
    t = time.perf_counter()
    a.sum()
    return time.perf_counter() - t


def checkpoint(work: Path, given: Path | None) -> Path:
    if given is not None:
        return given
    ckpt = work / "xml" / "checkpoints" / "best.pt"
    if ckpt.exists():
        return ckpt
    from momentsearch.api import train

    bench = work / "default"
    if not (bench / "benchmark.yaml").exists():
        generate(load_preset("default"), bench)
    log("training XML (demo config, 2 epochs) on the default preset")
    train(CONFIG_DIR / "xml" / "demo.yaml", {"dataset": {"benchmark": str(bench)}, "out_dir": str(work / "xml"),
                                             "epochs": 2}, progress=False)
    return ckpt


def encoded(work: Path, n_videos: int, model: torch.nn.Module) -> tuple[SyntheticBenchmark, VideoIndex]:
    root = work / f"large_{n_videos}"
    if not (root / "benchmark.yaml").exists():
        log(f"generating {n_videos:,} videos")
        generate(dataclasses.replace(load_preset("large"), n_videos=n_videos), root)
    bench = SyntheticBenchmark.load(root)
    folder = work / f"h1_{n_videos}"
    if not (folder / "manifest.json").exists():
        log("encoding the corpus with XML")
        videos = list(bench.corpus.videos.values())
        with bench.features() as store:
            index = encode_corpus(model, store, videos, {v.video_id: bench.config.clip_length for v in videos}, CPU,
                                  batch_size=128, progress=False)
        VideoIndex(index.video_ids, index.durations, index.clip_lengths, index.offsets, {"h1": index.arrays["h1"]},
                   meta={"family": "xml", "fingerprint": f"bench-{n_videos}"}).save(folder)
        del index
        gc.collect()
    return bench, VideoIndex.load(folder, mmap=False)


def million(work: Path, base: VideoIndex, copies: int, noise: float) -> VideoIndex:
    """``copies`` perturbed copies of ``base``'s videos (copy 0 as it is), memory-mapped on disk:
    each clip vector plus Gaussian noise of ``noise`` times its per-dimension RMS (cosine to the
    original about 1/sqrt(1 + noise^2)), the clip order reversed in odd copies, the videos shuffled
    (seeded). The same 2-epoch XML model scores the queries against them."""
    folder = work / f"h1_{len(base) * copies}_perturbed_{noise}"
    if (folder / "manifest.json").exists():
        return VideoIndex.load(folder, mmap=True)
    rng = np.random.default_rng(7)
    order = rng.permutation(len(base) * copies)  # new video i is copy order[i] // V of base video order[i] % V
    src_video, copy = order % len(base), order // len(base)
    n = np.diff(base.offsets)[src_video]
    offsets = np.zeros(len(order) + 1, np.int64)
    offsets[1:] = np.cumsum(n)
    h1 = base.arrays["h1"]
    tmp = work / "h1_million.tmp.npy"
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float16, shape=(int(offsets[-1]), *h1.shape[1:]))
    step = 20_000
    for a in range(0, len(order), step):
        for v in range(a, min(a + step, len(order))):
            rows = np.asarray(h1[base.offsets[src_video[v]]: base.offsets[src_video[v] + 1]], np.float32)
            if copy[v]:
                rms = np.sqrt((rows ** 2).mean(-1, keepdims=True))
                rows = rows + noise * rms * rng.standard_normal(rows.shape, dtype=np.float32)
                if copy[v] % 2:
                    rows = rows[::-1]
            out[offsets[v]: offsets[v + 1]] = rows
        log(f"  perturbed copies: {min(a + step, len(order)):,}/{len(order):,} videos")
    out.flush()
    ids = [f"{base.video_ids[s]}~{c}" for s, c in zip(src_video, copy, strict=True)]
    VideoIndex(ids, base.durations[src_video], base.clip_lengths[src_video], offsets, {"h1": out},
               meta={**base.meta, "fingerprint": f"bench-{len(order)}-perturbed-{noise}"}).save(folder)
    del out
    tmp.unlink()
    return VideoIndex.load(folder, mmap=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--videos", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200, help="queries for the approximate stages' latency and recall")
    ap.add_argument("--exact-queries", type=int, default=40, help="of those, timed through exact search at batch 1")
    ap.add_argument("--work", type=Path, default=Path("/tmp/fs_scale"))
    ap.add_argument("--checkpoint", type=Path, default=None)
    ap.add_argument("--only", default="", help="comma-separated specs to run (default: all)")
    ap.add_argument("--keep", action="store_true", help="reuse the vector indexes a previous run built (latency only)")
    args = ap.parse_args()
    torch.set_num_threads(2)
    args.work.mkdir(parents=True, exist_ok=True)
    ckpt = load_checkpoint(checkpoint(args.work, args.checkpoint))
    model = ckpt.model.eval()
    bench, index = encoded(args.work, args.videos, model)
    n_clips, s, d = index.arrays["h1"].shape
    log(f"{len(index):,} videos, {n_clips:,} clips, {s} streams of d={d}")
    test = bench.corpus.split("test").moments[: args.queries]
    qf = CachedTextFeatures(bench.root / "features" / "queries_minilm.h5")
    qf.ensure(test, progress=False)
    feats = [qf.get(m.query_id, m.text) for m in test]
    batches = [pad_tokens(feats[i: i + 1], ckpt.family.max_tokens) for i in range(len(feats))]
    retriever = XMLRetriever(model, index)
    exact = ExactFirstStage(retriever)
    t = time.perf_counter()
    exact.retrieve(*batches[0], 100)  # the fp32 unit copy of every clip, made once
    prepare_s = time.perf_counter() - t
    truth, lat = [], []
    for i in range(0, len(feats), 16):
        tok, mask = pad_tokens(feats[i: i + 16], ckpt.family.max_tokens)
        truth.extend(exact.retrieve(tok, mask, 100)[1])
    for tok, mask in batches[: args.exact_queries]:
        t = time.perf_counter()
        exact.retrieve(tok, mask, 100)
        lat.append(1000 * (time.perf_counter() - t))
    fp16_bytes = index.arrays["h1"].nbytes
    rows = [{"first stage": "exact (every clip, fp32)", "build_s": prepare_s, "bytes/video": 2 * fp16_bytes / len(index),
             "p50_ms": float(np.percentile(lat, 50)), "p95_ms": float(np.percentile(lat, 95)), "recall@100": 1.0,
             "uncertified_%": 0.0, "candidates/query": float(len(index))}]
    retriever._clips = None  # the exact copy goes: the vector stages hold their own
    gc.collect()
    bw = bandwidth_gib_s()
    for name, nbytes in (("physical limit: read every clip fp32", 2 * fp16_bytes),
                         ("physical limit: read every clip fp16", fp16_bytes)):
        rows.append({"first stage": name, "build_s": 0.0, "bytes/video": nbytes / len(index),
                     "p50_ms": 1000 * nbytes / 2**30 / bw, "p95_ms": float("nan"), "recall@100": 1.0,
                     "uncertified_%": 0.0, "candidates/query": float(len(index))})
    log(f"exact p50 {rows[0]['p50_ms']:.1f} ms; memory bandwidth {bw:.1f} GiB/s")
    only = {x for x in args.only.split(",") if x}
    built: dict[tuple, float] = {}
    first = not args.keep
    for spec, params in SPECS:
        if only and spec not in only:
            continue
        label = spec + (f" {params['index_type']}" if "index_type" in params else "") + "".join(
            f" {k}={v}" for k, v in params.items() if k not in ("nlist", "index_type"))
        folder = args.work / f"first_stage_{args.videos}"
        if first:
            shutil.rmtree(folder, ignore_errors=True)  # built anew in this run (search parameters share a build)
            first = False
        log(f"building {label}")
        t = time.perf_counter()
        stage = build_first_stage(retriever, index, spec, folder, params, family="xml")
        build_key = (spec, tuple(sorted((k, v) for k, v in params.items() if k in ("nlist", "index_type"))))
        build_s = built.setdefault(build_key, time.perf_counter() - t)
        stage.retrieve(*batches[0], 100)  # warm-up
        stage.stats.update(queries=0, uncertified=0, candidates=0)
        got, lat = [], []
        for tok, mask in batches:
            t = time.perf_counter()
            got.append(stage.retrieve(tok, mask, 100)[1][0])
            lat.append(1000 * (time.perf_counter() - t))
        recall = float(np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(got, truth, strict=True)]))
        rows.append({"first stage": label, "build_s": build_s, "bytes/video": stage.nbytes / len(index),
                     "p50_ms": float(np.percentile(lat, 50)), "p95_ms": float(np.percentile(lat, 95)),
                     "recall@100": recall, "uncertified_%": 100 * stage.stats["uncertified"] / len(batches),
                     "candidates/query": stage.stats["candidates"] / max(1, stage.stats["queries"])})
        log(str(rows[-1]))
        stage.close()
        del stage
        gc.collect()
    for r in rows:
        r["videos"] = len(index)
    rows[0]["peak_rss_MiB"] = peak_rss_mib()
    for r in rows[1:]:
        r["peak_rss_MiB"] = float("nan")
    report(f"first_stage_scale_{args.videos}", rows, "python benchmarks/first_stage_scale.py " + " ".join(sys.argv[1:]))


if __name__ == "__main__":
    main()
