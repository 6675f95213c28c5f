"""Have an experiment's runs converged? Validation curves, a flatness check and training time per run.

For every condition and seed of an experiment (configs/experiments/), read the run's history
(validation recall after every epoch) and result, then
* plot validation VR r10, VCMR 0.5-r10 and VCMR 0.5-r1 against the epoch, one line per seed and one
  colour per condition (docs/figures/<experiment>_curves.png);
* call a run **converged** by the trend test of ``experiments/stats.py``: over the last ``--trend-window``
  epochs of its phase the least-squares slope of validation VR r10 and of VCMR 0.5-r10 is not significantly
  positive (one-sided t test, p >= 0.05). A two-phase family (MINUTE: ``retriever_epochs`` before the
  localizer) has its VR checked at the end of the retriever phase, where VR stops changing, and its VCMR
  over the last epochs of the run. The older "flat" check (best of the last ``--window`` epochs at most
  ``--tol`` above the best before) is printed beside it: it passes slowly rising curves;
* print a table (condition, seed, epochs, best epoch, flat or not with the rise, training seconds: the sum of
  the history's per-epoch ``train_seconds``, validation excluded; result.json's ``train_seconds`` is the
  wall-clock of the processes that trained it *in one go*, so it undercounts a run resumed after a stop) and
  write convergence.json into the experiment's folder and benchmarks/results/ (with ``--tag T``, a
  second view of the same experiment: convergence_T.json, <experiment>_T_curves.png);
* with ``--versus A=B``, print A − B on the test split paired by seed (mean ± std of the per-seed
  differences, the 95 % t interval and the verdict), for every metric in ``--metric`` the runs have.
A run that fine-tunes another condition's model (``init_from``) is drawn from that model's best epoch on.
With ``--continue-rising STEP --max-epochs N`` (as given to ``momentsearch experiment``) each (condition, seed) is
read from the last run of its chain of continuations: runs still rising by the trend test continued by STEP
epochs until they pass it or reach N (``momentsearch.experiments.continuation``).
With ``--stored JSON`` (a convergence JSON this script wrote for the same experiment) a condition none of whose
runs is on disk is read from that file's rows (its test numbers and curves), so that runs trained now can be
paired with runs whose folders are gone; the table marks those rows "stored".

    python benchmarks/convergence.py configs/experiments/minute_vs_xml_converge.yaml [--window 5 --tol 1.0]
        [--only XML --only MINUTE] [--versus "MINUTE=XML"]

Run the experiment first (``momentsearch experiment ...``): this script trains nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import add_continuation_flags, chain_end, continuation_of  # noqa: E402
from momentsearch.config import load_yaml_config  # noqa: E402
from momentsearch.errors import ConfigError  # noqa: E402
from momentsearch.evaluation.report import figure, save_png  # noqa: E402
from momentsearch.experiments import ExperimentConfig, mvmr_metrics, prepare, results_folder, run_config, runs_folder  # noqa: E402
from momentsearch.experiments.continuation import curve_trends as trends  # noqa: E402
from momentsearch.experiments.continuation import read_history, vr_phase_end
from momentsearch.experiments.proxy_scores import stored_proxy_metrics  # noqa: E402
from momentsearch.experiments.stats import paired as paired_stats  # noqa: E402
from momentsearch.fileio import write_json  # noqa: E402
from momentsearch.readers import is_finite_number, read_json_object  # noqa: E402

CURVES = (("VR", "r10"), ("VCMR", "0.5-r10"), ("VCMR", "0.5-r1"))
METRICS = ("VCMR 0.5-r1", "VCMR 0.5-r10", "SVMR 0.5-r5", "VR r10", "nDCG VR", "nDCG VCMR 0.5", "nDCG VR 2-way", "nDCG VCMR 0.5 S>0",
           "NDCG@10 IoU0.5", "NLVL 0.5-r1", "MVMR 0.5-r1", "MVMR 0.5-r5")


def start_epoch(train_cfg: dict[str, Any]) -> int:
    """The epochs before this run's first: the best epoch of the run whose best.pt it fine-tunes (0: none)."""
    init = train_cfg.get("init_from") or ""
    source = Path(init).parent.parent / "history.json"
    if not init or not source.exists():
        return 0
    return int(max(read_history(source, validation=False), key=lambda h: h["selection"])["epoch"])


def run_metrics(result: dict[str, Any]) -> dict[str, float]:
    """A run's test-split numbers: its metrics; for an MVMR experiment, its current-protocol pool rows
    (experiment.mvmr_metrics: "topK "-prefixed with a retriever in front, as in the experiment's report); for
    one with ``score_with``, its nDCG against each proxy table, as "nDCG VR (bow)" (experiments/proxy_scores.py;
    the experiment runner stores them in result.json)."""
    out = {k: float(v) for k, v in result["metrics"].items() if isinstance(v, (int, float))}
    for key, row in result.get("mvmr", {}).items():
        out.update(mvmr_metrics(key, row))
    for key, row in result.get("proxy_ndcg", {}).items():
        out.update(stored_proxy_metrics(key, row))
    return out


def parse_versus(spec: str, conds: list[str]) -> tuple[str, str]:
    """``A=B`` as two of ``conds``; a name may hold "=" itself ("T=0.2"), so the split taken is the one
    that names two conditions."""
    splits = [(spec[:i], spec[i + 1:]) for i, ch in enumerate(spec) if ch == "="]
    named = [(a, b) for a, b in splits if a in conds and b in conds]
    if len(named) != 1:
        sys.exit(f"error: --versus {spec!r}: give A=B with two of the conditions {conds}")
    return named[0]


def paired(rows: list[dict[str, Any]], a: str, b: str, metrics: tuple[str, ...]) -> list[dict[str, Any]]:
    """a − b on the test split, paired by seed, for each metric both conditions' runs have."""
    by = {(r["condition"], r["seed"]): r["test"] for r in rows}
    seeds = sorted(s for c, s in by if c == a and (b, s) in by)
    out = []
    for m in metrics:
        if not seeds or any(m not in by[(c, s)] for c in (a, b) for s in seeds):
            continue
        p = paired_stats([by[(a, s)][m] for s in seeds], [by[(b, s)][m] for s in seeds])
        out.append({"versus": f"{a} − {b}", "metric": m, **p.as_dict(), "per_seed": [round(x, 2) for x in p.diffs]})
    return out


def _curves(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(c, list) and all(map(is_finite_number, c)) for c in v.values())


# the fields of a stored row this script reads, and what each must hold
_num = is_finite_number
STORED_FIELDS = {"epochs": _num, "best_epoch": _num, "start_epoch": _num, "epoch_train_seconds": _num,
                 "slope VR r10": _num, "p VR r10": _num, "slope VCMR 0.5-r10": _num, "p VCMR 0.5-r10": _num,
                 "converged": lambda v: isinstance(v, bool), "flat": lambda v: isinstance(v, bool),
                 "curves": _curves, "test": lambda v: isinstance(v, dict) and all(map(_num, v.values()))}


def read_stored(path: Path, experiment: str | None = None, flag: str = "--stored") -> list[dict[str, Any]]:
    """The rows of a convergence JSON this script wrote (for ``experiment``; None: for any); exits naming the file
    (and ``flag``, the option that named it) when it is unreadable, another experiment's, or its 'runs' are not rows."""
    try:
        data = read_json_object(path, ConfigError, "convergence table")
    except ConfigError as e:
        sys.exit(f"error: {flag}: {e}")
    if experiment is not None and data.get("experiment") != experiment:
        sys.exit(f"error: {flag} {path} is experiment {data.get('experiment')!r}, not {experiment!r}")
    runs = data.get("runs")
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        sys.exit(f"error: {flag} {path}: 'runs' is not a list of rows")
    return runs


def stored_rows(runs: list[dict[str, Any]], path: Path, cond: str, seeds: list[int]) -> list[dict[str, Any]] | None:
    """``cond``'s rows for ``seeds`` among ``runs`` (read from ``path`` by read_stored), marked "stored" (None: the
    file does not hold the condition); exits naming the file when it lacks one of the seeds or a field, or holds a
    seed twice (this script writes one row per condition and seed: a second is a hand edit, and neither is chosen)."""
    rows = [r for r in runs if r.get("condition") == cond]
    if not rows:
        return None
    seen = [r.get("seed") for r in rows]
    twice = sorted({s for s in seen if seen.count(s) > 1}, key=repr)
    if twice:
        sys.exit(f"error: --stored {path} holds {cond!r} seed(s) {twice} more than once")
    by_seed = {r.get("seed"): r for r in rows}
    missing = [s for s in seeds if s not in by_seed]
    if missing:
        sys.exit(f"error: --stored {path} holds {cond!r} without seed(s) {missing}")
    for s in seeds:
        lacks = [k for k in STORED_FIELDS if k not in by_seed[s]]
        if lacks:
            sys.exit(f"error: --stored {path}: {cond} seed {s} lacks {lacks}")
        wrong = [k for k, ok in STORED_FIELDS.items() if not ok(by_seed[s][k])]
        if wrong:
            sys.exit(f"error: --stored {path}: {cond} seed {s}: {wrong} not of the type this script writes "
                     "(numbers; curves and test a mapping of names to numbers or lists of numbers)")
    return [{**by_seed[s], "stored": str(path)} for s in seeds]


def rise(values: list[float], end: int, window: int) -> float | None:
    """Best of values[end - window:end] minus best of values[:end - window] (None: too few epochs)."""
    if end <= window:
        return None
    return max(values[end - window:end]) - max(values[:end - window])


def check_run(history: list[dict[str, Any]], train_cfg: dict[str, Any], window: int,
              trend_window: int = 10) -> dict[str, Any]:
    vr_end = vr_phase_end(history, train_cfg)  # a two-phase family: VR moves only before
    curves = {f"{t} {k}": [float(h["val"][t][k]) for h in history] for t, k in CURVES}
    t_vr, t_vcmr = trends(curves, vr_end, trend_window)
    return {"epochs": len(history), "vr_phase_end": vr_end,
            "rise VR r10": rise(curves["VR r10"], vr_end, window),
            "rise VCMR 0.5-r10": rise(curves["VCMR 0.5-r10"], len(history), window),
            "slope VR r10": t_vr.slope, "p VR r10": t_vr.p_rising, "slope VCMR 0.5-r10": t_vcmr.slope,
            "p VCMR 0.5-r10": t_vcmr.p_rising, "converged": t_vr.converged and t_vcmr.converged,
            "best_epoch": max(history, key=lambda h: h["selection"])["epoch"], "curves": curves}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("experiment", type=Path)
    ap.add_argument("--window", type=int, default=5, help="the last epochs that must not rise")
    ap.add_argument("--tol", type=float, default=1.0, help="points of recall a flat curve may still gain")
    add_continuation_flags(ap)
    ap.add_argument("--figures", type=Path, default=ROOT / "docs" / "figures")
    ap.add_argument("--only", action="append", default=[], help="only this condition (repeatable)")
    ap.add_argument("--versus", action="append", default=[], help="A=B: A − B paired by seed (repeatable)")
    ap.add_argument("--metric", action="append", default=[], help=f"metrics for --versus (default {METRICS})")
    ap.add_argument("--stored", type=Path, action="append", default=[], help="a convergence JSON of this experiment: "
                    "a condition with no run on disk is read from its rows (repeatable; the first that holds it)")
    ap.add_argument("--tag", default="", help="a second view of one experiment (another --only set): written as "
                    "convergence_<experiment>_<tag>.json and <experiment>_<tag>_curves.png beside the first")
    args = ap.parse_args()
    exp = load_yaml_config(ExperimentConfig, args.experiment)
    out = results_folder(exp)
    bench, tables = prepare(exp)
    runs_dir = runs_folder(exp, bench)
    rows: list[dict[str, Any]] = []
    conds = args.only or list(exp.conditions)
    cont = continuation_of(args)
    stored_files = [(p, read_stored(p, exp.name)) for p in args.stored]  # each file read once
    for cond in conds:
        configs = {seed: run_config(exp, cond, seed, bench, tables, runs_dir) for seed in exp.seeds}
        on_disk = any((Path(d["out_dir"]) / "history.json").exists() for d in configs.values())
        stored = None if on_disk else next(
            (r for r in (stored_rows(runs, p, cond, list(exp.seeds)) for p, runs in stored_files) if r), None)
        if stored:
            print(f"{cond}: no run on disk; read from {stored[0]['stored']}")
            rows += stored
            continue
        for seed in exp.seeds:
            d = chain_end(configs[seed], cont, f"{cond} seed {seed}", args.experiment, args)
            run = Path(d["out_dir"])
            if not (run / "history.json").exists() or not (run / "result.json").exists():
                sys.exit(f"error: {cond} seed {seed} has not finished ({run}); run `momentsearch experiment "
                         f"{args.experiment}` first")
            try:
                history, start = read_history(run / "history.json"), start_epoch(d)
            except ConfigError as e:
                sys.exit(f"error: {e}")
            result = json.loads((run / "result.json").read_text())
            row = {"condition": cond, "seed": seed, **check_run(history, d, args.window, args.trend_window),
                   "train_seconds": round(result["train_seconds"], 1),
                   "epoch_train_seconds": round(sum(float(h.get("train_seconds", 0.0)) for h in history), 1),
                   "seconds_per_epoch": round(result["seconds_per_epoch"], 1), "start_epoch": start,
                   "test": run_metrics(result)}
            row["flat"] = all(row[k] is not None and row[k] <= args.tol for k in ("rise VR r10", "rise VCMR 0.5-r10"))
            rows.append(row)

    print(f"\nconvergence ({exp.name}): converged = over the last {args.trend_window} epochs the slope of VR r10 and of "
          "VCMR 0.5-r10 is not significantly positive (one-sided t, p >= 0.05; VR at the end of a retriever phase); "
          f"flat = best of the last {args.window} epochs at most {args.tol} above the best before them\n")
    print("| condition | seed | epochs | best epoch | slope VR r10 (p) | slope VCMR 0.5-r10 (p) | converged | flat | "
          "training (s, sum of epochs) |")
    print("|---|---:|---:|---:|---:|---:|---|---|---:|")
    for r in rows:
        print(f"| {r['condition']} | {r['seed']} | {r['epochs']} | {r['best_epoch']} | {r['slope VR r10']:+.3f} "
              f"({r['p VR r10']:.2f}) | {r['slope VCMR 0.5-r10']:+.3f} ({r['p VCMR 0.5-r10']:.2f}) | "
              f"{'yes' if r['converged'] else 'NO'} | {'yes' if r['flat'] else 'NO'} | {r['epoch_train_seconds']:.0f}"
              f"{' (stored)' if 'stored' in r else ''} |")

    many = len(conds) > 8  # then the legend goes right of the panels (12 names a column), colours from tab20
    ncol = -(-len(conds) // 12)
    fig, axes = figure(1, len(CURVES), figsize=(5 * len(CURVES) + (3.6 * ncol if many else 0), 4))
    import matplotlib  # figure() has loaded it on the Agg backend

    colour = (lambda ci: matplotlib.colormaps["tab20"](ci % 20)) if many else (lambda ci: f"C{ci}")
    for ax, (t, k) in zip(axes, CURVES):
        for ci, cond in enumerate(conds):
            for r in (r for r in rows if r["condition"] == cond):
                ys = r["curves"][f"{t} {k}"]
                x0 = r["start_epoch"]
                ax.plot(range(x0 + 1, x0 + len(ys) + 1), ys, color=colour(ci), alpha=0.8,
                        label=cond if r["seed"] == exp.seeds[0] else None)
        ax.set_title(f"validation {t} {k}")
        ax.set_xlabel("epoch")
        ax.set_ylabel("recall (%)")
        ax.grid(alpha=0.3)
    if many:
        axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), ncol=ncol)
    else:
        axes[0].legend(fontsize=7, loc="lower right")  # rising curves leave the lower right empty
    fig.suptitle(f"{exp.name}: one line per seed")
    suffix = f"_{args.tag}" if args.tag else ""
    stem = exp.name + suffix
    png = save_png(fig, args.figures / f"{stem}_curves.png")
    versus = []
    for spec in args.versus:
        a, b = parse_versus(spec, conds)
        versus += paired(rows, a, b, tuple(args.metric) or METRICS)
    if versus:
        print("\n| A − B (test, paired by seed) | metric | mean ± std | 95 % t interval | verdict | per seed |\n"
              "|---|---|---:|---:|---|---|")
        for v in versus:
            print(f"| {v['versus']} | {v['metric']} | {v['mean']:+.2f} ± {v['std']:.2f} | [{v['low']:+.2f}, "
                  f"{v['high']:+.2f}] | {v['verdict']} | {', '.join(f'{x:+.2f}' for x in v['per_seed'])} |")
    summary = {"experiment": exp.name, "tag": args.tag, "window": args.window, "tol": args.tol, "runs": rows, "versus": versus}
    write_json(out / f"convergence{suffix}.json", summary)
    write_json(ROOT / "benchmarks" / "results" / f"convergence_{stem}.json", summary)
    print(f"\nwrote {png}, benchmarks/results/convergence_{stem}.json")


if __name__ == "__main__":
    main()
