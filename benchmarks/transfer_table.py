"""Which verdicts transfer from templated to real captions (issue 43 item 5; issue 75 part 5): each claim paired by
seed on the synthetic `converge` preset (configs/experiments/synthetic_claims.yaml), on the real-caption `charades`
preset (charades_claims.yaml: one random picture per action class) and on `charades_vo` (charades_vo_claims.yaml:
pictures built from each class's verb and object), the same conditions, budget (40 epochs) and seeds; and
`charades_vo` once more with every run continued by the equivalence rule (20 epochs a step, cap 80: the
``--tag converged`` JSON); and `charades_vo`'s 40 epochs trained again from scratch on a machine whose floats differ
(the ``--tag replay40`` JSON: a second realisation of the same seeds, docs/charades_vo.md), and those runs
continued by the same rule to the same cap of 80 (``--tag replay80``) and on to caps of 160 and 240 (``--tag
converged160``, ``--tag converged240``: the table read at convergence where the cap of 80 left 20 of 30 runs still
rising, and 160 left 8).

For every claim "A beats B" and metric: the mean of the per-seed differences A - B on the test split, their sd,
the 95 % t interval and the verdict of ``experiments/stats.py`` (borne out / refuted only when the interval
excludes 0), over the seeds both arms ran, and how many of A's and B's runs pass the trend test and the
equivalence rule over 20 epochs. It reads the runs' test numbers and validation curves that
benchmarks/convergence.py stored (``benchmarks/results/convergence_<experiment>.json``), so it needs no run folder.
Then, where the same experiment and budget was trained twice (stored, and trained again where the floats differ), how
far each A − B moved from the first realisation to the second: the per-seed differences' shift paired by seed, with
its 95 % t interval. Prints the Markdown tables and writes benchmarks/results/transfer_table.json.

    momentsearch experiment configs/experiments/charades_vo_claims.yaml --jobs 2     # and the other two
    python benchmarks/convergence.py configs/experiments/charades_vo_claims.yaml       # and the other two
    momentsearch experiment configs/experiments/charades_vo_claims.yaml --jobs 2 --continue-rising 20 \
        --max-epochs 80 --convergence equivalence --trend-window 20
    python benchmarks/convergence.py configs/experiments/charades_vo_claims.yaml --continue-rising 20 \
        --max-epochs 80 --convergence equivalence --trend-window 20 --tag converged
    python benchmarks/convergence.py configs/experiments/charades_vo_claims.yaml --tag replay40   # the runs' first 40
    python benchmarks/convergence.py configs/experiments/charades_vo_claims.yaml --continue-rising 20 \
        --max-epochs 80 --convergence equivalence --trend-window 20 --tag replay80   # the same runs to the cap of 80
    momentsearch experiment configs/experiments/charades_vo_claims.yaml --jobs 2 --continue-rising 20 \
        --max-epochs 160 --convergence equivalence --trend-window 20
    python benchmarks/convergence.py configs/experiments/charades_vo_claims.yaml --continue-rising 20 \
        --max-epochs 160 --convergence equivalence --trend-window 20 --tag converged160
    (the same two commands with --max-epochs 240 and --tag converged240)
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

from _common import interval, stored_flatness  # noqa: E402
from momentsearch.experiments.stats import paired  # noqa: E402
from momentsearch.fileio import write_json  # noqa: E402

# column -> (experiment, the tag of its convergence JSON: "" for 40 epochs, the cap (--max-epochs) its runs were
# continued to by the equivalence rule: 0 for runs read at their configured budget)
PRESETS = {"synthetic": ("synthetic_claims", "", 0), "real captions": ("charades_claims", "", 0),
           "real captions, related pictures": ("charades_vo_claims", "", 0),
           "related pictures, continued to convergence": ("charades_vo_claims", "converged", 80),
           "related pictures, trained again where the floats differ, 40 epochs": ("charades_vo_claims", "replay40", 0),
           "related pictures, trained again where the floats differ, cap 80": ("charades_vo_claims", "replay80", 80),
           "related pictures, trained again where the floats differ, cap 160": ("charades_vo_claims", "converged160",
                                                                               160),
           "related pictures, trained again where the floats differ, cap 240": ("charades_vo_claims", "converged240",
                                                                               240)}
CONTINUED = "--continue-rising 20 --max-epochs {} --convergence equivalence --trend-window 20"
# (claim, A, B): A and B name a condition of every experiment; "truth" is the synthetic oracle in one and the
# action-class table in the others (an oracle ceiling on real captions: the features are drawn from those labels)
CLAIMS = [
    ("+PR beats XML", "+PR (np-vp 0.7)", "XML"),
    ("C = Psi beats C = 1", "+PR (np-vp 0.7)", "+PR C=1 (np-vp 0.7)"),
    ("the pairs' content matters: +PR beats shuffled partners", "+PR (np-vp 0.7)", "+PR shuffled partners (np-vp 0.7)"),
    ("Wray's T = 0.5 on BoW beats instance-based", "T=0.5 (BoW)", "XML"),
    ("T = 0.5 on the truth beats instance-based", "T=0.5 (truth)", "XML"),
]
ALIASES = {"T=0.5 (truth)": ("T=0.5 (truth)", "T=0.5 (class truth)", "T=0.5 (class truth, oracle ceiling)")}
METRICS = ["VCMR 0.5-r1", "VCMR 0.5-r10", "MP-VCMR 0.5-r1", "nDCG VCMR 0.5", "nDCG VR 2-way"]
# the same experiment and budget trained twice (stored; trained again where the floats differ): the shift of A − B
# from the first realisation to the second, paired by seed (a seed's two runs differ from epoch 1, so the pairing
# is by label; a test of whether the two realisations' effects differ, not of the claim)
REALISATIONS = {"40 epochs": ("real captions, related pictures",
                              "related pictures, trained again where the floats differ, 40 epochs"),
                "cap 80": ("related pictures, continued to convergence",
                           "related pictures, trained again where the floats differ, cap 80")}


def _runs(conv: dict[str, Any], name: str) -> dict[int, dict[str, Any]]:
    """The stored runs of a condition, by seed."""
    names = ALIASES.get(name, (name,))
    return {int(r["seed"]): r for r in conv["runs"] if r["condition"] in names}


def _passing(runs: dict[int, dict[str, Any]], seeds: list[int]) -> tuple[int, int]:
    """Of those seeds' runs: how many pass the trend test (as stored) and the equivalence rule over 20 epochs."""
    trend = equiv = 0
    for s in seeds:
        trend += bool(runs[s].get("converged"))
        flat = stored_flatness(runs[s], 20, 0.1)
        equiv += bool(flat) and all(f.converged for f in flat.values())
    return trend, equiv


def _shift(first: dict[str, Any] | None, second: dict[str, Any] | None) -> dict[str, Any] | None:
    """The second realisation's per-seed A − B minus the first's, over the seeds both hold (None when either is
    missing)."""
    if not first or not second:
        return None
    seeds = [s for s in first["seeds"] if s in second["seeds"]]
    p = paired([second["per_seed"][second["seeds"].index(s)] for s in seeds],
               [first["per_seed"][first["seeds"].index(s)] for s in seeds])
    # no "verdict" key: a shift is not a claim; whether its interval excludes 0 is Paired.verdict's test
    return {"mean": p.mean, "std": p.std, "low": p.low, "high": p.high, "n": p.n, "seeds": seeds,
            "per_seed": list(p.diffs), "excludes 0": p.verdict != "inconclusive"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.parse_args()
    convergence = {}
    for preset, (name, tag, cap) in PRESETS.items():
        path = ROOT / "benchmarks" / "results" / f"convergence_{name}{'_' + tag if tag else ''}.json"
        if not path.is_file():
            more = " " + CONTINUED.format(cap) if cap else ""
            sys.exit(f"{path}: not found; run `momentsearch experiment configs/experiments/{name}.yaml --jobs 2{more}`, "
                     f"then `python benchmarks/convergence.py configs/experiments/{name}.yaml{more}"
                     f"{' --tag ' + tag if tag else ''}`")
        convergence[preset] = json.loads(path.read_text())
    rows: list[dict[str, Any]] = []
    for claim, a, b in CLAIMS:
        for metric in METRICS:
            row: dict[str, Any] = {"claim": claim, "metric": metric}
            for preset, conv in convergence.items():
                ra, rb = _runs(conv, a), _runs(conv, b)
                seeds = sorted(set(ra) & set(rb))
                if not seeds or any(metric not in ra[s]["test"] or metric not in rb[s]["test"] for s in seeds):
                    row[preset] = None
                    continue
                p = paired([ra[s]["test"][metric] for s in seeds], [rb[s]["test"][metric] for s in seeds])
                (ta, ea), (tb, eb) = _passing(ra, seeds), _passing(rb, seeds)
                row[preset] = {**p.as_dict(), "seeds": seeds, "cell": p.cell(),
                               "trend test": f"{ta}/{len(seeds)}, {tb}/{len(seeds)}",
                               "equivalence 20": f"{ea}/{len(seeds)}, {eb}/{len(seeds)}"}
            row["realisations"] = {k: _shift(row[first], row[second]) for k, (first, second) in REALISATIONS.items()}
            rows.append(row)
    print("| claim | metric | " + " | ".join(f"{p}: A − B [95 % t interval] | verdict" for p in PRESETS) + " |")
    print("|---|---|" + "---:|---|" * len(PRESETS))
    for r in rows:
        cells = [f"{interval(r[p])} (n={r[p]['n']}) | {r[p]['verdict']}" if r[p] else "not run | " for p in PRESETS]
        print(f"| {r['claim']} | {r['metric']} | " + " | ".join(cells) + " |")
    print("\nruns passing (A's, B's) the trend test / the equivalence rule over 20 epochs:")
    for claim, a, b in CLAIMS:
        r = next(x for x in rows if x["claim"] == claim)
        print(f"- {claim}: " + "; ".join(f"{p} {r[p]['trend test']} / {r[p]['equivalence 20']}"
                                         for p in PRESETS if r[p]))
    print("\nthe second realisation's A − B minus the first's, paired by seed [95 % t interval]:\n\n| claim | metric | "
          + " | ".join(REALISATIONS) + " |\n|---|---|" + "---:|" * len(REALISATIONS))
    for r in rows:
        cells = [f"{interval(x)}{' differ' if x['excludes 0'] else ''}" if (x := r["realisations"][k]) else "not run"
                 for k in REALISATIONS]
        print(f"| {r['claim']} | {r['metric']} | " + " | ".join(cells) + " |")
    shifts = [x for r in rows for x in r["realisations"].values() if x]
    print(f"\n{sum(x['excludes 0'] for x in shifts)} of {len(shifts)} shifts exclude 0")
    out = ROOT / "benchmarks" / "results" / "transfer_table.json"
    write_json(out, {"command": "python benchmarks/transfer_table.py",
                     "experiments": {p: {"experiment": n, "tag": tag} for p, (n, tag, _) in PRESETS.items()},
                     "rows": rows})
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
