"""Every stored run under the equivalence rule (issue 75 part 2), from the curves the convergence JSONs keep.

    python benchmarks/equivalence_status.py [--window 20] [--tolerance 0.1]

Each ``benchmarks/results/convergence_*.json`` (written by ``benchmarks/convergence.py``) holds, per run, its
validation curves (VR r10, VCMR 0.5-r10, VCMR 0.5-r1) and the trend test's verdict. The equivalence rule
(``experiments.stats.flatness``): converged when the upper end of the 90 % t interval of each curve's slope over
the last ``window`` epochs is below ``tolerance`` points per epoch (VR up to the end of its phase). Per file and
condition: runs, how many pass the trend test (as stored) and the equivalence rule, and the curve that fails most
often. VR r1 is not in the stored curves, so it is not tested here (a new run's history holds it, and
``momentsearch experiment --convergence equivalence`` tests it). Writes
``benchmarks/results/equivalence_status.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
from _common import report, stored_flatness  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--window", type=int, default=20)
    ap.add_argument("--tolerance", type=float, default=0.1)
    args = ap.parse_args()
    rows = []
    for path in sorted((ROOT / "benchmarks" / "results").glob("convergence_*.json")):
        d = json.loads(path.read_text())
        by: dict[str, list[dict]] = {}
        for r in d.get("runs", []):
            if isinstance(r.get("curves"), dict):
                by.setdefault(r["condition"], []).append(r)
        for cond, runs in by.items():
            fails: Counter[str] = Counter()
            trend_ok = equiv_ok = 0
            for r in runs:
                flat = stored_flatness(r, args.window, args.tolerance)
                ok = bool(flat) and all(f.converged for f in flat.values())
                equiv_ok += ok
                trend_ok += bool(r.get("converged"))
                fails.update(k for k, f in flat.items() if not f.converged)
            rows.append({"file": path.stem.removeprefix("convergence_"), "condition": cond, "runs": len(runs),
                         "epochs": "/".join(sorted({str(r["epochs"]) for r in runs})),
                         "trend test": trend_ok, "equivalence": equiv_ok,
                         "fails most on": ", ".join(f"{k} ({n})" for k, n in fails.most_common(2)) or "-"})
    name = "equivalence_status" + ("" if args.window == 20 else f"_w{args.window}")
    report(name, rows, f"python benchmarks/equivalence_status.py --window {args.window} "
           f"--tolerance {args.tolerance}", extra={"window": args.window, "tolerance_points_per_epoch": args.tolerance})


if __name__ == "__main__":
    main()
