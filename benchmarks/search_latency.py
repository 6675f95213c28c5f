"""Search latency over an index folder: 200 queries one at a time (p50) and 300 in batches of 64 (ms a query).

    python benchmarks/search_latency.py --index runs/demo/index --benchmark runs/demo/benchmark [--tag after]

The queries are the benchmark's test captions; the first stage is exact and torch runs on 2 threads. To compare
two versions of the code, run it from each checkout (each one's own environment) on the same index, alternating:
docs/architecture.md reports the query-side changes of issue 39 measured this way.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, default=Path("runs/demo/index"))
    ap.add_argument("--benchmark", type=Path, default=Path("runs/demo/benchmark"))
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    import torch

    torch.set_num_threads(2)
    import momentsearch
    from momentsearch.data.synthetic import SyntheticBenchmark

    s = momentsearch.load(args.index, first_stage="exact")
    qs = [m.text for m in SyntheticBenchmark.load(args.benchmark).corpus.split("test").moments[:300]]
    s.search_many(qs[:20], k=10)  # warm: the text encoder, the caches
    one = []
    for q in qs[20:220]:
        t = time.perf_counter()
        s.search(q, k=10)
        one.append(1000 * (time.perf_counter() - t))
    t = time.perf_counter()
    s.search_many(qs, k=10, batch_size=64)
    many = 1000 * (time.perf_counter() - t) / len(qs)
    print(f"{args.tag} batch-1 p50 {statistics.median(one):.2f} ms; batches of 64: {many:.2f} ms a query")


if __name__ == "__main__":
    main()
