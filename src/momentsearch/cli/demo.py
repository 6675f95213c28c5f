"""The main job (until a model lands): a synthetic benchmark, reference rankers, a report.

1. generate the synthetic preset into ``OUT/benchmark`` (kept and reused when it exists);
2. on its test split, rank with the annotation oracle, the relevance oracle and a random ranker;
3. write each ranking as a TVR submission and evaluate it (VCMR, SVMR, VR recall@k at tIoU),
   plus multi-positive recall against the oracle's graded relevance;
4. print the table, and write ``OUT/report/{metrics.json, metrics.md, recall_curves.png}``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import typer

from momentsearch.config import to_dict
from momentsearch.data.synthetic import SyntheticBenchmark, generate, load_preset
from momentsearch.evaluation import Submission, evaluate_submission, multi_positive_recall
from momentsearch.evaluation.predictions import RankedMoments
from momentsearch.evaluation.recall import GroundTruth, task_first_hits
from momentsearch.evaluation.report import flatten, markdown_table, plot_recall_curves, print_table
from momentsearch.fileio import atomic_open, write_json
from momentsearch.search.baselines import annotation_oracle, random_ranker, relevance_oracle

COLUMNS = [
    "VCMR 0.5-r1", "VCMR 0.5-r10", "VCMR 0.5-r100", "VCMR 0.7-r1", "VCMR 0.7-r100",
    "SVMR 0.5-r1", "SVMR 0.5-r5", "VR r1", "VR r10", "VR r100",
    "MP-VCMR 0.5-r1", "MP-VCMR 0.5-r10", "MP-VR r1", "MP-VR r10",
]


def _benchmark(out: Path, preset: str) -> SyntheticBenchmark:
    cfg = load_preset(preset)
    root = out / "benchmark"
    if (root / "benchmark.yaml").exists():
        bench = SyntheticBenchmark.load(root)
        if to_dict(bench.config) == to_dict(cfg):
            typer.echo(f"reusing the benchmark in {root}")
            return bench
        typer.echo(f"{root} holds another config; generating anew")
    generate(cfg, root)
    return SyntheticBenchmark.load(root)


def run_demo(out: Path, preset: str = "default") -> dict[str, dict[str, float]]:
    t0 = time.time()
    bench = _benchmark(out, preset)
    test = bench.corpus.split("test")
    oracle = bench.oracle("test")
    graded = oracle.moment_relevance(min_relevance=0.5)
    exact = graded.threshold(1.0)
    n_exact = np.diff(exact.indptr)
    typer.echo(
        f"test split: {len(test)} queries, {len(test.videos)} videos; each query has on average "
        f"{n_exact.mean():.1f} moments of relevance 1.0 and {np.diff(graded.indptr).mean():.1f} of relevance >= 0.5"
    )
    rankers = {
        "annotation oracle": annotation_oracle(test, graded.video_ids),
        "relevance oracle": relevance_oracle(graded, seed=0),
        "random": random_ranker(test, seed=0, video_ids=graded.video_ids),
    }
    report = out / "report"
    rows: dict[str, dict[str, float]] = {}
    curves: dict[str, dict[str, list[float]]] = {}
    ks_curve = list(range(1, 101))
    gt = GroundTruth.from_corpus(test, graded.video_ids)
    for name, tasks in rankers.items():
        sub = Submission.from_ranked(tasks)
        path = report / f"predictions_{name.replace(' ', '_')}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        sub.write(path)
        metrics = evaluate_submission(Submission.read(path), test)  # the file round trip is part of the demo
        mp = multi_positive_recall(tasks["VCMR"], exact)
        mp_vr = multi_positive_recall(tasks["VR"], exact)
        rows[name] = {
            **flatten({t: metrics[t] for t in ("VCMR", "SVMR", "VR") if t in metrics}),
            **flatten({"MP-VCMR": mp["VCMR"], "MP-VR": mp_vr["VR"]}),
        }
        for thr, first in task_first_hits("VCMR", _aligned(tasks["VCMR"], gt), gt, (0.5, 0.7)).items():
            curves.setdefault(f"VCMR, tIoU {thr}", {})[name] = [float(np.mean(first < k)) * 100 for k in ks_curve]
        first = task_first_hits("VR", _aligned(tasks["VR"], gt), gt, ())[""]
        curves.setdefault("VR", {})[name] = [float(np.mean(first < k)) * 100 for k in ks_curve]
    n_videos = len(graded.video_ids)
    rows["chance (VR, analytic)"] = {f"VR r{k}": 100.0 * min(k, n_videos) / n_videos for k in (1, 10, 100)}

    print_table(rows, COLUMNS, title=f"synthetic '{preset}' test split: standard metrics and multi-positive (MP, relevance 1.0)")
    write_json(report / "metrics.json", {
        "preset": preset, "n_queries": len(test), "n_videos": n_videos,
        "mean_exact_relevant_moments_per_query": float(n_exact.mean()),
        "rows": rows,
    })
    with atomic_open(report / "metrics.md") as fh:
        fh.write(f"# Reference rankers on the synthetic '{preset}' test split\n\n")
        fh.write(f"{len(test)} queries, {n_videos} videos. MP = multi-positive recall against the oracle "
                 f"(a hit is any moment of relevance 1.0).\n\n")
        fh.write(markdown_table(rows, COLUMNS) + "\n")
    plot_recall_curves(curves, ks_curve, report / "recall_curves.png", title=f"synthetic '{preset}' test split")
    typer.echo(f"report written to {report} in {time.time() - t0:.1f} s")
    return rows


def _aligned(ranked: RankedMoments, gt: GroundTruth) -> RankedMoments:
    from momentsearch.evaluation.recall import align

    return align(ranked, gt)
