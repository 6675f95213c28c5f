"""A − B paired by seed where A and B are conditions of two experiments, read from their stored convergence JSONs.

``benchmarks/convergence.py --versus`` pairs conditions of one experiment. A control added later as its own
experiment (on the same preset, with the same seeds) is paired with a condition of the first one here, from the
rows both JSONs keep: each seed's test numbers. The 95 % t interval and verdict are ``experiments.stats.paired``'s,
as everywhere else; the interval covers training seeds, the test queries fixed.

    python benchmarks/paired_stored.py \
        --a benchmarks/results/convergence_minute_retriever_draw2_draw2.json "MINUTE, retriever 80" \
        --b benchmarks/results/convergence_minute_draw2_draw2_recipe.json MINUTE \
        --metric "VR r10" --metric "VCMR 0.5-r1" --out benchmarks/results/paired_minute_retriever80_vs_40.json
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import command_line  # noqa: E402
from convergence import read_stored  # noqa: E402
from momentsearch.experiments.stats import paired  # noqa: E402
from momentsearch.fileio import write_json  # noqa: E402
from momentsearch.readers import is_finite_number  # noqa: E402


def seed_rows(path: Path, condition: str, flag: str) -> dict[int, dict[str, Any]]:
    """{seed: test numbers} of ``condition`` in a convergence JSON (read by convergence.read_stored); exits naming the
    file and ``flag`` when it has no run of the condition, or one whose seed or test numbers are malformed."""
    out: dict[int, dict[str, Any]] = {}
    for r in read_stored(path, flag=flag):
        if r.get("condition") != condition:
            continue
        seed, test = r.get("seed"), r.get("test")
        if not isinstance(seed, int) or isinstance(seed, bool) or not isinstance(test, dict):
            sys.exit(f"error: {flag} {path}: a run of {condition!r} has seed {seed!r} and test of type "
                     f"{type(test).__name__} (an integer seed and a mapping of test numbers expected)")
        if seed in out:
            sys.exit(f"error: {flag} {path} holds {condition!r} seed {seed} twice")
        out[seed] = test
    if not out:
        sys.exit(f"error: {flag} {path} holds no run of condition {condition!r}")
    return out


def compare(a: dict[int, dict[str, Any]], b: dict[int, dict[str, Any]], metrics: list[str]) -> list[dict[str, Any]]:
    """A − B per metric over the seeds both hold, each with its per-seed differences (seed order)."""
    seeds = sorted(set(a) & set(b))
    rows = []
    for m in metrics:
        if not all(is_finite_number(a[s].get(m)) and is_finite_number(b[s].get(m)) for s in seeds):
            sys.exit(f"error: {m!r} is not a number in every run of both conditions")
        p = paired([a[s][m] for s in seeds], [b[s][m] for s in seeds])
        rows.append({"metric": m, "seeds": seeds, **p.as_dict(), "per_seed": [round(x, 2) for x in p.diffs]})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", nargs=2, required=True, metavar=("JSON", "CONDITION"))
    ap.add_argument("--b", nargs=2, required=True, metavar=("JSON", "CONDITION"))
    ap.add_argument("--metric", action="append", required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    a, b = seed_rows(Path(args.a[0]), args.a[1], "--a"), seed_rows(Path(args.b[0]), args.b[1], "--b")
    if len(set(a) & set(b)) < 2:
        sys.exit("error: the two conditions share fewer than 2 seeds")
    rows = compare(a, b, args.metric)
    print(f"| {args.a[1]} − {args.b[1]} | mean | 95 % t interval | verdict | per seed |\n|---|---:|---:|---|---|")
    for r in rows:
        print(f"| {r['metric']} | {r['mean']:+.2f} | [{r['low']:+.2f}, {r['high']:+.2f}] | {r['verdict']} | "
              f"{', '.join(f'{x:+.2f}' for x in r['per_seed'])} |")
    write_json(args.out, {"a": args.a, "b": args.b, "command": command_line(), "rows": rows})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
