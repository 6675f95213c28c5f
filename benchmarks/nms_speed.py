"""What temporal NMS costs in the ranking of a test split: the vectorised NMS against the loop it
replaced and against no NMS, in one run, with the rankings checked identical.

    python benchmarks/nms_speed.py [--benchmark DIR] [--checkpoint CKPT] [--preset small]

Ranks every annotated query of the test split (VCMR over every test video, top 100 videos, 20
candidates per video, NMS at 0.7; SVMR on the gold video) three times: NMS by the per-query loop
(``temporal_nms_grid_loop``), by the vectorised ``temporal_nms_grid`` (what the engine uses), and with
NMS off (threshold 1.0, the sort alone). Without ``--checkpoint`` the model is a freshly initialised
XML at the paper's size (d 256): speed does not depend on the weights, and the suppression rate is printed.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, report  # noqa: E402
from momentsearch.data.dataset import DatasetConfig, open_dataset  # noqa: E402
from momentsearch.data.synthetic import generate, load_preset  # noqa: E402
from momentsearch.evaluation.ranking import rank_split  # noqa: E402
from momentsearch.models.family import InputDims  # noqa: E402
from momentsearch.models.registry import create_family  # noqa: E402
from momentsearch.models.xml import XMLConfig  # noqa: E402
from momentsearch.search import engine as engine_module  # noqa: E402
from momentsearch.search.nms import temporal_nms_grid, temporal_nms_grid_loop  # noqa: E402
from momentsearch.text.queries import dataset_query_features  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--benchmark", type=Path, default=Path("runs/bench_small"))
    ap.add_argument("--preset", default="small", help="generated into --benchmark when it does not exist")
    ap.add_argument("--checkpoint", type=Path)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if not (args.benchmark / "benchmark.yaml").exists():
        generate(load_preset(args.preset), args.benchmark, progress=True)
    ds = open_dataset(DatasetConfig(benchmark=str(args.benchmark)).resolved())
    store = ds.features()
    queries = dataset_query_features(ds.config.query_features, ds.config.query_cache)
    if args.checkpoint:
        from momentsearch.serving.checkpoint import load_checkpoint

        ck = load_checkpoint(args.checkpoint)
        family, model = ck.family, ck.model
    else:
        torch.manual_seed(0)
        family = create_family(XMLConfig(hidden=256))
        model = family.build(InputDims(store.visual.dim, store.subtitle.dim if store.subtitle else 0, queries.dim))
    test = ds.split("test")
    lengths = ds.clip_lengths(test)
    _, index = rank_split(family, model, test, store, queries, lengths, progress=False)  # index built once, warm-up
    runs: dict[str, tuple[float, dict]] = {}
    for name, nms, threshold in (("loop", temporal_nms_grid_loop, 0.7), ("vectorised", temporal_nms_grid, 0.7),
                                 ("no NMS", temporal_nms_grid, 1.0)):
        engine_module.temporal_nms_grid = nms  # type: ignore[attr-defined]
        t = time.perf_counter()
        ranked, _ = rank_split(family, model, test, store, queries, lengths, nms_threshold=threshold,
                               index=index, progress=False)
        runs[name] = (time.perf_counter() - t, ranked)
    engine_module.temporal_nms_grid = temporal_nms_grid  # type: ignore[attr-defined]
    same = all(np.array_equal(getattr(runs["loop"][1][t], f), getattr(runs["vectorised"][1][t], f), equal_nan=True)
               for t in ("VCMR", "SVMR") for f in ("video_idx", "start", "end", "score"))
    base = runs["no NMS"][0]
    vcmr = runs["vectorised"][1]["VCMR"]
    rows = [{"NMS": name, "seconds": sec, "vs no NMS": f"+{100 * (sec / base - 1):.1f} %",
             "queries": len(vcmr.query_ids), "identical to loop": same if name != "no NMS" else "-"}
            for name, (sec, _) in runs.items()]
    print(f"test split: {len(test.videos)} videos, {len(vcmr.query_ids)} queries; moments kept per query after NMS: "
          f"{float((vcmr.video_idx >= 0).sum(1).mean()):.1f} of 100")
    report("nms_speed", rows, command_line())
    if not same:
        raise SystemExit("the vectorised NMS ranked differently from the loop")


if __name__ == "__main__":
    main()
