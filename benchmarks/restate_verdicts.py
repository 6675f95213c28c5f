"""The earlier verdicts under the rule of issue 42, from the per-seed results already stored (no training).

Every ``benchmarks/results/convergence_<name>.json`` keeps each run's test metrics and validation curves
and each ``--versus`` comparison's per-seed differences. For the verdicts that were never re-run with
5 seeds, this script recomputes what the rule of ``experiments/stats.py`` says of the same seeds: the
paired mean, its sd, the 95 % t interval and the verdict, and how many of the runs pass the trend test
(the 10-epoch slope of validation VR r10 and VCMR 0.5-r10 not significantly positive; MINUTE's VR over
its retriever phase). For MVMR's "existing models degrade", the difference is within a run (NLVL
0.5-r1 minus MVMR 0.5-r1 of the same model and seed), paired by seed like the others.

    python benchmarks/restate_verdicts.py       # prints the table, writes benchmarks/results/restated_verdicts.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from convergence import trends  # noqa: E402
from momentsearch.experiments.stats import paired  # noqa: E402
from momentsearch.fileio import write_json  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"

# (claim "A beats B", convergence JSON, A, B, metric): A and B are conditions of that JSON, paired by seed; B None:
# within A's runs, the metric "m1 − m2" of the same run.
PR, PR_JSON = "+PR (paper's weights, 160 epochs)", "pr_recipe_ablations"
CLAIMS = [
    ("MINUTE's MCM helps (MINUTE − w/o MCM)", "minute_mcm_converge", "MINUTE", "MINUTE w/o MCM", "VCMR 0.5-r1"),
    ("MCM helps beyond its rescaling (MINUTE − scale-matched)", "minute_mcm_converge", "MINUTE",
     "MINUTE w/o MCM, scale-matched", "VCMR 0.5-r1"),
    *[(f"{m} degrades in MVMR (NLVL − MVMR, same run)", "mvmr_table1_converge", m, None,
       "NLVL 0.5-r1 − MVMR 0.5-r1") for m in ("MMN", "RMMN† (true negatives)", "XML", "MINUTE", "CET", "BET")],
    ("reliable negatives, every related video removed, recover MVMR (RMMN† − MMN)", "mvmr_table1_converge", "RMMN† (true negatives)", "MMN",
     "MVMR 0.5-r1"),
    *[(f"XML's top 5 videos in front help {m} (top 5 − whole pool, same run)", "mvmr_table1_converge", m, None,
       "top5 MVMR 0.5-r1 − MVMR 0.5-r1") for m in ("MMN", "RMMN† (true negatives)", "CET", "BET", "MINUTE")],
    ("CM-ANS helps (CM-ANS − as many epochs at lr x 0.1)", "rmmn_finetune", "RMMN (fine-tuned with CM-ANS)",
     "RMMN† +12 epochs at lr x 0.1", "MVMR 0.5-r1"),
    ("C == 1 is worse (C = Psi − C = 1)", PR_JSON, PR, "+PR C=1 (160 epochs)", "VCMR 0.5-r1"),
    ("the pair ranking terms help (+PR − NLL_2 only)", PR_JSON, PR, "+PR NLL_2 only (160 epochs)", "VCMR 0.5-r1"),
    ("L_nll,2 helps (+PR − ranking only)", PR_JSON, PR, "+PR ranking only (160 epochs)", "VCMR 0.5-r10"),
    ("Phi_np-vp beats Phi_vp", PR_JSON, PR, "+PR Phi_vp 0.7 (160 epochs)", "VCMR 0.5-r1"),
    ("Phi_np-vp beats Phi_sent", PR_JSON, PR, "+PR Phi_sent 0.7 (160 epochs)", "VCMR 0.5-r1"),
    ("+SL+PR helps (clipped at 5, against XML)", "pr_recipe", "+SL+PR (clamp, clipped at 5, 80 epochs)", "XML",
     "VCMR 0.5-r1"),
    ("+SL+PR helps at lambda_tl 1 (against XML at lambda_tl 1)", "pr_recipe",
     "+SL+PR (clamp, clipped at 5, lambda_tl 1, 80 epochs)", "XML, lambda_tl 1 (the diagnosis' control)",
     "VCMR 0.5-r1"),
]


def converged(run: dict) -> bool:
    """convergence.py's trend test on a stored run's curves (MINUTE's VR up to the end of its retriever phase)."""
    curves = run["curves"]
    return all(t.converged for t in trends(curves, run.get("vr_phase_end") or len(curves["VR r10"])))


def restate(name: str, a: str, b: str | None, metric: str) -> dict:
    runs = json.loads((RESULTS / f"convergence_{name}.json").read_text())["runs"]

    def of(cond: str) -> dict[int, dict]:
        return {r["seed"]: r for r in runs if r["condition"] == cond}

    ra = of(a)
    if not ra:
        raise SystemExit(f"convergence_{name}.json has no runs of {a!r}")
    if b is None:
        m1, m2 = (m.strip() for m in metric.split("−"))
        seeds = sorted(ra)
        p = paired([ra[s]["test"][m1] for s in seeds], [ra[s]["test"][m2] for s in seeds])
        mine = list(ra.values())
    else:
        rb = of(b)
        seeds = sorted(set(ra) & set(rb))
        p = paired([ra[s]["test"][metric] for s in seeds], [rb[s]["test"][metric] for s in seeds])
        mine = [ra[s] for s in seeds] + [rb[s] for s in seeds]
    return {**p.as_dict(), "seeds": seeds, "converged": sum(converged(r) for r in mine), "runs": len(mine)}


def main() -> None:
    out = []
    print("| claim | json | metric | seeds | mean ± sd [95 % t interval] | verdict | converged (trend) |")
    print("|---|---|---|---:|---|---|---:|")
    for claim, name, a, b, metric in CLAIMS:
        r = {"claim": claim, "json": f"convergence_{name}.json", "A": a, "B": b, "metric": metric,
             **restate(name, a, b, metric)}
        out.append(r)
        print(f"| {claim} | {r['json']} | {metric} | {r['n']} | {r['mean']:+.2f} ± {r['std']:.2f} "
              f"[{r['low']:+.2f}, {r['high']:+.2f}] | {r['verdict']} | {r['converged']} of {r['runs']} |")
    write_json(RESULTS / "restated_verdicts.json", {"rule": "experiments/stats.py: paired t, 95 %", "claims": out})


if __name__ == "__main__":
    main()
