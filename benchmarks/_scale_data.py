"""The corpora ``first_stage_scale.py`` measures: the ``large`` preset generated (streamed to disk), trained
XML's H1 of it encoded part by part, the perturbed copies that make 1M videos of 100k, and the exact truth."""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import time
from pathlib import Path

import numpy as np
import torch

from momentsearch.config import CONFIG_DIR
from momentsearch.data.corpus import Video
from momentsearch.data.features import FeatureStore
from momentsearch.data.loaders.jsonl import iter_jsonl_corpus
from momentsearch.data.synthetic import SyntheticBenchmark, generate, load_preset
from momentsearch.models.xml.search import XMLRetriever, encode_corpus
from momentsearch.search.index import IndexWriter, VideoIndex
from momentsearch.serving.indexing import PART_VIDEOS

CPU = torch.device("cpu")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


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


def encoded(work: Path, n_videos: int, model: torch.nn.Module, mmap: bool = False, copies: int = 1,
            noise: float = 0.3) -> tuple[Path, VideoIndex]:
    """The generated benchmark's folder and its H1 index (generated, then encoded part by part, on first use)."""
    root = work / f"large_{n_videos}"
    if not (root / "benchmark.yaml").exists():
        log(f"generating {n_videos:,} videos")
        generate(dataclasses.replace(load_preset("large"), n_videos=n_videos), root, workers=2)
    folder = work / f"h1_{n_videos}"
    if not (folder / "manifest.json").exists():
        encode_in_parts(root, folder, model)
    base = VideoIndex.load(folder, mmap=mmap or copies > 1 or n_videos > 200_000)
    return root, (million(work, base, copies, noise) if copies > 1 else base)


def encode_in_parts(root: Path, folder: Path, model: torch.nn.Module) -> None:
    """XML's H1 of every video, encoded ``PART_VIDEOS`` at a time into memory-mapped files (``IndexWriter``,
    as ``momentsearch index`` writes them): memory is that of a part, whatever the corpus size. The videos
    are read line by line from ``corpus.jsonl`` (a million would take about 30 GB as one ``Corpus``)."""
    clip = SyntheticBenchmark.config_of(root).clip_length
    # ids and durations only: a million Videos with their subtitles and events would hold 7 GB, which the
    # allocator keeps after they are freed, and the index's rows then no longer fit in the page cache
    videos = [Video(v.video_id, v.duration) for v in iter_jsonl_corpus(root / "corpus.jsonl", moments=False)]
    n = [max(1, math.ceil(v.duration / clip - 1e-9)) for v in videos]  # the generator's clips; the writer checks
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    writer = IndexWriter(tmp, [v.video_id for v in videos], [v.duration for v in videos], [clip] * len(videos), n)
    t0 = time.time()
    with FeatureStore(root / "features" / "visual.h5", root / "features" / "subtitle.h5") as store:
        for a in range(0, len(videos), PART_VIDEOS):
            part = videos[a: a + PART_VIDEOS]
            index = encode_corpus(model, store, part, {v.video_id: clip for v in part}, CPU, batch_size=128,
                                  progress=False)
            writer.write(a, VideoIndex(index.video_ids, index.durations, index.clip_lengths, index.offsets,
                                       {"h1": index.arrays["h1"]}))
            done = a + len(part)
            if done % (25 * PART_VIDEOS) < PART_VIDEOS or done == len(videos):
                rate = done / (time.time() - t0)
                log(f"  encoded {done:,}/{len(videos):,} videos ({rate:.0f}/s, {(len(videos) - done) / rate / 60:.0f} "
                    "min left)")
    writer.close({"family": "xml", "fingerprint": f"bench-{len(videos)}"})
    os.replace(tmp, folder)


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


def exact_truth(retriever: XMLRetriever, q: np.ndarray, chunk: int = 8000) -> np.ndarray:
    """(B, V) exact video scores of the (B, S, d) query vectors, streamed over the (memory-mapped) clips
    (the same arithmetic as the retriever's ``exact_scores``)."""
    index = retriever.index
    off, a = np.asarray(index.offsets, np.int64), index.arrays[retriever.array]
    out = np.empty((len(q), len(index)), np.float32)
    qt = torch.from_numpy(np.ascontiguousarray(q, np.float32))
    for v0 in range(0, len(index), chunk):
        v1 = min(len(index), v0 + chunk)
        c = torch.from_numpy(np.asarray(a[off[v0]: off[v1]], np.float32))
        sim = torch.einsum("bsd,rsd->brs", qt, c) / torch.linalg.vector_norm(c, dim=-1).clamp_min(1e-12)
        out[:, v0:v1] = np.maximum.reduceat(sim.numpy(), off[v0:v1] - off[v0], axis=1).mean(-1)
    return out
