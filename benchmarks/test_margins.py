"""The trained-model tests' margins over seeds and thread counts.

Each trained-model test asserts a measured value against a bar through the ``margin`` fixture
(tests/conftest.py). This script runs those tests once per (seed, threads), each in its own pytest
process with MOMENTSEARCH_TEST_SEED / MOMENTSEARCH_TEST_THREADS set and MOMENTSEARCH_MARGINS pointing
at a JSON-lines file, then prints, per check, the bar and the smallest and largest value measured, and
writes benchmarks/results/test_margins.json. A test already measured at a (seed, threads) is not run
again there, so an interrupted run resumes and a test added to TESTS is measured alone.

    python benchmarks/test_margins.py [--seeds 0,1,2] [--threads 1,2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TESTS = [
    "tests/test_contract.py::test_a_second_family_runs_end_to_end_on_the_shared_trainer_and_engine",
    "tests/test_minute.py::test_minute_trains_in_two_phases_resumes_and_searches",
    "tests/test_mvmr_models.py::test_mmn_trains_and_localizes_above_chance",
    "tests/test_xml_training.py::test_trained_xml_beats_random",
    "tests/test_rendered.py::test_rendered_tiny_benchmark_trains_and_searches_on_pixels",
    "tests/test_mvmr_models.py::test_span_baselines_train_evaluate_and_search",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results" / "test_margins.json")
    args = ap.parse_args()
    lines = args.out.with_suffix(".jsonl")
    lines.parent.mkdir(parents=True, exist_ok=True)
    done = {(r["test"], r["seed"], r["threads"]) for r in _read(lines)}
    runs = []
    for threads in (int(t) for t in args.threads.split(",")):
        for seed in (int(s) for s in args.seeds.split(",")):
            # a test (any of its parametrizations) already measured at this (seed, threads) is not run again
            tests = [t for t in TESTS if not any(d[0].startswith(t) and d[1:] == (seed, threads) for d in done)]
            if not tests:
                print(f"seed {seed}, {threads} thread(s): already measured", flush=True)
                continue
            env = {**os.environ, "MOMENTSEARCH_TEST_SEED": str(seed), "MOMENTSEARCH_TEST_THREADS": str(threads),
                   "MOMENTSEARCH_MARGINS": str(lines), "OMP_NUM_THREADS": str(threads)}
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
                                  cwd=REPO, env=env, capture_output=True, text=True)
            tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-300:]
            runs.append({"seed": seed, "threads": threads, "tests": len(tests), "rc": proc.returncode,
                         "seconds": round(time.perf_counter() - t, 1), "summary": tail})
            print(f"seed {seed}, {threads} thread(s): {tail} ({runs[-1]['seconds']} s)", flush=True)
    rows: dict[tuple[str, str], dict] = {}
    for r in _read(lines):
        key = (r["test"].split("::")[-1], r["check"])
        row = rows.setdefault(key, {"test": key[0], "check": key[1], "bar": r["bar"], "values": []})
        row["values"].append({"seed": r["seed"], "threads": r["threads"], "measured": round(r["measured"], 2)})
    table = []
    for row in rows.values():
        vals = [v["measured"] for v in row["values"]]
        table.append({**row, "min": min(vals), "max": max(vals), "min_margin": round(min(vals) - row["bar"], 2),
                      "n": len(vals)})
    print("\n| test | check | bar | min | max | min - bar | runs |\n|---|---|---:|---:|---:|---:|---:|")
    for r in table:
        print(f"| {r['test']} | {r['check']} | {r['bar']:g} | {r['min']:.2f} | {r['max']:.2f} | "
              f"{r['min_margin']:+.2f} | {r['n']} |")
    tmp = args.out.with_suffix(".tmp")
    earlier = json.loads(args.out.read_text())["runs"] if args.out.exists() else []  # pytest runs before this one
    tmp.write_text(json.dumps({"checks": table, "runs": earlier + runs}, indent=2))
    tmp.replace(args.out)


def _read(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


if __name__ == "__main__":
    main()
