"""MINUTE's moment-prediction-bias analysis (Hou et al., Figs. 1 and 5) and its side-by-side table.

For every seed of the experiment's XML and MINUTE conditions: rank the test split with the best
checkpoint over the top 100 retrieved videos (all their candidate moments kept), MINUTE once with
its Shared-Norm scoring (Eq. 13) and once with the earlier two-stage scoring (Eqs. 5-7) on the
same weights, then

* VCMR R@1 / R@10 (tIoU 0.5, 0.7) keeping only the moments of the top-K videos, K = 1 .. 100,
  beside VR R@K;
* the distribution of the retrieval rank of the video each top-1 moment comes from.

    python benchmarks/minute_bias.py configs/experiments/minute_vs_xml.yaml
    python benchmarks/minute_bias.py configs/experiments/minute_vs_xml_converge.yaml --continue-rising 40 --max-epochs 200

(with ``--continue-rising``/``--max-epochs`` as the experiment ran, each run is the last of its chain of
continuations, as ``benchmarks/convergence.py`` reads it)

prints the tables and writes bias.json / bias.md into the experiment's folder, bias_<experiment>.json into
benchmarks/results/ and the PNG plots, <experiment>_bias_recall_by_k.png and <experiment>_bias_top1_rank.png,
into docs/figures/ (``--figures``). Mean +- std over seeds; differences paired by seed, with the 95 % t interval
and the verdict of ``experiments/stats.py``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import add_continuation_flags, chain_end, continuation_of  # noqa: E402
from momentsearch.config import load_yaml_config  # noqa: E402
from momentsearch.data.dataset import open_dataset  # noqa: E402
from momentsearch.device import torch_settings  # noqa: E402
from momentsearch.evaluation.bias import bin_labels, recall_by_k_videos, top1_video_ranks  # noqa: E402
from momentsearch.evaluation.ranking import rank_split  # noqa: E402
from momentsearch.evaluation.recall import GroundTruth  # noqa: E402
from momentsearch.experiments import Continuation, ExperimentConfig, prepare, results_folder, run_config, runs_folder  # noqa: E402
from momentsearch.experiments.stats import Paired, paired  # noqa: E402
from momentsearch.fileio import atomic_open, write_json  # noqa: E402
from momentsearch.serving.checkpoint import load_checkpoint  # noqa: E402
from momentsearch.text.queries import dataset_query_features  # noqa: E402

KS = [1, 2, 3, 5, 10, 20, 50, 100]


def chain_checkpoint(d: dict, cont: Continuation | None, run: str, experiment: Path,
                     args: argparse.Namespace) -> Path:
    """The best checkpoint of the last run of ``d``'s chain of continuations; exits naming the command to run when
    the chain is unfinished or its last run has no checkpoint."""
    d = chain_end(d, cont, run, experiment, args)
    ckpt = Path(d["out_dir"]) / "checkpoints" / "best.pt"
    if not ckpt.exists():
        sys.exit(f"error: {run} has no best checkpoint ({ckpt}); run `momentsearch experiment {experiment}` first")
    return ckpt


def query_subset(corpus, max_queries: int):  # type: ignore[no-untyped-def]
    """The split with a fixed random subset of its annotated queries, the same for every run (0: all)."""
    ids = sorted(m.query_id for m in corpus.moments if m.has_ground_truth)
    if max_queries and len(ids) > max_queries:
        keep = set(np.random.default_rng(0).choice(ids, max_queries, replace=False).tolist())
        corpus = corpus.with_moments([m for m in corpus.moments if m.query_id in keep])
    return corpus


def opened(experiment: Path) -> tuple[ExperimentConfig, Path, Path, object, Path]:
    """The experiment's config, results folder, benchmark, tables and runs folder."""
    exp = load_yaml_config(ExperimentConfig, experiment)
    out = results_folder(exp)
    bench, tables = prepare(exp)
    runs_dir = runs_folder(exp, bench)
    return exp, out, bench, tables, runs_dir


def checkpoint_split(ckpt: Path, split: str, max_queries: int):  # type: ignore[no-untyped-def]
    """The checkpoint, its dataset's features and query features, and ``split`` with its fixed query subset."""
    loaded = load_checkpoint(ckpt)
    ds = open_dataset(loaded.require_dataset())
    queries = dataset_query_features(ds.config.query_features, ds.config.query_cache)
    return loaded, ds, ds.features(), queries, query_subset(ds.split(split), max_queries)


def analyse(ckpt: Path, split: str, scorings: list[str], max_queries: int) -> dict[str, dict[str, object]]:
    loaded, ds, store, queries, corpus = checkpoint_split(ckpt, split, max_queries)
    out: dict[str, dict[str, object]] = {}
    index = None
    for scoring in scorings:
        family = loaded.family
        if scoring:
            family = type(family)(dataclasses.replace(family.cfg, scoring=scoring))
        ranked, index = rank_split(family, loaded.model, corpus, store, queries, ds.clip_lengths(corpus), k_videos=100,
                                   nms_threshold=loaded.search_settings().nms_threshold, n_moments=2000, index=index,
                                   progress=False)
        gt = GroundTruth.from_corpus(corpus, ranked["VCMR"].video_ids)
        out[scoring or "default"] = {"recall": recall_by_k_videos(ranked["VCMR"], ranked["VR"], gt, KS),
                                     "ranks": top1_video_ranks(ranked["VCMR"], ranked["VR"], gt)}
    return out


def mean_std(rows: list[list[float]]) -> tuple[np.ndarray, np.ndarray]:
    a = np.array(rows)
    return a.mean(0), a.std(0, ddof=1) if len(a) > 1 else np.zeros(a.shape[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("experiment", type=Path)
    ap.add_argument("--xml", default="XML", help="the XML condition")
    ap.add_argument("--minute", default="MINUTE", help="the MINUTE condition")
    ap.add_argument("--figures", type=Path, default=ROOT / "docs" / "figures")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-queries", type=int, default=400,
                    help="a fixed random subset of the test queries (0: all); the localizer reads 100 videos per query")
    add_continuation_flags(ap)
    args = ap.parse_args()
    cont = continuation_of(args)
    exp, out, bench, tables, runs_dir = opened(args.experiment)
    systems = {"XML": (args.xml, [""]), "MINUTE": (args.minute, ["shared_norm", "two_stage"])}
    per_seed: dict[str, list[dict[str, object]]] = {}
    cache = out / "bias_runs"
    with torch_settings(args.threads, False, None):
        for label, (cond, scorings) in systems.items():
            for seed in exp.seeds:
                d = run_config(exp, cond, seed, bench, tables, runs_dir)
                ckpt = chain_checkpoint(d, cont, f"{cond} seed {seed}", args.experiment, args)
                # the cache names the run's own folder, so a continued run is analysed afresh
                done = cache / f"{label}_seed{seed}_{ckpt.parent.parent.parent.name}.json"
                if done.exists():
                    res = json.loads(done.read_text())
                else:
                    print(f"{label} seed {seed}: {ckpt}", flush=True)
                    res = analyse(ckpt, exp.eval_split, scorings, args.max_queries)
                    write_json(done, res)
                for scoring, r in res.items():
                    name = label if scoring == "default" else f"{label} ({'Shared-Norm, Eq. 13' if scoring == 'shared_norm' else 'two-stage, Eqs. 5-7'})"
                    per_seed.setdefault(name, []).append(r)
    report(per_seed, out, args.figures, exp.name)


def report(per_seed: dict[str, list[dict[str, object]]], out: Path, figures: Path, name: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary: dict[str, object] = {"ks": KS, "rank_bins": bin_labels(), "systems": {}}
    lines = [f"# Moment prediction bias ({name}, test split, mean ± std over {len(next(iter(per_seed.values())))} seeds)\n",
             "VCMR recall keeping only the moments of the top-K retrieved videos, and VR R@K.\n"]
    metrics = ["VR r@K", "VCMR 0.5-r1", "VCMR 0.5-r10", "VCMR 0.7-r1"]
    fig, axes = plt.subplots(1, len(metrics), figsize=(5 * len(metrics), 4))
    for sys_name, runs in per_seed.items():
        entry: dict[str, object] = {}
        for m in metrics:
            mu, sd = mean_std([r["recall"][m] for r in runs])  # type: ignore[index]
            entry[m] = {"mean": mu.round(2).tolist(), "std": sd.round(2).tolist()}
            ax = axes[metrics.index(m)]
            ax.errorbar(KS, mu, yerr=sd, marker="o", capsize=3, label=sys_name)
            ax.set_xscale("log")
            ax.set_title(m if m != "VR r@K" else "VR R@K")
            ax.set_xlabel("K retrieved videos")
        for kind in ("top-1 moment's video", "correct video"):
            mu, sd = mean_std([r["ranks"][kind] for r in runs])  # type: ignore[index]
            entry[kind] = {"mean": mu.round(2).tolist(), "std": sd.round(2).tolist()}
        summary["systems"][sys_name] = entry  # type: ignore[index]
    axes[0].set_ylabel("recall (%)")
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    figures.mkdir(parents=True, exist_ok=True)
    fig.savefig(figures / f"{name}_bias_recall_by_k.png", dpi=110)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(8, 4))
    labels = bin_labels()
    names = list(per_seed)
    width = 0.8 / (len(names) + 1)
    for i, sys_name in enumerate(names):
        ax.bar(np.arange(len(labels)) + i * width, summary["systems"][sys_name]["top-1 moment's video"]["mean"],  # type: ignore[index]
               width, label=f"{sys_name}: top-1 moment's video")
    ax.bar(np.arange(len(labels)) + len(names) * width, summary["systems"][names[0]]["correct video"]["mean"],  # type: ignore[index]
           width, label=f"{names[0]}: correct video", color="grey")
    ax.set_xticks(np.arange(len(labels)) + 0.4 - width / 2, labels)
    ax.set_xlabel("retrieval rank of the video")
    ax.set_ylabel("% of queries")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(figures / f"{name}_bias_top1_rank.png", dpi=110)
    plt.close(fig)
    for m in metrics:
        lines.append(f"\n**{m}**\n\n| system | " + " | ".join(f"K={k}" for k in KS) + " |\n|---|" + "---|" * len(KS))
        for sys_name in per_seed:
            e = summary["systems"][sys_name][m]  # type: ignore[index]
            lines.append(f"| {sys_name} | " + " | ".join(f"{a:.2f} ± {b:.2f}" for a, b in zip(e["mean"], e["std"], strict=True)) + " |")
    lines.append("\n**Retrieval rank of the video of the top-1 moment (% of queries, K = 100)**\n\n| system | "
                 + " | ".join(labels) + " |\n|---|" + "---|" * len(labels))
    for sys_name in per_seed:
        e = summary["systems"][sys_name]["top-1 moment's video"]  # type: ignore[index]
        lines.append(f"| {sys_name} | " + " | ".join(f"{a:.1f}" for a in e["mean"]) + " |")
    e = summary["systems"][names[0]]["correct video"]  # type: ignore[index]
    lines.append(f"| (correct video, {names[0]}'s retrieval) | " + " | ".join(f"{a:.1f}" for a in e["mean"]) + " |")
    gains = paired_gain(per_seed)
    summary["paired"] = {k: p.as_dict() for k, p in gains.items()}
    lines.append("\n**Paired by seed: VCMR 0.5-r1 at K = 100 minus at K = 1 (does recall rise with K?), "
                 "mean ± sd [95 % t interval], verdict**\n")
    for sys_name, p in gains.items():
        lines.append(f"- {sys_name}: {p.cell()} {p.verdict}")
    contrasts = paired_contrasts(per_seed)
    summary["contrasts"] = {k: {m: p.as_dict() for m, p in v.items()} for k, v in contrasts.items()}
    if contrasts:
        lines.append("\n**Paired by seed, at K = 100 (mean ± sd of the per-seed differences [95 % t interval], "
                     "verdict)**\n\n| difference | " + " | ".join(CONTRAST_METRICS) + " |\n|---|"
                     + "---:|" * len(CONTRAST_METRICS))
        for label, vals in contrasts.items():
            lines.append(f"| {label} | " + " | ".join(f"{vals[m].cell()} {vals[m].verdict}" for m in CONTRAST_METRICS)
                         + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    write_json(out / "bias.json", summary)
    write_json(ROOT / "benchmarks" / "results" / f"bias_{name}.json", summary)
    with atomic_open(out / "bias.md") as fh:
        fh.write(text)


CONTRAST_METRICS = ["VCMR 0.5-r1", "VCMR 0.5-r10", "VCMR 0.7-r1", "top-1 from below the top video (%)"]


def _at_k100(run: dict[str, object], metric: str) -> float:
    if metric == "top-1 from below the top video (%)":  # positive A − B: A is less bound to its top video
        return 100.0 - float(run["ranks"]["top-1 moment's video"][0])  # type: ignore[index]
    return float(run["recall"][metric][-1])  # type: ignore[index]


def paired_contrasts(per_seed: dict[str, list[dict[str, object]]]) -> dict[str, dict[str, Paired]]:
    """Shared-Norm minus two-stage (same weights), and each MINUTE scoring minus XML, paired by seed."""
    names = list(per_seed)
    sn = next((n for n in names if "Shared-Norm" in n), None)
    ts = next((n for n in names if "two-stage" in n), None)
    xml = next((n for n in names if "(" not in n), None)
    pairs = [(a, b) for a, b in ((sn, ts), (sn, xml), (ts, xml)) if a and b]
    out: dict[str, dict[str, Paired]] = {}
    for a, b in pairs:
        n = min(len(per_seed[a]), len(per_seed[b]))
        out[f"{a} − {b}"] = {m: paired([_at_k100(per_seed[a][i], m) for i in range(n)],
                                       [_at_k100(per_seed[b][i], m) for i in range(n)]) for m in CONTRAST_METRICS}
    return out


def paired_gain(per_seed: dict[str, list[dict[str, object]]]) -> dict[str, Paired]:
    """VCMR 0.5-r1 keeping the top 100 videos minus keeping the top 1, paired by seed, per system."""
    return {sys_name: paired([r["recall"]["VCMR 0.5-r1"][-1] for r in runs],  # type: ignore[index]
                             [r["recall"]["VCMR 0.5-r1"][0] for r in runs])  # type: ignore[index]
            for sys_name, runs in per_seed.items()}


if __name__ == "__main__":
    main()
