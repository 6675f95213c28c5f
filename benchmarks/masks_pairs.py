"""Does MINUTE train as well with hashed dropout masks and 4 length passes? ``minute_mcm_converge`` ran twice on the
converge preset: its first start with torch's masks and one pass a batch (the config before 2026-12-03), and its
restart with hashed masks and 4 passes. This pairs the two starts' 60-epoch runs by (condition, seed) and gives the
fast path minus the first start with the 95 % t interval over the pairs (what it covers: those conditions and seeds on
one benchmark draw; the runs are not converged at 60 epochs, see docs/research.md). VR is paired once a seed: the
three conditions share a seed's retriever phase (MCM acts in the localizer).

    python benchmarks/masks_pairs.py [--json benchmarks/results/masks_pairs.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import report  # noqa: E402
from momentsearch.config import load_yaml_config  # noqa: E402
from momentsearch.experiments.runner import ExperimentConfig, run_config  # noqa: E402
from momentsearch.experiments.stats import paired  # noqa: E402

EXPERIMENT = "configs/experiments/minute_mcm_converge.yaml"
# the first start's conditions: torch's masks (the default) and one pass a batch
FIRST = {"MINUTE": {"model": {"length_passes": 1}},
         "MINUTE w/o MCM": {"model": {"use_mcm": False, "length_passes": 1}},
         "MINUTE w/o MCM, scale-matched": {"model": {"use_mcm": False, "mcm_scale_control": True, "length_passes": 1}}}
METRICS = ("VCMR 0.5-r1", "VCMR 0.5-r10", "VR r1", "VR r10")


def result(exp: ExperimentConfig, condition: str, seed: int) -> dict[str, float] | None:
    bench = Path("runs/experiments/benchmarks/converge").resolve()
    d = run_config(exp, condition, seed, bench, {}, Path("runs/experiments/runs/converge"))
    path = Path(d["out_dir"]) / "result.json"
    return json.loads(path.read_text())["metrics"] if path.exists() else None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    fast = load_yaml_config(ExperimentConfig, EXPERIMENT)
    first = ExperimentConfig(**{**fast.__dict__, "conditions": FIRST})
    pairs = []
    for condition in FIRST:
        for seed in fast.seeds:
            a, b = result(fast, condition, seed), result(first, condition, seed)
            if a is not None and b is not None:
                pairs.append((condition, seed, a, b))
    if len(pairs) < 2:
        sys.exit(f"{len(pairs)} (condition, seed) pair(s) with both starts at 60 epochs: need 2 or more")
    rows = []
    for m in METRICS:
        use = pairs
        if m.startswith("VR"):  # the three conditions share the retriever phase of a seed: one pair a seed
            use = list({s: (c, s, a, b) for c, s, a, b in pairs}.values())
        if len(use) < 2:
            continue
        p = paired([a[m] for *_, a, _ in use], [b[m] for *_, b in use])
        rows.append({"metric": m, "pairs": p.n, "hashed, 4 passes - torch, 1 pass": p.cell(), "verdict": p.verdict})
    report("masks_pairs", rows, " ".join(sys.argv), args.json,
           {"pairs": [{"condition": c, "seed": s, "fast": {m: a[m] for m in METRICS},
                       "first": {m: b[m] for m in METRICS}} for c, s, a, b in pairs]})


if __name__ == "__main__":
    main()
