"""MINUTE's training and search speed beside XML's, in one run on one machine.

    python benchmarks/family_speed.py --benchmark runs/experiments/benchmarks/small

Both at the settings of the comparison (configs/xml/small.yaml, configs/minute/small.yaml; d=128):
* training throughput (queries/s, 2 threads): XML's steps; MINUTE's retriever steps (InfoNCE,
  batch 128) and localizer steps (Shared-Norm over the positive and 2 negatives, batch 32);
* search latency per query (p50 / p95 ms, batches of 1 and 64) over the test split's videos:
  XML localizes in the top 100 videos; MINUTE in the top 10 (the paper's setting) and the top 100;
* index build time and memory per video. Freshly initialised models: speed does not depend on weights.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, peak_rss_mib, report  # noqa: E402
from momentsearch.data.synthetic import SyntheticBenchmark  # noqa: E402
from momentsearch.models.minute import MINUTEConfig  # noqa: E402
from momentsearch.models.xml import XMLConfig  # noqa: E402
from xml_speed import search_latency, train_throughput  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--benchmark", type=Path, required=True)
    args = ap.parse_args()
    torch.set_num_threads(2)
    bench = SyntheticBenchmark.load(args.benchmark)
    xml = XMLConfig(hidden=128, queries_per_video=4)
    minute = MINUTEConfig(hidden=128, retriever_epochs=1, n_negatives=2, negative_pool=50, n_max=20)
    rows = [
        {"model": "XML", "train q/s": train_throughput(bench, xml), **search_latency(bench, xml, 100), "top K": 100},
        {"model": "MINUTE retriever", "train q/s": train_throughput(bench, minute)},
        {"model": "MINUTE localizer", "train q/s": train_throughput(bench, minute, n_batches=6, epoch=1, batch_size=32)},
        {"model": "MINUTE", **search_latency(bench, minute, 10), "top K": 10},
        {"model": "MINUTE", **search_latency(bench, minute, 100), "top K": 100},
    ]
    cols = list(dict.fromkeys(k for r in rows for k in r))
    rows = [{c: r.get(c, "") for c in cols} for r in rows]
    rows[-1]["peak_rss_MiB"] = peak_rss_mib()
    for r in rows[:-1]:
        r["peak_rss_MiB"] = ""
    report("family_speed", rows, command_line())


if __name__ == "__main__":
    main()
