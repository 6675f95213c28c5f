"""Which verdicts transfer from templated to real captions (issue 43 item 5): each claim paired by seed on the
synthetic `converge` preset (configs/experiments/synthetic_claims.yaml) and on the real-caption `charades` preset
(configs/experiments/charades_claims.yaml), the same conditions, budget (40 epochs) and seeds.

For every claim "A beats B" and metric: the mean of the per-seed differences A - B on the test split, their sd,
the 95 % t interval and the verdict of ``experiments/stats.py`` (borne out / refuted only when the interval
excludes 0), and how many of A's and B's runs pass the trend test of benchmarks/convergence.py (when its JSON is
there). Prints the Markdown table and writes benchmarks/results/transfer_table.json.

    momentsearch experiment configs/experiments/synthetic_claims.yaml --jobs 2
    momentsearch experiment configs/experiments/charades_claims.yaml --jobs 2
    python benchmarks/convergence.py configs/experiments/synthetic_claims.yaml
    python benchmarks/convergence.py configs/experiments/charades_claims.yaml
    python benchmarks/transfer_table.py
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

from _common import interval  # noqa: E402
from momentsearch.experiments.stats import paired  # noqa: E402
from momentsearch.fileio import write_json  # noqa: E402

PRESETS = {"synthetic": "synthetic_claims", "real captions": "charades_claims"}
# (claim, A, B): A and B name a condition of both experiments; "truth" is the synthetic oracle in one and the
# action-class table in the other
CLAIMS = [
    ("+PR beats XML", "+PR (np-vp 0.7)", "XML"),
    ("C = Psi beats C = 1", "+PR (np-vp 0.7)", "+PR C=1 (np-vp 0.7)"),
    ("the pairs' content matters: +PR beats shuffled partners", "+PR (np-vp 0.7)", "+PR shuffled partners (np-vp 0.7)"),
    ("Wray's T = 0.5 on BoW beats instance-based", "T=0.5 (BoW)", "XML"),
    ("T = 0.5 on the truth beats instance-based", "T=0.5 (truth)", "XML"),
]
ALIASES = {"T=0.5 (truth)": ("T=0.5 (truth)", "T=0.5 (class truth)")}
METRICS = ["VCMR 0.5-r1", "VCMR 0.5-r10", "nDCG VCMR 0.5"]


def _condition(results: dict[str, Any], name: str) -> dict[str, Any] | None:
    for n in ALIASES.get(name, (name,)):
        if n in results["conditions"]:
            return results["conditions"][n]
    return None


def _converged(conv: dict[str, Any] | None, name: str) -> str:
    if conv is None:
        return "?"
    runs = [r for r in conv["runs"] if r["condition"] in ALIASES.get(name, (name,))]
    return f"{sum(bool(r['converged']) for r in runs)}/{len(runs)}" if runs else "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, default=ROOT / "runs" / "experiments", help="the experiments' folder")
    args = ap.parse_args()
    results, convergence = {}, {}
    for preset, name in PRESETS.items():
        path = args.runs / name / "results.json"
        if not path.is_file():
            sys.exit(f"{path}: not found; run `momentsearch experiment configs/experiments/{name}.yaml` first")
        results[preset] = json.loads(path.read_text())
        conv = ROOT / "benchmarks" / "results" / f"convergence_{name}.json"
        convergence[preset] = json.loads(conv.read_text()) if conv.is_file() else None
    rows: list[dict[str, Any]] = []
    for claim, a, b in CLAIMS:
        for metric in METRICS:
            row: dict[str, Any] = {"claim": claim, "metric": metric}
            for preset in PRESETS:
                ca, cb = _condition(results[preset], a), _condition(results[preset], b)
                if ca is None or cb is None or metric not in ca or metric not in cb:
                    row[preset] = None
                    continue
                p = paired(ca[metric]["runs"], cb[metric]["runs"])
                row[preset] = {"mean": p.mean, "std": p.std, "low": p.low, "high": p.high, "n": p.n,
                               "verdict": p.verdict, "per_seed": list(p.diffs), "cell": p.cell(),
                               "converged": f"{_converged(convergence[preset], a)}, {_converged(convergence[preset], b)}"}
            rows.append(row)
    print("| claim | metric | synthetic: A − B [95 % t interval] | verdict | real captions: A − B [95 % t interval] "
          "| verdict |")
    print("|---|---|---:|---|---:|---|")
    for r in rows:
        cells = [(interval(r[p]), r[p]["verdict"]) if r[p] else
                 ("not run", "") for p in PRESETS]
        print(f"| {r['claim']} | {r['metric']} | {cells[0][0]} | {cells[0][1]} | {cells[1][0]} | {cells[1][1]} |")
    out = ROOT / "benchmarks" / "results" / "transfer_table.json"
    write_json(out, {"command": "python benchmarks/transfer_table.py", "experiments": PRESETS,
                     "seeds": {p: results[p]["seeds"] for p in PRESETS}, "rows": rows})
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
