"""The main job: a synthetic benchmark, reference rankers, XML trained and evaluated, a report.

1. generate the synthetic preset into ``OUT/benchmark`` (kept and reused when it exists);
2. on its test split, rank with the annotation oracle, the relevance oracle and a random ranker,
   write each as a TVR submission, evaluate it, and add multi-positive recall (the oracle's
   graded relevance);
3. train XML with ``configs/xml/demo.yaml`` into ``OUT/xml`` (``--model minute``: MINUTE with
   ``configs/minute/demo.yaml`` into ``OUT/minute``; resumes if interrupted), evaluate
   its best checkpoint on the test split, and run example searches next to their ground truth;
4. print the table and write ``OUT/report/{metrics.json, metrics.md, recall_curves.png,
   examples.md}`` (the training curves are in ``OUT/xml/training_curves.png``);
5. render the test split's videos (``OUT/benchmark/videos``: the same events as the features, on
   pixels), write the split as a corpus folder with those files (``OUT/corpus_test``), index it with
   the trained model (``OUT/index``) and print the command that serves it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import typer

from momentsearch.config import CONFIG_DIR, to_dict
from momentsearch.data.corpus import Corpus
from momentsearch.data.synthetic import SyntheticBenchmark, generate, load_preset
from momentsearch.errors import ConfigError
from momentsearch.evaluation import Submission, evaluate_submission, multi_positive_recall
from momentsearch.evaluation.ndcg import ranked_ndcg
from momentsearch.evaluation.recall import GroundTruth, align, task_first_hits
from momentsearch.evaluation.report import flatten, markdown_table, mmss, plot_recall_curves, print_table
from momentsearch.fileio import atomic_open, output_folder, write_json
from momentsearch.search.baselines import annotation_oracle, random_ranker, relevance_oracle
from momentsearch.search.ranked import RankedMoments

COLUMNS = [
    "VCMR 0.5-r1", "VCMR 0.5-r10", "VCMR 0.5-r100", "VCMR 0.7-r1", "VCMR 0.7-r100",
    "SVMR 0.5-r1", "SVMR 0.5-r5", "VR r1", "VR r10", "VR r100",
    "MP-VCMR 0.5-r1", "MP-VCMR 0.5-r10", "MP-VR r1", "MP-VR r10", "nDCG VR", "nDCG VCMR 0.5",
]
KS = list(range(1, 101))
MODELS = {"xml": "XML", "minute": "MINUTE"}  # families with a configs/<name>/demo.yaml


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


def _curves(curves: dict[str, dict[str, list[float]]], name: str, tasks: dict[str, RankedMoments],
            gt: GroundTruth) -> None:
    for thr, first in task_first_hits("VCMR", align(tasks["VCMR"], gt), gt, (0.5, 0.7)).items():
        curves.setdefault(f"VCMR, tIoU {thr}", {})[name] = [float(np.mean(first < k)) * 100 for k in KS]
    first = task_first_hits("VR", align(tasks["VR"], gt), gt, ())[""]
    curves.setdefault("VR", {})[name] = [float(np.mean(first < k)) * 100 for k in KS]


def reference_rows(bench: SyntheticBenchmark, test: Corpus, report: Path,
                   curves: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    graded = bench.oracle("test").moment_relevance(min_relevance=0.5)
    exact = graded.threshold(1.0)
    typer.echo(f"test split: {len(test)} queries, {len(test.videos)} videos; each query has on average "
               f"{np.diff(exact.indptr).mean():.1f} moments of relevance 1.0 and "
               f"{np.diff(graded.indptr).mean():.1f} of relevance >= 0.5")
    rankers = {
        "annotation oracle": annotation_oracle(test, graded.video_ids),
        "relevance oracle": relevance_oracle(graded, seed=0),
        "random": random_ranker(test, seed=0, video_ids=graded.video_ids),
    }
    gt = GroundTruth.from_corpus(test, graded.video_ids)
    rows: dict[str, dict[str, float]] = {}
    for name, tasks in rankers.items():
        path = report / f"predictions_{name.replace(' ', '_')}.json"
        Submission.from_ranked(tasks).write(path)
        metrics = evaluate_submission(Submission.read(path), test)  # the file round trip is part of the demo
        rows[name] = {
            **flatten({t: metrics[t] for t in ("VCMR", "SVMR", "VR") if t in metrics}),
            **flatten({"MP-VCMR": multi_positive_recall(tasks["VCMR"], exact)["VCMR"],
                       "MP-VR": multi_positive_recall(tasks["VR"], exact)["VR"]}),
            **ranked_ndcg(tasks["VR"], tasks["VCMR"], graded),
        }
        _curves(curves, name, tasks, gt)
    n = len(graded.video_ids)
    rows["chance (VR, analytic)"] = {f"VR r{k}": 100.0 * min(k, n) / n for k in (1, 10, 100)}
    return rows


def run_demo(out: Path, preset: str = "default", train: bool = True, model: str = "xml") -> dict[str, dict[str, float]]:
    if model not in MODELS:
        raise ConfigError(f"demo --model must be one of {sorted(MODELS)}, got {model!r}")
    t0 = time.time()
    output_folder(out)
    bench = _benchmark(out, preset)
    test = bench.corpus.split("test")
    report = out / "report"
    report.mkdir(parents=True, exist_ok=True)
    curves: dict[str, dict[str, list[float]]] = {}
    rows = reference_rows(bench, test, report, curves)
    timings: dict[str, float] = {"reference rankers": time.time() - t0}
    examples = ""
    if train:
        from momentsearch.api import EVAL_COLUMNS, evaluate
        from momentsearch.api import train as train_model

        label = MODELS[model]
        t1 = time.time()
        trainer = train_model(CONFIG_DIR / model / "demo.yaml",
                              {"dataset": {"benchmark": str(out / "benchmark")}, "out_dir": str(out / model)})
        timings[f"{label} training"] = time.time() - t1
        t1 = time.time()
        ckpt = trainer.ckpt_dir / "best.pt"
        ev = evaluate(ckpt, "test", out / model / "eval_test")
        row, ranked = ev.row, ev.ranked
        print_table({label: row}, EVAL_COLUMNS, title=f"{label}, split test")
        timings[f"{label} evaluation"] = time.time() - t1
        rows = {f"{label} (trained here)": row, **rows}
        _curves(curves, f"{label} (trained here)", ranked, GroundTruth.from_corpus(test, ranked["VCMR"].video_ids))
        examples = example_searches(bench, test, ranked["VCMR"], label=label)
    print_table(rows, COLUMNS, title=f"synthetic '{preset}' test split: standard metrics and multi-positive (MP)")
    write_json(report / "metrics.json", {"preset": preset, "n_queries": len(test), "n_videos": len(test.videos),
                                         "rows": rows, "seconds": timings})
    with atomic_open(report / "metrics.md") as fh:
        fh.write(f"# Synthetic '{preset}' test split\n\n{len(test)} queries, {len(test.videos)} videos. MP = "
                 "multi-positive recall against the oracle (a hit is any moment of relevance 1.0). nDCG (x100) is "
                 "Wray et al.'s Eq. 2 (gain 2^S - 1) against the oracle's graded relevance (S >= 0.5), text to "
                 "video, and for moments at tIoU 0.5 over the top 100.\n\n")
        fh.write(markdown_table(rows, COLUMNS) + "\n\n")
        fh.write("Seconds: " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items()) + "\n")
    if examples:
        with atomic_open(report / "examples.md") as fh:
            fh.write(examples)
        typer.echo(examples)
    plot_recall_curves(curves, KS, report / "recall_curves.png", title=f"synthetic '{preset}' test split")
    typer.echo(f"report written to {report} in {time.time() - t0:.0f} s")
    if train:
        index = serveable_index(out, bench, trainer.ckpt_dir / "best.pt")
        typer.echo(f"\nto search it in a browser (the page plays the moments): momentsearch serve {index}\n"
                   "then open http://127.0.0.1:8000/")
    return rows


def serveable_index(out: Path, bench: SyntheticBenchmark, ckpt: Path) -> Path:
    """The test split as a corpus folder whose videos are the rendered ones, and the model's index over it."""
    from momentsearch.data.corpus_folder import write_dataset_corpus
    from momentsearch.data.dataset import open_dataset
    from momentsearch.serving.checkpoint import load_checkpoint
    from momentsearch.serving.indexing import build_index

    test_ids = set(bench.corpus.split("test").videos)
    try:
        from momentsearch.data.synthetic.render import render_benchmark

        typer.echo(f"rendering the {len(test_ids)} test videos (kept for the next run)")
        render_benchmark(out / "benchmark", only=test_ids)
    except ImportError as e:  # PyAV missing: the index still searches, the page shows no video
        typer.echo(f"not rendering the test videos ({e.name} is missing): the page will have nothing to play")
    write_dataset_corpus(open_dataset(load_checkpoint(ckpt).require_dataset()), "test", out / "corpus_test", out / "benchmark" / "videos")
    report = build_index(ckpt, out / "corpus_test", out / "index", progress=False)
    typer.echo(report.summary())
    return out / "index"


def example_searches(bench: SyntheticBenchmark, test: Corpus, vcmr: RankedMoments, n: int = 5,
                     label: str = "XML") -> str:
    """A few test queries with the model's top 3 moments, the ground truth and the oracle's grade of each."""
    oracle = bench.oracle("test")
    rows = vcmr.row_of()
    rng = np.random.default_rng(0)
    picks = rng.choice(len(test.moments), size=min(n, len(test.moments)), replace=False)
    lines = [f"# Example searches ({label}, test split)\n"]
    for i in picks:
        m = test.moments[int(i)]
        st, ed = m.span
        lines.append(f"**{m.text}**  \nground truth: {m.video_id} {mmss(st)}-{mmss(ed)}\n")
        r = rows[m.query_id]
        for j in range(3):
            v = int(vcmr.video_idx[r, j])
            if v < 0:
                break
            vid, s, e = vcmr.video_ids[v], float(vcmr.start[r, j]), float(vcmr.end[r, j])
            lines.append(f"{j + 1}. {vid} {mmss(s)}-{mmss(e)}  (oracle relevance {_grade(oracle, m.query_id, vid, s, e):.2f})")
        lines.append("")
    return "\n".join(lines) + "\n"


def _grade(oracle: Any, query_id: str, video_id: str, start: float, end: float) -> float:
    """The oracle's relevance of the event that best overlaps [start, end] (tIoU >= 0.5), else 0."""
    ev = oracle.events
    best = 0.0
    for k, vid in enumerate(ev.video_ids):
        if vid != video_id:
            continue
        inter = max(0.0, min(end, ev.end[k]) - max(start, ev.start[k]))
        union = max(end, ev.end[k]) - min(start, ev.start[k])
        if union > 0 and inter / union >= 0.5:
            best = max(best, oracle.relevance(query_id, ev.event_ids[k]))
    return best
