"""A verdict's interval over seeds **and** test queries (issue 75 part 4), from the runs' own checkpoints.

    python benchmarks/per_query_verdict.py configs/experiments/exclusion.yaml \
        --versus "+PR (np-vp 0.7, table)=+PR (np-vp 0.7, batch)" [--metric "VCMR 0.5-r1"] [--tag exclusion]

For every (condition, seed) of the experiment, each test query's result: the run's ``eval_test/per_query.json``
(every evaluation writes it since issue 75: per query, 100 x hit at rank 1 and 10 for VCMR at tIoU 0.5 and 0.7 and
for VR), or, for a run evaluated before, its ``best.pt`` ranks the test split again (cached beside the run as
``per_query_test.json``); an ``MVMR ...`` metric (e.g. ``--metric "MVMR 0.5-r1"``, in an experiment with an
``mvmr:`` section) reads ``eval_mvmr/per_query.json`` the same way, over the pooled queries. Each ``--versus A=B`` is then
stated twice on each metric: the paired t interval over seeds (what every verdict states: it covers training
seeds on one benchmark draw, the test queries fixed) and the two-level bootstrap (``experiments.stats.
two_level_bootstrap``: seeds and test queries resampled together, 10,000 times). Writes
``benchmarks/results/per_query_<experiment>[_<tag>].json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).parent))

from _common import add_continuation_flags, chain_end, command_line, continuation_of  # noqa: E402
from convergence import parse_versus  # noqa: E402  (a condition's name may hold '=')
from momentsearch.config import load_yaml_config  # noqa: E402
from momentsearch.experiments import ExperimentConfig, prepare, run_config, runs_folder  # noqa: E402
from momentsearch.experiments.stats import paired, two_level_bootstrap  # noqa: E402
from momentsearch.fileio import write_json  # noqa: E402

METRICS = ("VCMR 0.5-r1", "VCMR 0.5-r10", "VCMR 0.7-r1", "VR r1", "VR r10")


def per_query(run: Path) -> dict[str, dict[str, float]]:
    """Query id -> {metric: 100 x hit} on the test split: the run's own ``eval_test/per_query.json`` (every
    evaluation writes it since issue 75), else its best checkpoint ranks the split again (cached beside the run)."""
    for cache in (run / "eval_test" / "per_query.json", run / "per_query_test.json"):
        if cache.is_file():
            return json.loads(cache.read_text())
    import momentsearch
    from momentsearch.data.dataset import open_dataset
    from momentsearch.evaluation.recall import per_query_hits
    from momentsearch.serving.checkpoint import load_checkpoint
    from momentsearch.training.checkpoint import require_train_config

    ckpt = run / "checkpoints" / "best.pt"
    ev = momentsearch.evaluate(ckpt, "test", progress=False)
    corpus = open_dataset(require_train_config(load_checkpoint(ckpt)).dataset).split("test")
    out = per_query_hits(ev.ranked, corpus)
    write_json(run / "per_query_test.json", out)
    return out


def per_query_mvmr(run: Path, pools: Path) -> dict[str, dict[str, float]]:
    """Pooled query id -> {"MVMR 0.5-r1": 100 x hit, ...} under the experiment's MVMR pools: the run's own
    ``eval_mvmr/per_query.json`` (every MVMR evaluation writes it since issue 75), else its best checkpoint is
    scored under the protocol again into ``eval_mvmr_per_query/`` beside the run (the stored evaluation is left
    as it is)."""
    for folder in ("eval_mvmr", "eval_mvmr_per_query"):
        if (run / folder / "per_query.json").is_file():
            return json.loads((run / folder / "per_query.json").read_text())
    import momentsearch

    momentsearch.evaluate_mvmr(run / "checkpoints" / "best.pt", pools, "test", run / "eval_mvmr_per_query",
                               progress=False)
    return json.loads((run / "eval_mvmr_per_query" / "per_query.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("experiment", type=Path)
    ap.add_argument("--versus", action="append", required=True, help="A=B: A - B paired by seed and query")
    ap.add_argument("--metric", action="append", default=[])
    ap.add_argument("--tag", default="")
    add_continuation_flags(ap)
    args = ap.parse_args()
    cont = continuation_of(args)
    exp = load_yaml_config(ExperimentConfig, args.experiment)
    bench, tables = prepare(exp)
    runs_dir = runs_folder(exp, bench)
    metrics = args.metric or list(METRICS)
    cache: dict[tuple[str, int], dict[str, dict[str, float]]] = {}
    mvmr = any(m.startswith("MVMR") for m in metrics)
    if mvmr and "mvmr pools" not in tables:
        sys.exit(f"error: {exp.name} has no mvmr: section, so no MVMR metric to resample")

    def results(cond: str, seed: int) -> dict[str, dict[str, float]]:
        if (cond, seed) not in cache:
            d = run_config(exp, cond, seed, bench, tables, runs_dir)
            if cont is not None:  # the last run of its chain of continuations, as convergence.py reads it
                d = chain_end(d, cont, f"{cond} seed {seed}", args.experiment, args)
            run = Path(d["out_dir"])
            if not (run / "result.json").exists():
                sys.exit(f"error: {cond} seed {seed} has not finished ({run})")
            cache[(cond, seed)] = per_query(run)
            if mvmr:  # the pooled queries are a subset of the split's
                for q, hits in per_query_mvmr(run, tables["mvmr pools"]).items():
                    cache[(cond, seed)].setdefault(q, {}).update(hits)
        return cache[(cond, seed)]

    rows = []
    for vs in args.versus:
        a_name, b_name = parse_versus(vs, list(exp.conditions))
        for m in metrics:
            a = [results(a_name, s) for s in exp.seeds]
            b = [results(b_name, s) for s in exp.seeds]
            qids = sorted(set.intersection(*({q for q, h in x.items() if m in h} for x in a + b)))
            aa = np.array([[x[q][m] for q in qids] for x in a])
            bb = np.array([[x[q][m] for q in qids] for x in b])
            t = paired(aa.mean(1).tolist(), bb.mean(1).tolist())
            boot = two_level_bootstrap(aa, bb)
            rows.append({"A - B": vs, "metric": m, "seeds": len(exp.seeds), "test queries": len(qids),
                         "mean": round(t.mean, 2), "t interval (seeds)": f"[{t.low:+.2f}, {t.high:+.2f}]",
                         "t verdict": t.verdict, "bootstrap (seeds x queries)": f"[{boot.low:+.2f}, {boot.high:+.2f}]",
                         "bootstrap verdict": boot.verdict, "t": [t.low, t.high], "boot": [boot.low, boot.high]})
            print(f"{vs:<70} {m:<14} {t.mean:+7.2f}  t [{t.low:+.2f}, {t.high:+.2f}] {t.verdict:<12} "
                  f"bootstrap [{boot.low:+.2f}, {boot.high:+.2f}] {boot.verdict}", flush=True)
    name = f"per_query_{exp.name}" + (f"_{args.tag}" if args.tag else "")
    write_json(ROOT / "benchmarks" / "results" / f"{name}.json",
               {"experiment": exp.name, "command": command_line(),
                "rows": rows}, indent=1)


if __name__ == "__main__":
    main()
