"""XML speed on the synthetic presets: training throughput, search latency, index memory.

    python benchmarks/xml_speed.py --benchmark runs/demo/benchmark [--benchmark DIR_OF_LARGE ...]

For each benchmark folder (generate one with `momentsearch generate --preset large --out DIR`):
* training throughput (queries/s) over 8 batches of 128, for the demo config (d=128, batches grouped
  4 queries per video) and the paper's config (d=256, random batches), on the queries of randomly
  chosen training videos (>= 2,048 queries; the cost of a batch does not depend on the corpus size);
* search latency per query (p50 / p95, ms) over the test split's videos, for batches of 1 and of 64
  queries: retrieval over every video, localization in the top 100, NMS; the index is built first;
* index memory per video (KiB): the fp16 H1 and H2 states of every clip.
The model is freshly initialised: speed does not depend on the weights.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, peak_rss_mib, report  # noqa: E402
from momentsearch.data.batching import pad_tokens  # noqa: E402
from momentsearch.data.synthetic import SyntheticBenchmark  # noqa: E402
from momentsearch.models.family import InputDims, ModelFamily, Step, TrainingData  # noqa: E402
from momentsearch.models.registry import create_family  # noqa: E402
from momentsearch.models.xml import XMLConfig  # noqa: E402
from momentsearch.search.engine import SearchEngine  # noqa: E402
from momentsearch.text.queries import CachedTextFeatures  # noqa: E402

CPU = torch.device("cpu")


def built(bench: SyntheticBenchmark, settings: object) -> tuple[ModelFamily, torch.nn.Module]:
    store = bench.features()
    family = create_family(settings)
    dims = InputDims(store.visual.dim, store.subtitle.dim if store.subtitle else 0, CachedTextFeatures.dim)
    return family, family.build(dims)


def train_throughput(bench: SyntheticBenchmark, settings: object, n_batches: int = 8, epoch: int = 0,
                     batch_size: int = 128) -> float:
    """Queries per second of training steps at ``epoch`` (the family's ``prepare_epoch`` runs first)."""
    store = bench.features()
    rng = np.random.default_rng(0)
    train = bench.corpus.split("train")
    by_video = train.moments_by_video()
    sample: list = []
    for v in rng.permutation(sorted(by_video)):  # whole videos, so batches look like a full epoch's
        sample.extend(by_video[v])
        if len(sample) >= 2048:
            break
    sub = train.with_moments(sample)
    queries = CachedTextFeatures(bench.root / "features" / "queries_minilm.h5")
    family, model = built(bench, settings)
    model.train()
    opt = family.optimizer(model, 1e-4)
    data = family.batches(TrainingData(sub, store, queries, {v: bench.config.clip_length for v in sub.videos}))
    gen = torch.Generator().manual_seed(0)
    step = Step(epoch, gen)  # XML at epoch 0: random in-batch negatives
    family.prepare_epoch(model, data, step, CPU)
    batches = (data.collate(idx) for idx in data.sampler(batch_size, gen))
    b = next(batches)  # warm-up
    loss, _ = family.loss(model, b, step)
    loss.backward()
    n, t = 0, time.perf_counter()
    for _ in range(n_batches):
        b = next(batches)
        loss, _ = family.loss(model, b, step)
        opt.zero_grad()
        loss.backward()
        opt.step()
        n += len(b.query_ids)
    return n / (time.perf_counter() - t)


def search_latency(bench: SyntheticBenchmark, settings: object, k_videos: int = 100) -> dict[str, float]:
    store = bench.features()
    test = bench.corpus.split("test")
    family, model = built(bench, settings)
    model.eval()
    t = time.perf_counter()
    index = family.encode_corpus(model, store, list(test.videos.values()),
                                 {v: bench.config.clip_length for v in test.videos}, CPU, progress=False)
    build_s = time.perf_counter() - t
    queries = CachedTextFeatures(bench.root / "features" / "queries_minilm.h5")
    ms = test.moments[:64 * 4]
    queries.ensure(ms, progress=False)
    engine = SearchEngine(family.stages(model, index, CPU), index, k_videos=k_videos)
    feats = [queries.get(m.query_id, m.text) for m in ms]
    max_tokens = family.max_tokens
    out = {"videos": len(index), "index_build_s": build_s, "index_KiB_per_video": index.nbytes / len(index) / 1024}
    for bs in (1, 64):
        per_query = []
        n_batches = 40 if bs == 1 else 4
        engine.search(["w"], *pad_tokens(feats[:1], max_tokens))  # warm-up (normalises H1 once)
        for i in range(n_batches):
            chunk = feats[i * bs: (i + 1) * bs]
            tokens, mask = pad_tokens(chunk, max_tokens)
            t = time.perf_counter()
            engine.search([str(j) for j in range(len(chunk))], tokens, mask)
            per_query.append((time.perf_counter() - t) * 1000 / len(chunk))
        out[f"batch{bs}_p50_ms"] = float(np.percentile(per_query, 50))
        out[f"batch{bs}_p95_ms"] = float(np.percentile(per_query, 95))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--benchmark", action="append", type=Path, required=True)
    args = ap.parse_args()
    torch.set_num_threads(2)
    rows = []
    for root in args.benchmark:
        bench = SyntheticBenchmark.load(root)
        demo, paper = XMLConfig(hidden=128, queries_per_video=4), XMLConfig()
        row = {"preset": bench.config.name, "train_videos": len(bench.corpus.split("train").videos),
               "train_q/s demo (d128, grouped)": train_throughput(bench, demo),
               "train_q/s paper (d256, random)": train_throughput(bench, paper)}
        lat = search_latency(bench, demo)
        row.update({f"search {k}": v for k, v in lat.items()})
        row["peak_rss_MiB"] = peak_rss_mib()
        rows.append(row)
        print(row, flush=True)
    report("xml_speed", rows, command_line())


if __name__ == "__main__":
    main()
