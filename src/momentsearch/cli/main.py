"""``momentsearch``: the command line. Each command's logic lives in its own module."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from momentsearch.cli.app import app, data_app, require_models
from momentsearch.errors import MomentSearchError

FORMAT_HELP = "Annotation format: tvr, charades-sta, didemo, activitynet, tacos or jsonl (default: detected)."


def _rule(ndcg_rule: str) -> None:
    from momentsearch.evaluation.ndcg_iou import RULES

    if ndcg_rule not in RULES:
        raise typer.BadParameter(f"--ndcg-rule must be one of {', '.join(RULES)}, got {ndcg_rule!r}")


def _floats(text: str, lo: float = 0.0, hi: float = 1.0, what: str = "tIoU thresholds") -> tuple[float, ...]:
    """Comma-separated numbers, each in (lo, hi]."""
    try:
        vals = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise typer.BadParameter(f"expected comma-separated numbers, got {text[:80]!r}") from None
    bad = [v for v in vals if not lo < v <= hi]
    if not vals or bad:
        raise typer.BadParameter(f"{what} must lie in ({lo:g}, {hi:g}], got {text[:80]!r}")
    return vals


def _ints(text: str, lo: int = 1) -> tuple[int, ...]:
    """Comma-separated integers, each >= lo."""
    try:
        vals = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise typer.BadParameter(f"expected comma-separated integers, got {text[:80]!r}") from None
    if not vals or any(v < lo for v in vals):
        raise typer.BadParameter(f"expected integers >= {lo}, got {text[:80]!r}")
    return vals


@data_app.command("info")
def data_info(
    path: Annotated[Path, typer.Argument(help="Annotation file, or a synthetic benchmark folder.")],
    format: Annotated[Optional[str], typer.Option("--format", "-f", help=FORMAT_HELP)] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    annotations: Annotated[Optional[Path], typer.Option(
        help="MVMR pool files only: the annotation split the pools were built from (default: guessed from "
             "the file name, e.g. ../charades_sta/charades_sta_test.txt beside mvmr/).")] = None,
) -> None:
    """Counts of queries, videos and moments, durations and span statistics of an annotation file;
    for an MVMR pool file, its statistics beside the MVMR paper's Table 3."""
    from momentsearch.cli.data_cmd import run_info

    run_info(path, format, as_json, annotations)


@data_app.command("convert")
def data_convert(
    path: Annotated[Path, typer.Argument(help="Annotation file in any supported format.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output .jsonl (momentsearch's generic format).")],
    format: Annotated[Optional[str], typer.Option("--format", "-f", help=FORMAT_HELP)] = None,
) -> None:
    """Convert an annotation file to momentsearch's generic jsonl (lossless round trip)."""
    from momentsearch.data.loaders import load_corpus, write_jsonl_corpus

    corpus = load_corpus(path, format)
    write_jsonl_corpus(corpus, out)
    typer.echo(f"wrote {len(corpus)} queries and {len(corpus.videos)} videos to {out}")


@data_app.command("export-ranking")
def data_export_ranking(
    benchmark: Annotated[Path, typer.Argument(help="A synthetic benchmark folder (momentsearch generate).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output .json in TVR-Ranking's format.")],
    split: Annotated[str, typer.Option(help="Split whose queries are written.")] = "test",
    min_relevance: Annotated[float, typer.Option(help="Oracle relevance below this is left out (grade = 4 x relevance).")] = 0.5,
    layout: Annotated[str, typer.Option(help="grouped: the released files' layout (queries, each with its "
                                             "relevant_moment list); flat: one record per pair.")] = "grouped",
) -> None:
    """Write the synthetic oracle's graded query-moment pairs in TVR-Ranking's JSON format."""
    from momentsearch.data.synthetic import SyntheticBenchmark

    if not 0 < min_relevance <= 1:
        raise typer.BadParameter(f"--min-relevance must lie in (0, 1], got {min_relevance}")
    from momentsearch.data.loaders.tvr_ranking import LAYOUTS

    if layout not in LAYOUTS:
        raise typer.BadParameter(f"--layout must be one of {', '.join(LAYOUTS)}, got {layout!r}")
    n = SyntheticBenchmark.load(benchmark).write_ranking(out, split, min_relevance, layout)
    typer.echo(f"wrote {n} graded pairs of split {split} to {out}")


@app.command("generate")
def generate_cmd(
    preset: Annotated[str, typer.Option("--preset", "-p", help="tiny, default, large, or a YAML config path.")] = "default",
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder.")] = Path("runs/synthetic-default"),
    seed: Annotated[Optional[int], typer.Option(help="Override the preset's seed.")] = None,
    n_videos: Annotated[Optional[int], typer.Option("--n-videos", help="Override the number of videos.")] = None,
    render: Annotated[bool, typer.Option("--render", help="Also write every video as an MP4 (+ SRT) under OUT/videos.")] = False,
    render_fps: Annotated[float, typer.Option("--render-fps", help="Frames per second of the rendered videos.")] = 4.0,
    render_size: Annotated[int, typer.Option("--render-size", help="Width and height of the rendered videos.")] = 64,
    workers: Annotated[int, typer.Option(help="Processes making videos (the files are the same for any number).")] = 1,
) -> None:
    """Generate a synthetic benchmark with exhaustive many-to-many ground truth (--render: as video files too,
    for `momentsearch ingest OUT/videos`)."""
    import dataclasses

    from momentsearch.data.synthetic import generate, load_preset

    cfg = load_preset(preset)
    changes = {k: v for k, v in {"seed": seed, "n_videos": n_videos}.items() if v is not None}
    if changes:
        cfg = dataclasses.replace(cfg, **changes)
    if workers < 1:
        raise typer.BadParameter(f"--workers must be at least 1, got {workers}")
    root = generate(cfg, out, workers=workers)
    from momentsearch.data.synthetic import benchmark_stats

    stats = benchmark_stats(root)  # from benchmark.yaml: a million videos are not read back into memory
    typer.echo(f"wrote {root}: {stats['n_videos']} videos, {stats['n_queries']} queries, "
               f"splits { {k: v['n_queries'] for k, v in stats['splits'].items()} }")
    if render:
        from momentsearch.data.synthetic.render import render_benchmark

        videos = render_benchmark(root, fps=render_fps, size=render_size)
        typer.echo(f"rendered {stats['n_videos']} videos into {videos}")


@app.command("evaluate-predictions")
def evaluate_predictions(
    predictions: Annotated[Path, typer.Argument(help="TVR-format submission JSON (video2idx, VCMR, SVMR, VR).")],
    ground_truth: Annotated[Optional[Path], typer.Option("--ground-truth", "-g", help="Ground-truth annotation file.")] = None,
    format: Annotated[Optional[str], typer.Option("--format", "-f", help=FORMAT_HELP)] = None,
    iou: Annotated[str, typer.Option(help="tIoU thresholds, comma-separated.")] = "0.3,0.5,0.7",
    ks: Annotated[str, typer.Option(help="Recall cut-offs k, comma-separated.")] = "1,5,10,100",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON, keyed as TVR's evaluation keys it.")] = False,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Also write the metrics JSON here.")] = None,
    ranking: Annotated[Optional[Path], typer.Option(
        help="A TVR-Ranking file: also score the VCMR lists with NDCG@K,IoU (K 10, 20, 40; IoU 0.3, 0.5, 0.7) "
             "against its grades, matching desc_id to query_id.")] = None,
    ndcg_rule: Annotated[str, typer.Option(
        "--ndcg-rule", help="reference: NDCG@K,IoU exactly as TVR-Ranking's code computes it (tIoU > threshold, "
                            "grade-0 moments match, all-zero queries count 0); paper: tIoU >= threshold, grade-0 "
                            "moments and queries without a relevant one left out.")] = "reference",
) -> None:
    """Evaluate a TVR-format prediction file: VR, SVMR and VCMR recall@k at tIoU, and NDCG@K,IoU with --ranking."""
    from momentsearch.cli.evaluate_cmd import run_evaluate_predictions

    if ground_truth is None and ranking is None:
        raise typer.BadParameter("give --ground-truth (recall) or --ranking (NDCG@K,IoU), or both")
    _rule(ndcg_rule)
    run_evaluate_predictions(predictions, ground_truth, format, _floats(iou), _ints(ks), as_json, out, ranking, ndcg_rule)


@app.command("relevance")
def relevance_cmd(
    dataset: Annotated[Path, typer.Option("--dataset", "-d", help="Annotation file (any format) or benchmark folder.")],
    proxy: Annotated[str, typer.Option(help="bow (word IoU, stop words removed), pos (verb/noun lemma IoU), synset (verb/noun WordNet synset IoU), meteor (NLTK METEOR; pairwise, small sets) or cosine ([cos]+ of MiniLM).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output .npz (query x moment MomentRelevance); also writes OUT.qq.npz (query x query) and OUT.queries.json for training.")],
    format: Annotated[Optional[str], typer.Option("--format", "-f", help=FORMAT_HELP)] = None,
    top_k: Annotated[int, typer.Option("--top-k", help="Pairs kept per query (0: every S > 0).")] = 100,
    threshold: Annotated[float, typer.Option(help="Pairs below this are dropped.")] = 0.0,
) -> None:
    """Graded query x moment relevance from the annotation text alone, with statistics and a histogram."""
    from momentsearch.api.relevance_tables import PROXIES, run_relevance

    if proxy not in PROXIES:
        raise typer.BadParameter(f"unknown proxy {proxy!r}; choose one of {PROXIES}", param_hint="--proxy")
    run_relevance(dataset, proxy, out, format, top_k, threshold)


@app.command("pairs")
def pairs_cmd(
    dataset: Annotated[Path, typer.Option("--dataset", "-d", help="Annotation file (any format) or benchmark folder.")],
    detector: Annotated[str, typer.Option(help="sent, vp or np-vp (pairs paper, Eq. 7).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output prefix: writes OUT.phi.npz, OUT.psi.npz, OUT.queries.json, OUT.stats.json.")],
    format: Annotated[Optional[str], typer.Option("--format", "-f", help=FORMAT_HELP)] = None,
    min_theta: Annotated[float, typer.Option("--min-theta", help="Lowest theta kept in the table.")] = 0.5,
) -> None:
    """Potentially relevant pairs (Phi) with confidence (Psi) from the annotation text; pairs per query and examples."""
    from momentsearch.api.relevance_tables import run_pairs
    from momentsearch.relevance.pairs import DETECTORS

    if detector not in DETECTORS:
        raise typer.BadParameter(f"unknown detector {detector!r}; choose one of {DETECTORS}", param_hint="--detector")
    run_pairs(dataset, detector, out, format, min_theta)


@app.command("train")
def train_cmd(
    config: Annotated[Path, typer.Argument(help="YAML training config: a file, or a packaged one such as "
                                                "configs/xml/default.yaml (also written xml/default).")],
    epochs: Annotated[Optional[int], typer.Option(help="Override the number of epochs.")] = None,
    out_dir: Annotated[Optional[str], typer.Option("--out-dir", help="Override the run folder.")] = None,
    resume: Annotated[bool, typer.Option(help="Continue from the run folder's last checkpoint.")] = True,
    device: Annotated[Optional[str], typer.Option(help="auto, cpu, cuda or cuda:N (default: the config's).")] = None,
    threads: Annotated[Optional[int], typer.Option(
        help="Torch CPU threads while training (0: one per core). Fewer can be faster on a busy machine.")] = None,
    workers: Annotated[Optional[int], typer.Option(help="DataLoader worker processes for batches.")] = None,
    set_: Annotated[Optional[list[str]], typer.Option(
        "--set", help="Override any config value by its dotted path, e.g. --set model.relevance.theta=0.5 "
                      "(the value is read as YAML; repeat for several). Other keys of the same group are kept.")] = None,
    print_config: Annotated[bool, typer.Option(
        "--print-config", help="Print the resolved config (YAML, overrides applied) and exit without training.")] = False,
) -> None:
    """Train a model family (model.name in the YAML); a checkpoint every epoch (last.pt, best.pt),
    validation recall per epoch."""
    require_models()
    from momentsearch.cli.model_cmds import print_train_config, run_train
    from momentsearch.config import merge, parse_set

    overrides = merge(parse_set(set_ or []), {k: v for k, v in {
        "epochs": epochs, "out_dir": out_dir, "device": device, "num_threads": threads,
        "num_workers": workers}.items() if v is not None})
    if print_config:
        print_train_config(config, overrides)
        return
    run_train(config, overrides, resume)


@app.command("evaluate")
def evaluate_cmd(
    checkpoint: Annotated[Path, typer.Argument(help="A checkpoint (.pt) written by `momentsearch train`.")],
    split: Annotated[str, typer.Option(help="Split to evaluate.")] = "test",
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="Output folder (default: RUN/eval_SPLIT).")] = None,
    relevance: Annotated[Optional[Path], typer.Option(
        help="A relevance table from `momentsearch relevance` over the benchmark: also report nDCG and "
             "instance-based bounds against that text proxy.")] = None,
    equivalent: Annotated[float, typer.Option(
        help="With --relevance: moments at or above this relevance count as equivalent for the bounds.")] = 0.8,
    device: Annotated[str, typer.Option(help="auto, cpu, cuda or cuda:N.")] = "auto",
    ranking: Annotated[Optional[Path], typer.Option(
        help="A TVR-Ranking file (graded query-moment pairs): rank its queries over the split's videos and "
             "report NDCG@K,IoU for K 10, 20, 40 and IoU 0.3, 0.5, 0.7.")] = None,
    mvmr_pools: Annotated[Optional[Path], typer.Option(
        help="An MVMR pool file over this split (`momentsearch build-mvmr`, or the authors' release): also "
             "rank each pooled query within its pool and report MVMR R@{1,5,10,20,50} beside NLVL.")] = None,
    video_retriever: Annotated[Optional[Path], typer.Option(
        help="With --mvmr-pools: a checkpoint whose video scores first cut each pool to its --top-videos videos "
             "(the MVMR paper's Table 2 pipeline).")] = None,
    top_videos: Annotated[int, typer.Option(min=1, help="With --video-retriever: videos kept per pool.")] = 5,
    ndcg_rule: Annotated[str, typer.Option(
        "--ndcg-rule", help="reference: NDCG@K,IoU exactly as TVR-Ranking's code computes it (tIoU > threshold, "
                            "grade-0 moments match, all-zero queries count 0); paper: tIoU >= threshold, grade-0 "
                            "moments and queries without a relevant one left out.")] = "reference",
) -> None:
    """Rank a split with a trained model; write TVR-format predictions and the metrics (JSON, markdown)."""
    require_models()
    from momentsearch.cli.model_cmds import run_evaluate

    _rule(ndcg_rule)
    run_evaluate(checkpoint, split, out, relevance=relevance, equivalent=equivalent, device=device, ranking=ranking,
                 mvmr_pools=mvmr_pools, video_retriever=video_retriever, top_videos=top_videos, ndcg_rule=ndcg_rule)


@app.command("build-mvmr")
def build_mvmr_cmd(
    dataset: Annotated[Path, typer.Option("--dataset", "-d", help="Any annotation file the loaders read, or a "
                                                                   "synthetic benchmark folder.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Output pool file (.json, the authors' format).")],
    n: Annotated[int, typer.Option(min=2, help="Videos per pool (the paper: 50; TACoS 5).")] = 50,
    k: Annotated[int, typer.Option(min=1, help="At most this many positive videos per pool, the gold one included.")] = 5,
    t_pos: Annotated[float, typer.Option(help="t+: positive candidates have s_te >= t+.")] = 0.9,
    t_neg: Annotated[float, typer.Option(help="t-: negative candidates have s_te <= t-.")] = 0.5,
    split: Annotated[Optional[str], typer.Option(help="The split to pool (default: test, or the file's only split).")] = None,
    scorer: Annotated[Optional[Path], typer.Option(
        help="A checkpoint trained on this dataset: its video score is s_tv (Eqs. 2-3). Default: none, the "
             "text filter only.")] = None,
    compare: Annotated[Optional[Path], typer.Option(
        help="A released pool file over the same split: report how its extra positives coincide with ours.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the random draws of positives and negatives.")] = 0,
    format: Annotated[Optional[str], typer.Option("--format", "-f", help=FORMAT_HELP)] = None,
) -> None:
    """Build MVMR retrieval pools (Yang et al. Sec. 4): per query the gold video, up to k-1 extra positive
    videos and negatives up to n, filtered by text similarity (and a model's score with --scorer)."""
    from momentsearch.api.mvmr_pools import run_build_mvmr
    from momentsearch.relevance.pool_builder import PoolConfig

    try:
        cfg = PoolConfig(n, k, t_pos, t_neg, seed)
    except ValueError as e:
        raise typer.BadParameter(str(e)) from None
    run_build_mvmr(dataset, out, cfg, split, scorer, compare, format)


@app.command("experiment")
def experiment_cmd(
    config: Annotated[Path, typer.Argument(help="An experiment YAML, e.g. configs/experiments/pr_tables_5_6.yaml.")],
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Runs trained at the same time (processes).")] = 2,
    only: Annotated[Optional[list[str]], typer.Option(help="Run only this condition (repeatable).")] = None,
    continue_rising: Annotated[int, typer.Option(
        help="Continue a run still rising by the trend test (the slope of validation VR r10 or VCMR 0.5-r10 over "
             "the last --trend-window epochs significantly positive) by this many epochs, until it passes or "
             "reaches --max-epochs; the last run is the one reported. 0: no continuation.")] = 0,
    max_epochs: Annotated[int, typer.Option(help="No run is continued past this many epochs.")] = 0,
    trend_window: Annotated[int, typer.Option(help="The trend test's window (epochs).")] = 10,
    convergence: Annotated[str, typer.Option(help="trend (a rise not significant) or equivalence (the 90 % upper "
                                                  "bound of every measure's slope, R@1 included, over the window "
                                                  "(>= 20 epochs) below --tolerance).")] = "trend",
    tolerance: Annotated[float, typer.Option(help="The equivalence rule's points per epoch.")] = 0.1,
    status: Annotated[bool, typer.Option(help="Train nothing: say where each run stands (epochs, training, flat, or "
                                              "rising and to be continued, by the rule given) and exit.")] = False,
) -> None:
    """Train every condition of an experiment over its seeds; one table (mean ± std) and a PNG.
    Finished runs are kept, so rerunning resumes an interrupted experiment; after a run fails no run starts."""
    require_models()
    from momentsearch.errors import ConfigError
    from momentsearch.experiments import Continuation, run_experiment

    cont = None
    if continue_rising or max_epochs:
        try:
            cont = Continuation(continue_rising, max_epochs, trend_window, convergence, tolerance)
        except ConfigError as e:
            raise typer.BadParameter(str(e)) from None
    if status:
        from momentsearch.experiments.status import experiment_status, status_table

        typer.echo(status_table(experiment_status(config, only, cont), cont))
        return
    run_experiment(config, jobs, only, cont)


@app.command("demo")
def demo_cmd(
    out: Annotated[Path, typer.Option("--out", "-o", help="Run folder (benchmark, model, report).")] = Path("runs/demo"),
    preset: Annotated[str, typer.Option("--preset", "-p", help="Synthetic preset.")] = "default",
    train: Annotated[bool, typer.Option(help="Train and evaluate a model (--no-train: reference rankers only).")] = True,
    model: Annotated[str, typer.Option("--model", "-m", help="Model family to train: xml or minute.")] = "xml",
) -> None:
    """The main job: generate the default synthetic corpus, train and evaluate XML next to reference
    rankers, run example searches, write a report with tables and plots."""
    if train:
        require_models()
    from momentsearch.cli.demo import run_demo

    run_demo(out, preset, train, model)


def _version(value: bool) -> None:
    if value:
        from momentsearch import __version__

        typer.echo(f"momentsearch {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """momentsearch: video corpus moment retrieval with many-to-many graded relevance."""


def main() -> None:
    """Errors the project raises on purpose (bad files, configs, queries) print one line and exit 2;
    anything else is a bug and shows its traceback."""
    try:
        app(args=_optional_values(sys.argv[1:]))
    except MomentSearchError as e:
        typer.echo(f"error: {e}", err=True)
        sys.exit(2)


def _optional_values(argv: list[str]) -> list[str]:
    """``--ray`` may stand alone (a local Ray) or take an address: alone, it becomes ``--ray local``. The next
    word is the address when it is ``local`` or ``auto`` or has a ``:`` (``ray://head:10001``, ``head:6379``)."""
    out = []
    for i, a in enumerate(argv):
        out.append(a)
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if a == "--ray" and (nxt is None or not (nxt in ("local", "auto") or ":" in nxt)):
            out.append("local")
    return out


import momentsearch.cli.alerts_cmd  # noqa: E402,F401 - registers alerts on app
import momentsearch.cli.corpus_cmds  # noqa: E402,F401 - registers ingest, index and corpus-from-dataset on app
import momentsearch.cli.export_cmd  # noqa: E402,F401 - registers export on app
import momentsearch.cli.search_cmd  # noqa: E402,F401 - registers search on app
import momentsearch.cli.serve_cmd  # noqa: E402,F401 - registers serve on app

__all__ = ["app", "main", "require_models"]
