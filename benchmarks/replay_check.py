"""Are the runs on disk the runs a stored convergence table was read from? A check after retraining lost runs.

`runs/` is not tracked: when a checkout starts without it, an experiment trains its runs again from scratch. The
trainer is deterministic for a given thread count and CPU, so a run trained again should repeat the lost one
epoch for epoch, and a reading stored from the lost runs (``benchmarks/results/convergence_*.json``) should stay
the reading of the new ones. This script checks that, for every (condition, seed) of the experiment whose first
run folder is on disk (finished or still training):

* its validation curves (VR r10, VCMR 0.5-r10, VCMR 0.5-r1, every epoch so far) against the stored row's curves,
  over the epochs both hold: "identical over N epochs", or the first epoch where they differ;
* once the run has finished at the stored row's epoch count, its test numbers against the stored ones.

    python benchmarks/replay_check.py configs/experiments/minute_draw2.yaml \
        --stored benchmarks/results/convergence_minute_draw2_draw2_recipe.json

Exit status 1 when any run differs, 0 when every run on disk repeats the stored one so far. Trains nothing.
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

from convergence import CURVES, read_stored, run_metrics, stored_rows  # noqa: E402
from momentsearch.config import load_yaml_config  # noqa: E402
from momentsearch.errors import ConfigError  # noqa: E402
from momentsearch.experiments import ExperimentConfig, prepare, run_config, runs_folder  # noqa: E402
from momentsearch.experiments.continuation import read_history  # noqa: E402


def compare_curves(history: list[dict[str, Any]], stored: dict[str, list[float]]) -> tuple[int, str | None]:
    """(epochs compared, None when identical over them, else where the first difference is) for a run's history
    against a stored row's curves ("VR r10", ...); a curve the stored row lacks is not compared."""
    held = [len(stored[f"{t} {k}"]) for t, k in CURVES if isinstance(stored.get(f"{t} {k}"), list)]
    n = min([len(history)] + held) if held else 0  # a row with none of the curves compares nothing
    for e in range(n):
        for t, k in CURVES:
            want = stored.get(f"{t} {k}")
            if isinstance(want, list) and float(history[e]["val"][t][k]) != float(want[e]):
                return n, f"epoch {e + 1}: {t} {k} {history[e]['val'][t][k]} now, {want[e]} stored"
    return n, None


def compare_test(now: dict[str, float], stored: dict[str, float]) -> list[str]:
    """The test metrics that differ between a finished run's (convergence.run_metrics of its result.json) and a
    stored row's "test"; a metric only one of them holds is not compared."""
    return [f"{k} {now[k]} now, {v} stored" for k, v in stored.items() if k in now and float(now[k]) != float(v)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("experiment", type=Path)
    ap.add_argument("--stored", type=Path, required=True, help="a convergence JSON of this experiment "
                    "(benchmarks/convergence.py wrote it)")
    args = ap.parse_args()
    exp = load_yaml_config(ExperimentConfig, args.experiment)
    stored = read_stored(args.stored, exp.name)
    bench, tables = prepare(exp)
    runs_dir = runs_folder(exp, bench)
    differ = checked = 0
    print("| condition | seed | epochs on disk | stored epochs | curves | test |\n|---|---:|---:|---:|---|---|")
    for cond in exp.conditions:
        rows = stored_rows(stored, args.stored, cond, list(exp.seeds))  # checked as convergence.py's --stored
        for row in rows or []:
            seed = row["seed"]
            run = Path(run_config(exp, cond, seed, bench, tables, runs_dir)["out_dir"])
            if not (run / "history.json").exists():
                continue
            try:
                history = read_history(run / "history.json")
            except ConfigError as e:
                sys.exit(f"error: {e}")
            n, where = compare_curves(history, row["curves"])
            test = "—"
            if (run / "result.json").exists() and len(history) == row["epochs"]:
                wrong = compare_test(run_metrics(json.loads((run / "result.json").read_text())), row["test"])
                test = "identical" if not wrong else f"{len(wrong)} differ, e.g. {wrong[0]}"
                differ += bool(wrong)
            differ += where is not None or n == 0
            checked += 1
            curves = ("no stored curves to compare" if n == 0 else
                      f"identical over {n} epochs" if where is None else where)
            print(f"| {cond} | {seed} | {len(history)} | {row['epochs']} | {curves} | {test} |")
    print(f"\n{checked} run(s) on disk checked against {args.stored}; {differ} difference(s)")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
