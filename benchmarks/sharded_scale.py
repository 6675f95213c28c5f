"""Ten million videos as 10 shards of the generated million, served by ``momentsearch serve --ray`` from local
Ray nodes: start-up, p50 at one client, requests/s and p99 under 16 clients, memory per node.

    python benchmarks/sharded_scale.py [--work /tmp/fs_scale] [--shards 10] [--nodes 5] [--seconds 60]

Needs ``benchmarks/first_stage_scale.py --videos 1000000`` run first (its ``h1_1000000`` rows, its ``scan`` stage
and its XML checkpoint under ``--work``). This disk cannot hold 10 M videos' rows (about 174 GB), so **the shards
share one million's files on disk** (symbolic links) under distinct video ids (``s3/syn_000042``): the same rows,
the same codes. The first stage's retrieval states ``h1`` also stand in for the localizer's ``h2`` (same shape; the
million was encoded for its first stage only), so the localizer does its real work on other numbers. The answers
are therefore not a 10 M benchmark's: what is measured is the cost, the memory and that it runs and merges; that
the merge is exact is tested in ``tests/test_shards.py``. Writes ``results/sharded_scale.json``.

The nodes are ``ray.cluster_utils.Cluster`` nodes on this machine (each a raylet with its own object store), the
server a separate process (``momentsearch serve SHARDS --ray ADDRESS``) that starts one actor per shard with one
torch thread each; everything shares the machine's 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, report  # noqa: E402
from momentsearch.fileio import write_json  # noqa: E402
from service_load import QUERIES, free_port, load  # noqa: E402
from service_soak import start  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def build_shards(work: Path, out: Path, n: int) -> None:
    """``n`` shard folders over the million's files (links), each with its own ids, manifests and scan layout."""
    import torch

    from momentsearch.search.first_stage.scan import layout_key, stage_key
    from momentsearch.search.index import VideoIndex
    from momentsearch.serving.checkpoint import load_checkpoint
    from momentsearch.serving.index_info import CorpusRef, IndexInfo
    from momentsearch.serving.shards import ShardEntry, ShardManifest

    src = work / "h1_1000000"
    ckpt_path = work / "xml" / "checkpoints" / "best.pt"
    ckpt = load_checkpoint(ckpt_path)
    man = json.loads((src / "manifest.json").read_text())
    from momentsearch.search.first_stage.scan import default_coarse

    coarse = default_coarse(32, man["n_clips"])  # the stage `serve` builds by default at this size: link that one
    (stage_src,) = [d for d in (work / "first_stage_1000000").glob("scan_*")
                    if json.loads((d / "manifest.json").read_text())["coarse_m"] == coarse]
    stage_man = json.loads((stage_src / "manifest.json").read_text())
    entries = []
    for s in range(n):
        name = f"shard_{s:03d}"
        d = out / name
        entries.append(ShardEntry(name, man["n_videos"], man["n_clips"]))
        if (d / "index.json").is_file():
            continue
        (d / "arrays").mkdir(parents=True, exist_ok=True)
        ids = [f"s{s}/{v}" for v in man["video_ids"]]
        for f in ("clip.h1.npy", "clip_lengths.npy", "durations.npy", "offsets.npy"):
            os.symlink(src / f, d / "arrays" / f)
        os.symlink(src / "clip.h1.npy", d / "arrays" / "clip.h2.npy")  # h1 stands in for h2 (same shape)
        write_json(d / "arrays" / "manifest.json", {
            **man, "video_ids": ids, "arrays": {"h1": man["arrays"]["h1"], "h2": man["arrays"]["h1"]},
            "meta": {"family": "xml", "fingerprint": ckpt.fingerprint}, "dtypes": {"clip.h1": "float16", "clip.h2": "float16"}})
        os.symlink(ckpt_path, d / "model.pt")
        index = VideoIndex.load(d / "arrays")
        source = ckpt.family.stages(ckpt.model.eval(), index, torch.device("cpu")).retriever
        stage = d / "first_stage" / stage_key(source, stage_man["m"], stage_man["coarse_m"], stage_man.get("bits", 8))
        stage.mkdir(parents=True)
        for f in stage_src.iterdir():
            if f.name != "manifest.json":
                os.symlink(f, stage / f.name)
        write_json(stage / "manifest.json", {**stage_man, "layout": layout_key(index)})
        IndexInfo("xml", ckpt.fingerprint, CorpusRef(), dict.fromkeys(ids, ""), str(ckpt_path), ckpt.family.text_encoder,
                  ckpt.features, man["n_videos"], man["n_clips"], ckpt.search_settings()).write(d)
        print(f"  {name} linked", flush=True)
    ShardManifest("xml", ckpt.fingerprint, tuple(entries)).write(out)


def memory_by_node() -> dict[str, dict[str, float]]:
    """Per Ray node (its raylet's pid): its shard actors' resident memory now and at peak, and their own
    (anonymous) memory apart from mapped files' pages (shared between the shards: the same files), MiB. An actor
    is a child process of its node's raylet."""
    out: dict[str, dict[str, float]] = {}
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or not (proc / "cmdline").read_bytes().startswith(b"ray::_ShardActor"):
                continue
            st = {x.split(":")[0]: x.split(":")[1].strip() for x in (proc / "status").read_text().splitlines()}
        except OSError:
            continue
        n = out.setdefault(f"raylet {st['PPid']}", {"actors": 0, "rss_MiB": 0.0, "peak_rss_MiB": 0.0, "anon_MiB": 0.0})
        n["actors"] += 1
        for key, field in (("rss_MiB", "VmRSS"), ("peak_rss_MiB", "VmHWM"), ("anon_MiB", "RssAnon")):
            n[key] += int(st[field].split()[0]) / 1024
    return out


def per_core(out: Path, threads: int = 1) -> dict:
    """One shard (a million videos) searched in this process with ``threads`` torch threads, its files warm:
    ms a query at batch 1 and at batch 16 (the whole search: encode, first stage, localizer): the per-core rate
    the paper figure of docs/sharding.md starts from."""
    import torch

    from momentsearch.serving.searcher import load_index

    torch.set_num_threads(threads)
    s = load_index(out / "shard_000", "cpu")
    for q in QUERIES[:12]:  # warm: the codes and the rows the first queries touch
        s.search(q, k=10)
    t = time.perf_counter()
    for q in QUERIES[12:42]:
        s.search(q, k=10)
    one = 1000 * (time.perf_counter() - t) / 30
    t = time.perf_counter()
    for b in range(3):
        s.search_many(QUERIES[42 + 16 * b: 58 + 16 * b], k=10)
    batched = 1000 * (time.perf_counter() - t) / 48
    return {"threads": threads, "ms_per_query_batch_1": round(one, 1), "ms_per_query_batch_16": round(batched, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/fs_scale"))
    ap.add_argument("--shards", type=int, default=10)
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--param", action="append", default=[], help="a first-stage parameter (default: as serve)")
    ap.add_argument("--per-core", action="store_true", help="only: one shard in this process, 1 thread, warm")
    args = ap.parse_args()
    if args.per_core:
        build_shards(args.work, args.work / f"shards_{args.shards}", args.shards)
        row = per_core(args.work / f"shards_{args.shards}")
        report("sharded_scale_per_core", [row], "python benchmarks/sharded_scale.py --per-core")
        return 0
    import ray
    from ray.cluster_utils import Cluster

    out = args.work / f"shards_{args.shards}"
    t = time.time()
    build_shards(args.work, out, args.shards)
    print(f"shard folders: {time.time() - t:.0f} s", flush=True)
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False,
                                                            "object_store_memory": 200 << 20})
    for _ in range(args.nodes - 1):
        cluster.add_node(num_cpus=1, object_store_memory=200 << 20)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)
    port = free_port()
    log = args.work / "sharded_serve.log"
    log.write_text("")
    t0 = time.time()
    proc = start(out, port, log, "auto", ("--ray", cluster.address, "--max-batch", "32", "--timeout-ms", "600000",
                                          *[x for p in args.param for x in ("--param", p)]))
    base = f"http://127.0.0.1:{port}"
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"the server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(base + "/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        startup = time.time() - t0
        health = httpx.get(base + "/health").json()
        print(f"ready in {startup:.0f} s: {health.get('videos')} videos, {health.get('first_stage')}", flush=True)
        t1 = time.time()
        for q in QUERIES[:12]:  # the first queries fault the codes and rows into the page cache: not timed
            httpx.post(base + "/v1/search", json={"query": q, "k": 10}, timeout=600).raise_for_status()
        print(f"warm-up: 12 queries in {time.time() - t1:.0f} s", flush=True)
        lat1, err1, _ = asyncio.run(load(base, 1, args.seconds / 2, timeout=600))
        print(f"1 client: {len(lat1)} queries, p50 {np.percentile(lat1, 50):.0f} ms", flush=True)
        lat, err, wall = asyncio.run(load(base, args.clients, args.seconds, timeout=600))
        print(f"{args.clients} clients: {len(lat) / wall:.2f} requests/s, p50 {np.percentile(lat, 50):.0f} ms, "
              f"p99 {np.percentile(lat, 99):.0f} ms, {len(err1) + len(err)} errors", flush=True)
        mem = memory_by_node()
    finally:
        proc.terminate()
        proc.wait(60)
        ray.shutdown()
        cluster.shutdown()
    row = {"videos": health.get("videos"), "shards": args.shards, "nodes": args.nodes, "first stage": health.get("first_stage"),
           "startup_s": round(startup, 1), "p50_ms_1_client": float(np.percentile(lat1, 50)),
           "queries_1_client": len(lat1), "clients": args.clients, "requests_per_s": len(lat) / wall,
           "p50_ms": float(np.percentile(lat, 50)), "p99_ms": float(np.percentile(lat, 99)), "errors": len(err1) + len(err),
           "actors_peak_rss_MiB_by_node": {k: round(v["peak_rss_MiB"]) for k, v in mem.items()},
           "actors_anon_MiB_by_node": {k: round(v["anon_MiB"]) for k, v in mem.items()},
           "actors_by_node": {k: v["actors"] for k, v in mem.items()}}
    report("sharded_scale", [row], command_line(),
           extra={"shared_rows": f"{args.shards} shards link one generated million's files; h1 stands in for h2"})
    return 1 if row["errors"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
