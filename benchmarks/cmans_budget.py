"""CM-ANS at fixed fine-tune budgets (issue 42, item 5): each (a, b) against the control of the same budget.

``configs/experiments/rmmn_controls.yaml`` fine-tunes the grade-1 RMMN† for 3, 6 and 12 epochs with
``checkpoint: last`` (no best-epoch selection), with CM-ANS hard negatives at a in {10, 50, 200}, b in
{0, -0.1}, and a control that trains as long at the same lr x 0.1 without them. ``benchmarks/convergence.py``
pairs each by seed (``--versus "CM-ANS a=.. b=.., N epochs=control, N epochs at lr x 0.1"``) and stores the
paired mean, the 95 % t interval and the verdict. This script reads those rows back and draws them against
the budget, one line per (a, b), one panel per metric, and prints the table.

    python benchmarks/cmans_budget.py [--json benchmarks/results/convergence_rmmn_controls_finetune.json]
        [--figure docs/figures/rmmn_controls_cmans_budget.png] [--metric "MVMR 0.5-r1" ...]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import interval  # noqa: E402
from momentsearch.evaluation.report import figure as subplots  # noqa: E402
from momentsearch.evaluation.report import save_png

ROW = re.compile(r"^CM-ANS a=(?P<a>[\d.]+) b=(?P<b>-?[\d.]+), (?P<n>\d+) epochs − control, (?P=n) epochs at lr x 0\.1$")
METRICS = ("MVMR 0.5-r1", "MVMR 0.5-r5", "NLVL 0.5-r1", "nDCG VR 2-way")


def _order(key: tuple[str, str]) -> tuple[int, str, float, float]:
    """Metrics in METRICS' order, then a and b as numbers (a=10 before a=50 before a=200)."""
    metric, ab = key
    a, b = (float(part.split("=")[1]) for part in ab.split())
    return (METRICS.index(metric) if metric in METRICS else len(METRICS), metric, a, b)


def budget_rows(versus: list[dict], metrics: tuple[str, ...] = METRICS) -> dict[tuple[str, str], dict[int, dict]]:
    """{(metric, "a=.. b=.."): {epochs: versus row}} for every CM-ANS − control row of ``versus``."""
    out: dict[tuple[str, str], dict[int, dict]] = {}
    for row in versus:
        m = ROW.match(row["versus"])
        if m and row["metric"] in metrics:
            out.setdefault((row["metric"], f"a={m['a']} b={m['b']}"), {})[int(m["n"])] = row
    if not out:
        raise SystemExit("no 'CM-ANS a=.. b=.., N epochs − control, N epochs at lr x 0.1' rows for "
                         f"{', '.join(metrics)}: run benchmarks/convergence.py with those --versus pairs first")
    return out


def table(rows: dict[tuple[str, str], dict[int, dict]]) -> str:
    budgets = sorted({n for per in rows.values() for n in per})
    lines = ["| metric | CM-ANS | " + " | ".join(f"{n} epochs" for n in budgets) + " |",
             "|---|---|" + "---|" * len(budgets)]
    for (metric, ab), per in sorted(rows.items(), key=lambda kv: _order(kv[0])):
        cells = []
        for n in budgets:
            r = per.get(n)
            cells.append("" if r is None else interval(r)
                         + ("" if r["verdict"] == "inconclusive" else f" **{r['verdict']}**"))
        lines.append(f"| {metric} | {ab} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def figure(rows: dict[tuple[str, str], dict[int, dict]], path: Path) -> None:
    metrics = list(dict.fromkeys(m for m, _ in sorted(rows, key=_order)))
    fig, axes = subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.8), squeeze=False)
    for ax, metric in zip(axes[0], metrics):
        series = [ab for m, ab in sorted(rows, key=_order) if m == metric]
        for i, ab in enumerate(series):
            per = rows[(metric, ab)]
            ns = sorted(per)
            x = [n * (1 + 0.03 * (i - len(series) / 2)) for n in ns]  # spread the bars apart
            y = [per[n]["mean"] for n in ns]
            err = [[per[n]["mean"] - per[n]["low"] for n in ns], [per[n]["high"] - per[n]["mean"] for n in ns]]
            ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=ab, linestyle="--" if "b=0" in ab else "-")
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xticks([3, 6, 12], labels=["3", "6", "12"])
        ax.set_xlabel("fine-tune epochs (last checkpoint)")
        ax.set_title(f"{metric}: CM-ANS − control")
        ax.set_ylabel("paired mean, 95 % t interval (points)")
    axes[0][0].legend(fontsize=8)
    save_png(fig, path)  # atomic, and makes the folder


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", type=Path, default=ROOT / "benchmarks/results/convergence_rmmn_controls_finetune.json")
    p.add_argument("--figure", type=Path, default=ROOT / "docs/figures/rmmn_controls_cmans_budget.png")
    p.add_argument("--metric", action="append")
    args = p.parse_args(argv)
    if not args.json.is_file():
        raise SystemExit(f"{args.json}: not found; run benchmarks/convergence.py configs/experiments/"
                         "rmmn_controls.yaml --tag finetune ... first")
    rows = budget_rows(json.loads(args.json.read_text())["versus"], tuple(args.metric or METRICS))
    print(table(rows))
    figure(rows, args.figure)
    print(f"wrote {args.figure}", file=sys.stderr)


if __name__ == "__main__":
    main()
