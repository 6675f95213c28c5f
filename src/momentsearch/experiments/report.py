"""Aggregate an experiment's runs: mean and spread over seeds, a markdown table and a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from momentsearch.evaluation.ndcg_iou import NDCG_IOU_COLUMNS
from momentsearch.evaluation.report import figure, print_table, save_png
from momentsearch.experiments.stats import paired
from momentsearch.fileio import atomic_open, write_json

# the columns of the pairs paper's Tables 5-6 (+ VR r10: with under 100 test videos VR r100 is 100), then the
# graded metrics
COLUMNS = ["VCMR 0.5-r1", "VCMR 0.5-r10", "VCMR 0.5-r100", "VCMR 0.7-r1", "VCMR 0.7-r10", "VCMR 0.7-r100",
           "SVMR 0.5-r5", "VR r10", "VR r100", "MP-VCMR 0.5-r1", "MP-VCMR 0.5-r10", "nDCG VR", "nDCG VCMR 0.5"]
# TVR-Ranking's NDCG@K,IoU against the oracle's grades (a second table)
NDCG_COLUMNS = NDCG_IOU_COLUMNS
# the MVMR protocol (experiments with `mvmr:`): NLVL on the gold video, MVMR in the pool, and with a video
# retriever in front (Table 2: "topK " columns); shown only when the runs have them
MVMR_COLUMNS = ["NLVL 0.5-r1", "NLVL 0.7-r1", "MVMR 0.5-r1", "MVMR 0.7-r1", "MVMR 0.5-r5", "MVMR 0.5-r20",
                "MVMR 0.5-r50"]
PLOT_COLUMNS = ["VCMR 0.5-r10", "VCMR 0.5-r100", "SVMR 0.5-r5", "VR r10", "MP-VCMR 0.5-r10", "nDCG VR", "nDCG VCMR 0.5"]
# the plot of an MVMR experiment: single video, pool, pool behind a retriever (the first "topK" of the runs)
MVMR_PLOT_COLUMNS = ["NLVL 0.5-r1", "MVMR 0.5-r1", "MVMR 0.7-r1", "MVMR 0.5-r5", "MVMR 0.5-r20", "VCMR 0.5-r1",
                     "VR r10"]


def plot_columns(agg: dict[str, dict[str, Any]]) -> list[str]:
    """PLOT_COLUMNS, or for runs evaluated under the MVMR protocol MVMR_PLOT_COLUMNS and Table 2's MVMR 0.5-r1."""
    have = agg[next(iter(agg))]
    if "MVMR 0.5-r1" not in have:
        return PLOT_COLUMNS
    return [*MVMR_PLOT_COLUMNS, *(c for c in have if c.startswith("top") and c.endswith(" MVMR 0.5-r1"))]


def _metric_names(results: dict[tuple[str, int], dict[str, Any]]) -> set[str]:
    """Every metric any run has."""
    return set().union(*(r["metrics"] for r in results.values())) if results else set()


def mvmr_columns(results: dict[tuple[str, int], dict[str, Any]]) -> list[str]:
    """The MVMR columns the runs have: MVMR_COLUMNS, then each "topK " variant of the R@1 / R@5 ones."""
    have = _metric_names(results)
    tops = sorted({k.split(" ", 1)[0] for k in have if k.startswith("top") and " MVMR " in k})
    table2 = [f"{t} MVMR {iou}-r{k}" for t in tops for k in (1, 5) for iou in (0.3, 0.5)]
    return [c for c in [*MVMR_COLUMNS, *table2] if c in have]


def is_proxy_column(name: str) -> bool:
    """An "nDCG ... (table)" column of an experiment with ``score_with`` (nDCG against a text proxy)."""
    return name.startswith("nDCG ") and name.endswith(")") and " (" in name


def proxy_columns(results: dict[tuple[str, int], dict[str, Any]]) -> list[str]:
    return sorted(k for k in _metric_names(results) if is_proxy_column(k))


def aggregate(conditions: list[str], seeds: list[int], results: dict[tuple[str, int], dict[str, Any]]
              ) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    extra = mvmr_columns(results) + proxy_columns(results)
    for c in conditions:
        runs = [results[(c, s)] for s in seeds]
        row: dict[str, Any] = {}
        for col in [*COLUMNS, *NDCG_COLUMNS, *extra, "seconds_per_epoch", "pairs_per_batch", "epochs"]:
            vals = np.array([r["metrics"][col] if col in r["metrics"] else r.get(col, np.nan) for r in runs], float)
            row[col] = {"mean": float(vals.mean()), "std": float(vals.std(ddof=1)) if len(vals) > 1 else 0.0,
                        "runs": vals.tolist()}
        out[c] = row
    # paired by seed against the first condition (the same seed = the same initialisation and batch
    # order): the difference removes most of the seed-to-seed spread
    ref = conditions[0]
    for c in conditions:
        for col in [*COLUMNS, *NDCG_COLUMNS, *extra]:
            p = paired(out[c][col]["runs"], out[ref][col]["runs"])  # the t interval and the verdict (stats.py)
            out[c][col].update(delta_mean=p.mean, delta_std=p.std, delta_low=p.low, delta_high=p.high,
                               verdict=p.verdict)
    return out


def _cell(m: dict[str, Any]) -> str:
    return f"{m['mean']:.2f} ± {m['std']:.2f}"


def _section(agg: dict[str, dict[str, Any]], cols: list[str], intro: str) -> str:
    """A table of ``cols``: each condition's mean ± std, and below it its paired difference to the first condition
    (mean ± std [95 % t interval])."""
    ref = next(iter(agg))
    out = (f"\n{intro}. Mean ± std; paired difference to {ref} [95 % t interval] below each row:\n\n"
           "| condition | " + " | ".join(cols) + " |\n|---|" + "---:|" * len(cols) + "\n")
    for c, r in agg.items():
        out += f"| {c} | " + " | ".join(_cell(r[k]) for k in cols) + " |\n"
        if c != ref:
            out += f"| {c} − {ref} | " + " | ".join(f"{r[k]['delta_mean']:+.2f} ± {r[k]['delta_std']:.2f} "
                                                 f"[{r[k]['delta_low']:+.2f}, {r[k]['delta_high']:+.2f}]"
                                                 for k in cols) + " |\n"
    return out


def epochs_line(agg: dict[str, dict[str, Any]]) -> str:
    """Where runs of a condition trained for different numbers of epochs (runs still rising were continued): each
    such condition's epochs, seed by seed; else nothing."""
    uneven = {c: row["epochs"]["runs"] for c, row in agg.items()
              if "epochs" in row and len(set(row["epochs"]["runs"])) > 1}
    if not uneven:
        return ""
    return ("\nEpochs per seed where they differ (runs still rising by the trend test were continued): "
            + "; ".join(f"{c}: {', '.join(f'{e:g}' for e in runs)}" for c, runs in uneven.items()) + ".\n")


def markdown(agg: dict[str, dict[str, Any]], seeds: list[int]) -> str:
    cols = [*COLUMNS, "seconds_per_epoch", "pairs_per_batch"]
    head = "| condition | " + " | ".join(cols) + " |\n|---|" + "---:|" * len(cols) + "\n"
    body = "".join(f"| {c} | " + " | ".join(_cell(row[k]) for k in cols) + " |\n" for c, row in agg.items())
    ref = next(iter(agg))
    dcols = [c for c in COLUMNS if c != "VR r100"]
    dhead = (f"\nDifference to {ref}, paired by seed: mean ± std of the per-seed differences [95 % t interval], and "
             "the verdict on 'beats it' (borne out / refuted when the interval excludes 0, else inconclusive; "
             "experiments/stats.py):\n\n"
             "| condition | " + " | ".join(dcols) + " |\n|---|" + "---:|" * len(dcols) + "\n")
    dbody = "".join(f"| {c} | " + " | ".join(f"{row[k]['delta_mean']:+.2f} ± {row[k]['delta_std']:.2f} "
                                            f"[{row[k]['delta_low']:+.2f}, {row[k]['delta_high']:+.2f}] "
                                            f"{row[k]['verdict']}" for k in dcols)
                    + " |\n" for c, row in agg.items() if c != ref)
    out = head + body + f"\nMean ± standard deviation over seeds {seeds}.\n" + epochs_line(agg) + (
        dhead + dbody if dbody else "")
    mv = [c for c in agg[ref] if c in MVMR_COLUMNS or c.startswith("top")]
    if mv:
        out += _section(agg, mv, "The MVMR protocol (NLVL: the gold video alone; MVMR: the query's pool; topK: the pool "
                                 "cut to the K videos the retriever ranks highest)")
    px = [c for c in agg[ref] if is_proxy_column(c)]
    if px:
        out += _section(agg, px, "nDCG against the text proxies of `score_with`")
    if any(not np.isnan(row[c]["mean"]) for row in agg.values() for c in NDCG_COLUMNS):
        out += _section(agg, NDCG_COLUMNS, "TVR-Ranking's NDCG@K,IoU against the oracle's grades")
    return out


def _color(i: int, n: int) -> Any:
    """Matplotlib's 10-colour cycle, or tab20 for more conditions (no two share a colour)."""
    if n <= 10:
        return f"C{i}"
    import matplotlib

    return matplotlib.colormaps["tab20"](i % 20)


def plot(agg: dict[str, dict[str, Any]], path: Path, title: str) -> None:
    """Top: mean ± std over seeds; bottom: the difference to the first condition, paired by seed."""
    conds = list(agg)
    ref = conds[0]
    fig, axes = figure(2, 1, figsize=(11, 7.5))
    columns = plot_columns(agg)
    x = np.arange(len(columns))
    for ax, (key, err, shown) in zip(axes, (("mean", "std", conds), ("delta_mean", "delta_std", conds[1:])),
                                      strict=True):
        w = 0.8 / max(len(shown), 1)
        for i, c in enumerate(shown):
            vals = [agg[c][k][key] for k in columns]
            errs = [agg[c][k][err] for k in columns]
            ax.bar(x + (i - (len(shown) - 1) / 2) * w, vals, w, yerr=errs, capsize=2, label=c,
                   color=_color(conds.index(c), len(conds)))
        ax.set_xticks(x, columns, fontsize=8)
        ax.axhline(0, color="black", linewidth=0.6)
    axes[0].set_ylabel("% (mean ± std over seeds)")
    axes[0].set_title(title)
    axes[0].legend(fontsize=7, ncol=3)
    axes[1].set_ylabel(f"difference to {ref}\n(paired by seed)")
    save_png(fig, path)


def write_report(name: str, out: Path, conditions: list[str], seeds: list[int],
                 results: dict[tuple[str, int], dict[str, Any]], config: str) -> dict[str, Any]:
    agg = aggregate(conditions, seeds, results)
    write_json(out / "results.json", {"experiment": name, "config": config, "seeds": seeds, "conditions": agg})
    with atomic_open(out / "results.md") as fh:
        fh.write(f"# {name}\n\n`momentsearch experiment {config}`\n\n" + markdown(agg, seeds))
    plot(agg, out / "results.png", name)
    print_table({c: {k: row[k]["mean"] for k in COLUMNS} for c, row in agg.items()}, COLUMNS,
                title=f"{name}: mean over seeds {seeds} (std in {out / 'results.md'})")
    return agg
