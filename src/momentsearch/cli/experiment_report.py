"""Aggregate an experiment's runs: mean and spread over seeds, a markdown table and a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from momentsearch.evaluation.report import figure, print_table, save_png
from momentsearch.fileio import atomic_open, write_json

# the columns of the pairs paper's Tables 5-6 (+ VR r10: with under 100 test videos VR r100 is 100), then the
# graded metrics
COLUMNS = ["VCMR 0.5-r1", "VCMR 0.5-r10", "VCMR 0.5-r100", "VCMR 0.7-r1", "VCMR 0.7-r10", "VCMR 0.7-r100",
           "SVMR 0.5-r5", "VR r10", "VR r100", "MP-VCMR 0.5-r1", "MP-VCMR 0.5-r10", "nDCG VR", "nDCG VCMR 0.5"]
PLOT_COLUMNS = ["VCMR 0.5-r10", "VCMR 0.5-r100", "SVMR 0.5-r5", "VR r10", "MP-VCMR 0.5-r10", "nDCG VR", "nDCG VCMR 0.5"]


def aggregate(conditions: list[str], seeds: list[int], results: dict[tuple[str, int], dict[str, Any]]
              ) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for c in conditions:
        runs = [results[(c, s)] for s in seeds]
        row: dict[str, Any] = {}
        for col in [*COLUMNS, "seconds_per_epoch", "pairs_per_batch"]:
            vals = np.array([r["metrics"][col] if col in r["metrics"] else r.get(col, np.nan) for r in runs], float)
            row[col] = {"mean": float(vals.mean()), "std": float(vals.std(ddof=1)) if len(vals) > 1 else 0.0,
                        "runs": vals.tolist()}
        out[c] = row
    # paired by seed against the first condition (the same seed = the same initialisation and batch
    # order): the difference removes most of the seed-to-seed spread
    ref = conditions[0]
    for c in conditions:
        for col in COLUMNS:
            d = np.array(out[c][col]["runs"]) - np.array(out[ref][col]["runs"])
            out[c][col]["delta_mean"] = float(d.mean())
            out[c][col]["delta_std"] = float(d.std(ddof=1)) if len(d) > 1 else 0.0
    return out


def _cell(m: dict[str, Any]) -> str:
    return f"{m['mean']:.2f} ± {m['std']:.2f}"


def markdown(agg: dict[str, dict[str, Any]], seeds: list[int]) -> str:
    cols = [*COLUMNS, "seconds_per_epoch", "pairs_per_batch"]
    head = "| condition | " + " | ".join(cols) + " |\n|---|" + "---:|" * len(cols) + "\n"
    body = "".join(f"| {c} | " + " | ".join(_cell(row[k]) for k in cols) + " |\n" for c, row in agg.items())
    ref = next(iter(agg))
    dcols = [c for c in COLUMNS if c != "VR r100"]
    dhead = (f"\nDifference to {ref}, paired by seed (mean ± std of the per-seed differences):\n\n"
             "| condition | " + " | ".join(dcols) + " |\n|---|" + "---:|" * len(dcols) + "\n")
    dbody = "".join(f"| {c} | " + " | ".join(f"{row[k]['delta_mean']:+.2f} ± {row[k]['delta_std']:.2f}" for k in dcols)
                    + " |\n" for c, row in agg.items() if c != ref)
    return head + body + f"\nMean ± standard deviation over seeds {seeds}.\n" + (dhead + dbody if dbody else "")


def plot(agg: dict[str, dict[str, Any]], path: Path, title: str) -> None:
    conds = list(agg)
    fig, ax = figure(figsize=(max(7, 1.3 * len(PLOT_COLUMNS) * max(1, len(conds)) / 3), 4))
    width = 0.8 / len(conds)
    x = np.arange(len(PLOT_COLUMNS))
    for i, c in enumerate(conds):
        means = [agg[c][k]["mean"] for k in PLOT_COLUMNS]
        stds = [agg[c][k]["std"] for k in PLOT_COLUMNS]
        ax.bar(x + (i - (len(conds) - 1) / 2) * width, means, width, yerr=stds, capsize=2, label=c)
    ax.set_xticks(x, PLOT_COLUMNS, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("%")
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2)
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
