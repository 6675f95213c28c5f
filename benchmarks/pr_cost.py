"""What many-to-many training costs: seconds per training epoch with and without the extra pairs
and losses (issue 4), on the experiment benchmark, one thread, nothing else running.

    python benchmarks/pr_cost.py [--benchmark runs/experiments/benchmarks/experiment] [--epochs 1]

Needs the benchmark and its Phi_np-vp and BoW tables, which `momentsearch experiment
configs/experiments/pr_tables_5_6.yaml` (and wray_threshold.yaml) write. Each row trains one
epoch of configs/xml/experiment.yaml (no validation) with one condition; batching time (reading
features, cutting the pair block) is included.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, peak_rss_mib, report  # noqa: E402
from momentsearch.api import load_train_config  # noqa: E402
from momentsearch.device import torch_settings  # noqa: E402
from momentsearch.models.xml import RelevanceTrainConfig  # noqa: E402
from momentsearch.training.trainer import Trainer  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--benchmark", type=Path, default=Path("runs/experiments/benchmarks/experiment"))
    ap.add_argument("--epochs", type=int, default=1)
    args = ap.parse_args()
    rel = args.benchmark / "relevance"
    pairs = str(rel / "pairs_np-vp")
    conditions = {
        "XML": RelevanceTrainConfig(),
        "+PR": RelevanceTrainConfig(method="pairs", table=pairs, theta=0.7),
        "+SL": RelevanceTrainConfig(lambda_vcmr=1.0),
        "+SL+PR": RelevanceTrainConfig(method="pairs", table=pairs, theta=0.7, lambda_vcmr=1.0),
        "threshold T=0.3 (BoW)": RelevanceTrainConfig(method="threshold", table=str(rel / "proxy_bow_top100.npz"),
                                                      theta=0.3),
    }
    base = load_train_config("configs/xml/experiment.yaml", {"dataset": {"benchmark": str(args.benchmark)}})
    rows = []
    for name, rc in conditions.items():
        with tempfile.TemporaryDirectory() as tmp:
            cfg = dataclasses.replace(base, out_dir=tmp, model=dataclasses.replace(base.model, relevance=rc))
            t = time.perf_counter()
            trainer = Trainer(cfg, progress=False)
            setup = time.perf_counter() - t
            with torch_settings(cfg.num_threads, cfg.deterministic):
                stats = [trainer.train_epoch(e) for e in range(args.epochs)]
            sec = sum(s["train_seconds"] for s in stats) / len(stats)
            rows.append({"condition": name, "seconds/epoch": sec, "queries/s": stats[-1]["queries_per_second"],
                         "pairs/batch": stats[-1].get("pairs_per_batch", 0.0), "setup_s": setup})
    xml = rows[0]["seconds/epoch"]
    for r in rows:
        r["x XML"] = r["seconds/epoch"] / xml
    print(f"peak RSS {peak_rss_mib():.0f} MiB")
    report("pr_cost", rows, command_line())


if __name__ == "__main__":
    main()
