"""The first stage at scale: exact search against the ``scan`` stage, FAISS (IVF, HNSW) and Milvus on XML's clip vectors.

    python benchmarks/first_stage_scale.py --videos 100000 [--work /tmp/fs_scale] [--only scan,faiss:IVF4096,Flat]
    python benchmarks/first_stage_scale.py --videos 100000 --copies 10   # 1,000,000 videos (see below)
    python benchmarks/first_stage_scale.py --videos 1000000 --index INDEX   # the index `momentsearch index` wrote over it
    python benchmarks/first_stage_scale.py --videos 100000 --only milvus --milvus-uri http://127.0.0.1:19530

1. the synthetic generator's ``large`` preset, cut to ``--videos`` videos (features and queries);
2. XML with ``configs/xml/demo.yaml`` trained 2 epochs on the ``default`` preset (or ``--checkpoint``),
   so that the vectors are a trained model's (two streams, d = 128, unit vectors: Eq. 1's cosine);
3. the corpus encoded once into H1 (fp16, as an index folder stores it). ``--copies C``: C copies of
   it (copy 0 as it is; the others with Gaussian noise of ``--noise`` times each clip's RMS per
   dimension and, in odd copies, the clip order reversed; shuffled), memory-mapped on disk: how the
   1,000,000-video corpus is made, since generating and encoding it would take hours here;
4. the truth: each query's exact top 100 (at 1M streamed from the memory-mapped clips);
5. per first stage: build time, bytes per video, and at batch 1 the p50/p95 latency of retrieving a
   query's top 100 videos (``retrieve``: query encoding, the search, the exact re-score), recall@100
   against exact, and the bytes it reads per query;
6. the physical limit beside them: those bytes over this machine's memory bandwidth measured in the
   same run (the best of 5 sums over a 2 GiB array);
7. the serving row: a fresh process that memory-maps the index, loads the default stage from disk
   and answers the queries: start-up seconds and its peak RSS.
Rows are merged by label into ``results/first_stage_scale_<videos>.json`` (a row measured in another
invocation keeps its own ``command``). Everything is cached under ``--work``.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

import momentsearch  # noqa: F401  (first: its OpenMP default, GOMP_SPINCOUNT, applies before torch loads)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, command_line, report  # noqa: E402
from _scale_data import checkpoint, encoded, exact_truth, log, million  # noqa: E402
from _scale_specs import BUILD_KEYS, EXTRA_SPECS, SPECS  # noqa: E402
from momentsearch.data.batching import pad_tokens  # noqa: E402
from momentsearch.data.corpus import Moment  # noqa: E402
from momentsearch.data.loaders.jsonl import iter_jsonl_corpus  # noqa: E402
from momentsearch.models.xml.search import xml_stages  # noqa: E402
from momentsearch.search.first_stage import ExactFirstStage, build_first_stage  # noqa: E402
from momentsearch.search.first_stage.scan import default_refine, default_rescore  # noqa: E402
from momentsearch.search.index import VideoIndex  # noqa: E402
from momentsearch.serving.checkpoint import load_checkpoint  # noqa: E402
from momentsearch.text.queries import CachedTextFeatures  # noqa: E402

BATCH = 16  # the batched rows: a batch of this many queries, as the service's batcher makes under load


def bandwidth_gib_s(gib: float = 2.0, repeat: int = 5) -> float:
    a = np.ones(int(gib * 2**30 / 4), np.float32)
    best = min(_timed_sum(a) for _ in range(repeat))
    return a.nbytes / best / 2**30


def _timed_sum(a: np.ndarray, threads: int = 1) -> float:
    t = time.perf_counter()
    if threads == 1:
        a.sum()
    else:  # NumPy's sum releases the GIL: each thread reads its part
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(np.sum, np.array_split(a, threads)))
    return time.perf_counter() - t


def bandwidth2_gib_s(gib: float = 2.0, repeat: int = 5) -> float:
    """What both cores read together (the int8 pass runs on both): two halves summed on two threads."""
    a = np.ones(int(gib * 2**30 / 4), np.float32)
    return a.nbytes / min(_timed_sum(a, 2) for _ in range(repeat)) / 2**30


def read_bytes(spec: str, params: dict[str, str], index: VideoIndex, stage: object) -> float:
    """Bytes one query reads (memory traffic of the search itself; NaN where a library hides it)."""
    n, s, d = index.arrays["h1"].shape
    per_video = n * s * d * 2 / len(index)  # fp16 clip rows of a mean video, re-scored exactly
    if spec == "scan":  # the codes scanned (the funnel: coarse codes, then the refined videos' codes), the rows
        full = sum(c.nbytes for c in stage.codes)
        if stage.funnel:
            refine = stage.refine or default_refine(int(params["rescore"]), len(index))
            codes = sum(c.nbytes for c in stage.coarse[1]) + full * refine / len(index)
        else:
            codes = full
        if stage.rows8 is not None:  # int8 rows of the re-scored videos (and a float factor a row), fp16 of the exact
            return float(codes + int(params["rescore"]) * per_video * (d + 4) / (2 * d)
                         + (stage.exact or 200) * per_video)  # default: 2 k
        return float(codes + int(params["rescore"]) * per_video)
    if spec.startswith("faiss:IVF"):
        nlist = int(spec.split("IVF")[1].split(",")[0])
        cand = stage.stats["candidates"] / max(1, stage.stats["queries"])
        return float(n * s * d * 4 * int(params["nprobe"]) / nlist + cand * per_video)
    return float("nan")


def serve_probe(args: argparse.Namespace) -> None:
    """A fresh process holding what ``serve`` holds: the checkpoint, the memory-mapped index and the stage
    loaded from disk (not the benchmark's annotations); the parent's tokenised queries answered at batch 1."""
    ckpt = load_checkpoint(checkpoint(args.work, args.checkpoint))
    index = VideoIndex.load(args.work / f"h1_{args.videos}", mmap=True)
    if args.copies > 1:
        index = million(args.work, index, args.copies, args.noise)
    xml = xml_stages(ckpt.model.eval(), index)  # the query network, then the first stage: both timed below
    retriever, ask = xml.retriever, xml.queries
    spec, params = args.probe.partition(" ")[0], dict(x.split("=") for x in args.probe.split()[1:])
    stage = build_first_stage(retriever, index, spec, stage_folder(args), dict(params), family="xml")
    ready = time.time()  # the parent counts start-up from its launch: the interpreter and imports included
    batches, truth = torch.load(args.work / "probe_queries.pt"), np.load(truth_file(args))
    lat, got = [], []
    for tok, mask in batches:
        t = time.perf_counter()
        got.append(stage.retrieve(ask(tok, mask), 100)[1][0])
        lat.append(1000 * (time.perf_counter() - t))
    status = {x.split(":")[0]: int(x.split()[1]) for x in Path("/proc/self/status").read_text().splitlines()
              if x.startswith(("VmHWM", "RssAnon", "RssFile"))}
    hwm = status["VmHWM"]
    print(json.dumps({"ready": ready, "p50_ms": float(np.percentile(lat, 50)),  # VmHWM: ru_maxrss carries the
                      "p95_ms": float(np.percentile(lat, 95)), "recall@100": recall(got, truth),  # forked parent's
                      "peak_rss_MiB": hwm / 1024, "anon_rss_MiB": status["RssAnon"] / 1024,  # own memory
                      "file_rss_MiB": status["RssFile"] / 1024}))  # pages of memory-mapped files: page cache


def link_index(args: argparse.Namespace) -> None:
    """``--index``: the benchmark reads the index folder's H1 rows and first-stage files in place of its own."""
    if args.copies > 1 or not (args.index / "arrays" / "manifest.json").is_file():
        raise SystemExit(f"--index {args.index}: give an index folder (momentsearch index) and no --copies")
    (args.index / "first_stage").mkdir(exist_ok=True)
    for link, target in ((args.work / f"h1_{args.videos}", args.index / "arrays"),
                         (stage_folder(args), args.index / "first_stage")):
        if link.is_symlink() or not link.exists():
            link.unlink(missing_ok=True)
            link.symlink_to(target.resolve())
        elif link.resolve() != target.resolve():
            raise SystemExit(f"{link} is the benchmark's own; move it aside to measure --index {args.index}")


def recall(got: list[np.ndarray], truth: np.ndarray) -> float:
    return float(np.mean([len(set(a.tolist()) & set(b.tolist())) / len(b) for a, b in zip(got, truth, strict=True)]))


def tag(args: argparse.Namespace) -> str:
    """What names this corpus's files: its size, and ``_copies`` for the perturbed copies."""
    return f"{args.videos * args.copies}{'_copies' if args.copies > 1 else ''}"


def stage_folder(args: argparse.Namespace) -> Path:
    return args.work / f"first_stage_{tag(args)}"


def truth_file(args: argparse.Namespace) -> Path:
    return args.work / f"truth_{tag(args)}_{args.queries}.npy"


def results_name(args: argparse.Namespace) -> str:
    """``first_stage_scale_<videos>``; a generated corpus the size of the copies' adds ``_generated``, and the index
    folder of ``--index`` (what ``momentsearch index`` wrote) ``_cli``: its rows never replace the benchmark's own."""
    if args.index is not None:
        return f"first_stage_scale_{args.videos}_cli"
    big = args.copies == 1 and args.videos > 200_000
    return f"first_stage_scale_{args.videos * args.copies}{'_generated' if big else ''}"


def query_batches(args: argparse.Namespace, root: Path, ckpt: object) -> list:
    """The first ``--queries`` test captions, in file order (read line by line), tokenised one by one."""
    test = list(itertools.islice((m for m in iter_jsonl_corpus(root / "corpus.jsonl")
                                  if isinstance(m, Moment) and m.split == "test"), args.queries))
    qf = CachedTextFeatures(root / "features" / "queries_minilm.h5")
    qf.ensure(test, progress=False)
    feats = [qf.get(m.query_id, m.text) for m in test]
    return [pad_tokens(feats[i: i + 1], ckpt.family.max_tokens) for i in range(len(feats))]


def main() -> None:
    global BATCH
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--videos", type=int, default=100_000)
    ap.add_argument("--copies", type=int, default=1, help="perturbed copies of the corpus (10: 1M videos from 100k)")
    ap.add_argument("--noise", type=float, default=0.3, help="the copies' noise, times each clip's per-dimension RMS")
    ap.add_argument("--queries", type=int, default=200, help="test queries: latency and recall@100 against exact")
    ap.add_argument("--exact-queries", type=int, default=30, help="of those, timed through exact search at batch 1")
    ap.add_argument("--work", type=Path, default=Path("/tmp/fs_scale"))
    ap.add_argument("--checkpoint", type=Path, default=None)
    ap.add_argument("--index", type=Path, default=None, help="an index folder `momentsearch index` wrote over the "
                    "generated corpus of --videos: its arrays/ and first_stage/ are measured (linked into --work)")
    ap.add_argument("--only", default="", help="comma-separated specs to run (default: scan and IVF4096); also "
                                               "faiss:Flat, faiss:HNSW32, milvus; 'serving': the serving probe alone")
    ap.add_argument("--milvus-uri", default="", help="the Milvus row against this server (default: milvus-lite)")
    ap.add_argument("--keep", action="store_true", help="reuse the vector indexes a previous run built (latency only)")
    ap.add_argument("--advise-random", action="store_true",
                    help="advise the index's mapped rows MADV_RANDOM, as a serving process does once a first stage is "
                         "built (without it the kernel's read-around, 8 MB here, fills the page cache with neighbours)")
    ap.add_argument("--batch", type=int, default=BATCH, help="the batched rows' batch (the service's under load: 16)")
    ap.add_argument("--probe", default="", help=argparse.SUPPRESS)  # the serving probe's child process
    args = ap.parse_args()
    BATCH = args.batch
    torch.set_num_threads(2)
    args.work.mkdir(parents=True, exist_ok=True)
    if args.index is not None:
        link_index(args)
    if args.probe:
        return serve_probe(args)
    ckpt = load_checkpoint(checkpoint(args.work, args.checkpoint))
    model = ckpt.model.eval()
    root, index = encoded(args.work, args.videos, model, mmap=args.copies > 1, copies=args.copies, noise=args.noise)
    if args.advise_random:
        log(f"advised random: {index.advise_random()} arrays")
    n_clips, s, d = index.arrays["h1"].shape
    log(f"{len(index):,} videos, {n_clips:,} clips, {s} streams of d={d}")
    batches = query_batches(args, root, ckpt)
    xml = xml_stages(model, index)  # the query network, then the first stage: both timed below
    retriever, ask = xml.retriever, xml.queries
    q = np.concatenate([retriever.query_vectors(ask(tok, mask)) for tok, mask in batches])
    if truth_file(args).exists():
        truth = np.load(truth_file(args))
    else:
        log(f"exact truth for {len(q)} queries")
        truth = np.argsort(-exact_truth(retriever, q), axis=1, kind="stable")[:, :100]
        np.save(truth_file(args), truth)
    fp16_bytes = index.arrays["h1"].nbytes
    rows = []
    if len(index) <= 200_000 and not args.only:
        exact = ExactFirstStage(retriever)
        t = time.perf_counter()
        exact.retrieve(ask(*batches[0]), 100)  # the fp32 unit copy of every clip, made once
        prepare_s, lat = time.perf_counter() - t, []
        for tok, mask in batches[: args.exact_queries]:
            t = time.perf_counter()
            exact.retrieve(ask(tok, mask), 100)
            lat.append(1000 * (time.perf_counter() - t))
        rows.append(row("exact (every clip, fp32 in memory)", prepare_s, 2 * fp16_bytes, lat, 1.0, len(index),
                        2 * fp16_bytes))
        retriever._clips = None  # the exact copy goes: the other stages hold their own
        gc.collect()
    elif not args.only:
        lat = []
        for i in range(3):
            t = time.perf_counter()
            exact_truth(retriever, q[i: i + 1])
            lat.append(1000 * (time.perf_counter() - t))
        rows.append(row("exact (every clip, fp16 memory-mapped, streamed)", 0.0, fp16_bytes, lat, 1.0, len(index),
                        fp16_bytes))
    bw = bandwidth_gib_s()
    log(f"memory bandwidth {bw:.1f} GiB/s")
    # "serving": the serving probe alone; a comma starts a new spec only before a spec's name (faiss:IVF4096,Flat)
    only = {x for x in re.split(r",(?=scan|faiss|milvus|serving)", args.only) if x}

    def wanted(sp: str, pa: dict[str, str]) -> bool:  # "--only scan", "--only scan:coarse=16:m=32", "faiss:Flat"
        for item in only:
            if item != sp and not item.startswith(sp + ":"):
                continue
            keys = [k for k in item[len(sp):].split(":") if k]
            if all(pa.get(k.partition("=")[0], "") == k.partition("=")[2] for k in keys):
                return True
        return False

    specs = [(sp, pa) for sp, pa in SPECS + EXTRA_SPECS if (wanted(sp, pa) if only else (sp, pa) in SPECS)]
    if args.copies > 1:
        specs = [(sp, pa) for sp, pa in specs if sp == "scan"]
    built: dict[tuple, float] = {}
    stages: dict[tuple, object] = {}
    folder = stage_folder(args)
    if not args.keep and only != {"serving"}:
        shutil.rmtree(folder, ignore_errors=True)  # built anew in this run (search parameters share a build)
    for spec, params in specs:
        spec_used = f"milvus:{args.milvus_uri}" if spec == "milvus" and args.milvus_uri else spec
        label = (("milvus server" if args.milvus_uri else "milvus-lite") if spec == "milvus" else spec) + "".join(
            f" {k}={v}" for k, v in params.items() if k != "nlist") + (f" (batch {BATCH})" if BATCH != 16 else "")
        build_key = (spec_used, tuple(sorted((k, v) for k, v in params.items() if k in BUILD_KEYS)))
        if build_key not in stages:
            for old in list(stages):  # one stage in memory at a time, as a server holds it (rows of one build are
                stages.pop(old).close()  # consecutive): at 1M several would crowd the index's pages out of memory
            stage = None
            gc.collect()
            log(f"building {label}")
            t = time.perf_counter()
            stages[build_key] = build_first_stage(retriever, index, spec_used, folder, dict(params), family="xml",
                                                  progress=True)
            built[build_key] = time.perf_counter() - t
        stage = stages[build_key]
        if spec == "scan":
            stage.rescore, stage.exact = int(params["rescore"]), int(params.get("exact", 0)) or None
            stage.int8_batch = int(params.get("int8_batch", 0)) or None
        stage.retrieve(ask(*batches[0]), 100)  # warm-up (the scan's loop compiles here on a first run)
        stage.stats.update(queries=0, uncertified=0, candidates=0)
        got, lat = [], []
        for tok, mask in batches:
            t = time.perf_counter()
            got.append(stage.retrieve(ask(tok, mask), 100)[1][0])
            lat.append(1000 * (time.perf_counter() - t))
        rows.append(row(label, built[build_key], stage.nbytes, lat, recall(got, truth),
                        stage.stats["candidates"] / max(1, stage.stats["queries"]),
                        read_bytes(spec, params, index, stage)))
        if spec == "scan":  # batches of BATCH: the ms a query; the same candidates as one query at a time
            lat_b, same, got_b = [], 0, []
            for a in range(0, len(batches) - BATCH + 1, BATCH):
                t = time.perf_counter()
                queries = ask(*joined(batches[a: a + BATCH]))  # timed: the query network, as at batch 1
                got_b += list(stage.retrieve(queries, 100)[1])
                lat_b.append(1000 * (time.perf_counter() - t) / BATCH)
                qv = retriever.query_vectors(queries)  # the same vectors, a batch and one by one
                r = stage.rescore
                together = stage.candidates(qv, r) if not stage.funnel else None
                same += sum(together is not None and np.array_equal(together[i], stage.candidates(qv[i: i + 1], r)[0])
                            for i in range(BATCH))
            n = len(lat_b) * BATCH
            if stage.rows8 is not None and BATCH >= (stage.int8_batch or stage.rows8.batch):  # the int8 pass
                r8 = stage.rows8
                per_batch = r8.rows.nbytes + r8.mult.nbytes + r8.rowsum.nbytes + BATCH * (
                    stage.exact or 200) * index.arrays["h1"][0].nbytes * len(index.arrays["h1"]) / len(index)
                rows[-1][f"floor ms/query at batch {BATCH}"] = 1000 * per_batch / BATCH / 2**30 / bandwidth2_gib_s()
            rows[-1].update({f"ms/query at batch {BATCH}": float(np.median(lat_b)), "batch": BATCH,
                             f"recall@100 at batch {BATCH}": recall(got_b, truth[: len(got_b)]),
                             "same candidates batched": f"{same}/{n}" if not stage.funnel else "n/a (one pass)"})
        log(str(rows[-1]))
    for stage in stages.values():
        stage.close()
    if not args.only or only == {"serving"}:
        default = "scan"  # as ``auto`` serves it: its own rescore rule (scan.default_rescore)
        torch.save(batches, args.work / "probe_queries.pt")
        cmd = [sys.executable, __file__, "--videos", str(args.videos), "--copies", str(args.copies), "--noise",
               str(args.noise), "--queries", str(args.queries), "--work", str(args.work), "--probe", default]
        launched = time.time()
        out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
        out["startup_s"] = out.pop("ready") - launched
        log(f"serving probe: {out}")
        rows.append({**row("serving process: scan as auto serves it", 0.0, 0, [out["p50_ms"]],
                           out["recall@100"], default_rescore(100, len(index)), float("nan")), "p95_ms": out["p95_ms"],
                     "startup_s": out["startup_s"], "peak_rss_MiB": out["peak_rss_MiB"],
                     "anon_rss_MiB": out["anon_rss_MiB"], "file_rss_MiB": out["file_rss_MiB"]})
    for r in rows:
        r["videos"] = len(index)
        r["limit_ms"] = 1000 * r.pop("bytes/query") / 2**30 / bw if "bytes/query" in r else r.get("limit_ms")
        r["bandwidth_GiB/s"] = bw
    name = results_name(args)
    command = command_line()
    report(name, merged(name, rows, command), command)


def joined(batches: list) -> tuple[torch.Tensor, torch.Tensor]:
    """Batch-1 (tokens, mask) pairs as one batch, padded to the longest."""
    n = max(t.shape[1] for t, _ in batches)
    tok = torch.cat([torch.nn.functional.pad(t, (0, 0, 0, n - t.shape[1])) for t, _ in batches])
    return tok, torch.cat([torch.nn.functional.pad(m, (0, n - m.shape[1])) for _, m in batches])


def row(label: str, build_s: float, nbytes: float, lat: list[float], rec: float, cand: float, read: float) -> dict:
    return {"first stage": label, "build_s": build_s, "bytes/video": float("nan"), "_nbytes": nbytes,
            "p50_ms": float(np.percentile(lat, 50)), "p95_ms": float(np.percentile(lat, 95)), "recall@100": rec,
            "candidates/query": float(cand), "bytes/query": read}


def merged(name: str, rows: list[dict], command: str) -> list[dict]:
    """This run's rows over the stored ones of the same labels; each row keeps the command that made it."""
    path = RESULTS / f"{name}.json"
    stored = json.loads(path.read_text()) if path.exists() else {"rows": []}
    old = stored["rows"]
    for r in old:  # rows of a file written before rows carried their command: that run's
        r.setdefault("command", f"{stored.get('command')} (an earlier session: same seeded data and model)")
    for r in rows:
        n = r.pop("_nbytes")
        r["bytes/video"] = n / r["videos"] if n else float("nan")
        r["command"] = command
    mine = {r["first stage"] for r in rows}
    keep = [r for r in old if r["first stage"] not in mine]
    cols = list(dict.fromkeys(c for r in keep + rows for c in r))
    return [{c: r.get(c, float("nan")) for c in cols} for r in keep + rows]


if __name__ == "__main__":
    main()
