"""How often two runs' test R@k are exactly level, against how often they differ by one or two queries.

Two MINUTE-family runs at one seed (MINUTE, w/o MCM, the scale-matched control) were found exactly level on
VCMR 0.5-r1 twice in ten pairs. Is a tie more common than the differences next to it? For each stored convergence
JSON (with its number of test queries), every pair of runs of different conditions is compared on each count metric
(VCMR and SVMR at IoU 0.3/0.5/0.7, R@1/5/10) as a whole number of queries, A − B. Pairs at one seed and pairs at
different seeds (which share nothing but the benchmark) are counted apart. A tie is no more than chance when the
count at 0 is near the counts at ±1 and ±2: a peaked distribution of differences puts about as many at 0 as next
to it. The script prints the counts and each tie at one seed, and writes them with the command.

    python benchmarks/tie_rate.py --stored benchmarks/results/convergence_minute_draw2_draw2_recipe.json=1990 \
        --stored benchmarks/results/convergence_minute_mcm_converge_5seeds.json=433 \
        --stored benchmarks/results/convergence_minute_mcm_converge_rule.json=433 \
        --prefix MINUTE --out benchmarks/results/tie_rate_minute.json
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import command_line  # noqa: E402
from convergence import read_stored  # noqa: E402
from momentsearch.fileio import write_json  # noqa: E402
from momentsearch.readers import is_finite_number  # noqa: E402

RANKS = (1, 5, 10)


def count_metrics(k: int) -> re.Pattern:
    """VCMR and SVMR at IoU 0.3/0.5/0.7, R@k: counts of queries."""
    return re.compile(rf"^(VCMR|SVMR) 0\.[357]-r{k}$")


def query_differences(runs: list[dict[str, Any]], n_queries: int,
                      metrics: re.Pattern) -> tuple[dict[str, Counter], list[dict[str, Any]]]:
    """{"same seed" | "other seeds": Counter of A − B in queries} over every pair of runs of different conditions
    and every count metric both hold, and the ties at one seed (condition pair, seed, metric, value)."""
    counts: dict[str, Counter] = {"same seed": Counter(), "other seeds": Counter()}
    ties = []
    for a, b in itertools.combinations(runs, 2):
        if a["condition"] == b["condition"]:
            continue
        group = "same seed" if a["seed"] == b["seed"] else "other seeds"
        for metric in sorted(set(a["test"]) & set(b["test"])):
            if not metrics.match(metric):
                continue
            diff = (a["test"][metric] - b["test"][metric]) * n_queries / 100
            # each percentage is rounded to 2 decimals: within 0.005 % of n_queries of a count, the difference twice that
            if abs(diff - round(diff)) > n_queries * 1e-4 + 1e-9:
                sys.exit(f"error: {metric} of {a['condition']} seed {a['seed']} and {b['condition']} seed {b['seed']} "
                         f"differ by {diff:.3f} queries, not a whole number: is {n_queries} the number of test queries?")
            counts[group][round(diff)] += 1
            if group == "same seed" and round(diff) == 0:
                ties.append({"A": a["condition"], "B": b["condition"], "seed": a["seed"], "metric": metric,
                             "value": a["test"][metric]})
    return counts, ties


def summary(c: Counter) -> dict[str, float]:
    """The count at 0 beside the mean count at ±1 and at ±2, and how many compared."""
    return {"compared": sum(c.values()), "at 0": c[0], "mean at +-1": (c[1] + c[-1]) / 2,
            "mean at +-2": (c[2] + c[-2]) / 2, "within +-5": sum(c[d] for d in range(-5, 6))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--stored", action="append", required=True, metavar="JSON=N",
                    help="a convergence JSON and its number of test queries")
    ap.add_argument("--prefix", default="", help="only conditions whose name starts with this")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    tables = [_rows(item, args.prefix) for item in args.stored]
    result: dict[str, Any] = {"command": command_line(),
                              "stored": {path: {"test queries": n, "conditions": sorted({r["condition"] for r in rows})}
                                         for path, n, rows in tables}}
    for k in RANKS:
        total: dict[str, Counter] = {"same seed": Counter(), "other seeds": Counter()}
        ties = []
        for path, n, rows in tables:
            counts, found = query_differences(rows, n, count_metrics(k))
            for group in total:
                total[group] += counts[group]
            ties += [{**t, "stored": path} for t in found]
        result[f"R@{k}"] = {**{group: summary(total[group]) for group in total}, "ties at one seed": ties}
        for group in total:
            print(f"R@{k}, {group}: {summary(total[group])}")
        for t in ties:
            print(f"  level: {t['A']} and {t['B']}, seed {t['seed']}, {t['metric']} {t['value']} ({t['stored']})")
    if args.out:
        write_json(args.out, result)


def _rows(item: str, prefix: str) -> tuple[str, int, list[dict[str, Any]]]:
    """(path, test queries, rows of the conditions starting with ``prefix``) of one --stored FILE=N."""
    path, _, n = item.rpartition("=")
    if not path or not n.isdigit() or int(n) < 1:
        sys.exit(f"error: --stored {item!r}: write FILE=N, N the number of test queries")
    if int(n) >= 5000:  # the stored percentages have 2 decimals: a difference is then not a count to within 1/2
        sys.exit(f"error: --stored {item!r}: with {n} queries, percentages to 2 decimals do not give whole counts")
    rows = [r for r in read_stored(Path(path)) if str(r.get("condition", "")).startswith(prefix)]
    bad = [i for i, r in enumerate(rows) if not isinstance(r.get("seed"), int) or not isinstance(r.get("test"), dict)
           or not all(is_finite_number(v) for v in r["test"].values())]
    if bad or not rows:
        sys.exit(f"error: --stored {path}: " + (f"row(s) {bad} without an integer seed and numeric test numbers"
                                                if bad else f"no condition starts with {prefix!r}"))
    return path, int(n), rows


if __name__ == "__main__":
    main()
