"""``momentsearch experiment CONFIG``: train a list of conditions over several seeds, one table.

An experiment YAML (``configs/experiments/``) names a synthetic preset, a base training config,
the relevance tables the conditions need (computed once per benchmark), the seeds, and the
conditions — each a set of overrides of the base config (or, with ``train:``, of another base
config: another model family). Every (condition, seed) run trains,
evaluates its best checkpoint on the test split and writes ``result.json``; a run whose result
exists is not redone, so an interrupted experiment resumes where it stopped (and a run stopped
mid-training resumes from its ``last.pt``). The results are aggregated into ``results.json``,
``results.md`` (mean +- std over seeds) and ``results.png``. With a ``Continuation`` a run still rising by
the trend test is continued and the last run of its chain is the one reported (``experiments.continuation``).
"""

from __future__ import annotations

import copy
import json
import os
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Any

from momentsearch.config import from_dict, load_yaml_config, merge, read_yaml, resolve_config, to_dict
from momentsearch.console import say
from momentsearch.errors import ConfigError
from momentsearch.experiments.continuation import Continuation, continue_shorter_run, next_run
from momentsearch.experiments.digest import run_digest
from momentsearch.experiments.inputs import check_inputs
from momentsearch.experiments.proxy_scores import stored_once, with_proxy_ndcg
from momentsearch.experiments.tables import TABLE_KINDS, TableSpec, table_files
from momentsearch.fileio import write_json
from momentsearch.processes import die_with_parent
from momentsearch.version import source_commit

if TYPE_CHECKING:
    from momentsearch.training.config import TrainConfig


@dataclass(frozen=True)
class MVMRSpec:
    """Also evaluate every run under the MVMR protocol on pools built over the evaluation split
    (``momentsearch build-mvmr`` with these values, text filter only); with ``retriever`` (a condition
    of the experiment) also with each pool cut to the ``top_videos`` videos that condition's model of
    the same seed scores highest (the MVMR paper's Table 2)."""

    n: int = 50
    k: int = 5
    t_pos: float = 0.8
    t_neg: float = 0.5
    seed: int = 0
    retriever: str = ""
    top_videos: int = 5


@dataclass(frozen=True)
class ExperimentConfig:
    name: str
    preset: str  # a synthetic preset name or YAML path
    train: str  # the base training config YAML; a condition may name its own with `train:`
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    tables: dict[str, TableSpec] = field(default_factory=dict)
    conditions: dict[str, dict[str, Any]] = field(default_factory=dict)
    out_dir: str = ""  # results: default runs/experiments/<name>
    benchmark_dir: str = ""  # default runs/experiments/benchmarks/<preset name>
    runs_dir: str = ""  # default runs/experiments/runs/<preset name>: shared by experiments, so that a
    #                     condition two experiments both have (e.g. the XML baseline) is trained once
    eval_split: str = "test"
    mvmr: MVMRSpec | None = None
    score_with: list[str] = field(default_factory=list)  # proxy tables every run is also scored against (nDCG)

    def __post_init__(self) -> None:
        if not self.conditions:
            raise ConfigError(f"experiment {self.name!r}: no conditions")
        if not self.seeds:
            raise ConfigError(f"experiment {self.name!r}: no seeds")
        if self.mvmr is not None and self.mvmr.retriever and self.mvmr.retriever not in self.conditions:
            raise ConfigError(f"experiment {self.name!r}: mvmr.retriever {self.mvmr.retriever!r} is not one of its "
                              f"conditions {list(self.conditions)}")
        for t in self.tables.values():
            if t.kind not in TABLE_KINDS:
                raise ConfigError(f"experiment {self.name!r}: table kind must be one of {TABLE_KINDS}, got {t.kind!r}")
        for name in self.score_with:
            t = self.tables.get(name)
            if t is None or t.kind != "proxy" or t.threshold > 0:
                raise ConfigError(f"experiment {self.name!r}: score_with {name!r} must name one of its proxy tables "
                                  "stored without a threshold (nDCG needs every S > 0)")


def _resolve(p: str) -> Path:
    """A path as given when it exists, else a packaged config of that name (configs/xml/experiment.yaml)."""
    return resolve_config(p)


def benchmark_dir(exp: ExperimentConfig) -> Path:
    """The folder of the experiment's benchmark: its ``benchmark_dir``, else one named by its preset."""
    from momentsearch.data.synthetic import load_preset

    return Path(exp.benchmark_dir) if exp.benchmark_dir else Path("runs/experiments/benchmarks") / load_preset(
        exp.preset).name


def prepare(exp: ExperimentConfig) -> tuple[Path, dict[str, Path]]:
    """Generate the benchmark and compute the relevance tables where missing."""
    from momentsearch.data.synthetic import SyntheticBenchmark, generate, load_preset
    from momentsearch.text.encoders import QueryFeatureCache

    cfg = load_preset(exp.preset)
    bench = benchmark_dir(exp)
    if not (bench / "benchmark.yaml").exists():
        say(f"generating the '{cfg.name}' benchmark into {bench}")
        generate(cfg, bench)
    # every caption encoded once, before any worker starts: workers then only read the cache
    corpus = SyntheticBenchmark.load(bench).corpus
    QueryFeatureCache(bench / "features" / "queries_minilm.h5").ensure([m.text for m in corpus.moments])
    folder = bench / "relevance"
    folder.mkdir(parents=True, exist_ok=True)
    paths = {name: table_files(bench, folder, spec, corpus) for name, spec in exp.tables.items()}
    if exp.mvmr is not None:
        paths["mvmr pools"] = mvmr_pools(bench, exp.mvmr, exp.eval_split)
    return bench, paths


def mvmr_pools(bench: Path, spec: MVMRSpec, split: str) -> Path:
    """The experiment's MVMR pool file over ``split``, built where missing."""
    from momentsearch.api.mvmr_pools import run_build_mvmr
    from momentsearch.relevance.pool_builder import PoolConfig

    name = f"{split}_n{spec.n}_k{spec.k}_{spec.t_pos:g}_{spec.t_neg:g}_s{spec.seed}".replace(".", "p")
    path = bench / "mvmr" / f"pools_{name}.txt"
    if not path.exists():
        say(f"MVMR pools over split {split} of {bench}")
        path.parent.mkdir(parents=True, exist_ok=True)
        run_build_mvmr(bench, path, PoolConfig(spec.n, spec.k, spec.t_pos, spec.t_neg, spec.seed), split,
                       progress=False)
    return path


EVAL_VERSION = 2  # 2: the oracle's every-S nDCG columns ("nDCG VR 2-way", "nDCG VCMR 0.5 S>0"; issue 25)


def run_config(exp: ExperimentConfig, condition: str, seed: int, bench: Path, tables: dict[str, Path],
               runs: Path) -> dict[str, Any]:
    """The training config dict of one run (table names resolved to files). Its folder is named by
    a hash of the resolved config (seed included), so equal conditions of different experiments share one run
    (``train_config.json`` inside says what it is)."""
    from momentsearch.training.config import TrainConfig

    over = copy.deepcopy(exp.conditions[condition] or {})
    train_yaml = over.pop("train", exp.train)  # a condition may start from another family's base config
    base = read_yaml(_resolve(train_yaml))
    base.setdefault("dataset", {"benchmark": str(bench)})
    base = to_dict(from_dict(TrainConfig, base, train_yaml))
    model = over.get("model", {})
    # the options that name one of the experiment's tables: XML's relevance.table, MMN's true_negatives_table
    for group, key in ((model.get("relevance", {}), "table"), (model, "true_negatives_table")):
        if key in group:
            if group[key] not in tables:
                raise ConfigError(f"experiment {exp.name!r}, condition {condition!r}: unknown table {group[key]!r}; "
                                  f"the experiment defines {sorted(tables)}")
            group[key] = str(tables[group[key]])
    parent = over.get("init_from")
    if parent in exp.conditions:  # fine-tuning another condition's model: its run of the same seed
        if (exp.conditions[parent] or {}).get("init_from") in exp.conditions:
            raise ConfigError(f"experiment {exp.name!r}, condition {condition!r}: init_from {parent!r} itself "
                              "starts from another condition; chains are not supported")
        over["init_from"] = str(Path(run_config(exp, parent, seed, bench, tables, runs)["out_dir"]).resolve()
                                / "checkpoints" / "best.pt")
    d = merge(base, over)
    d.update(dataset={"benchmark": str(Path(bench).resolve())}, seed=seed, out_dir="")
    digest = run_digest(d)
    d["out_dir"] = str(runs / digest / f"seed{seed}")
    from_dict(TrainConfig, d, f"{exp.name}/{condition}")  # fail early on a bad override
    return d


def run_one(cfg_dict: dict[str, Any], split: str, pools: str | None = None) -> dict[str, Any]:
    """Train (resuming) and evaluate one run; returns and stores its result row. With ``pools`` (an
    MVMR pool file) its MVMR row joins the metrics (computed once, also for a run stored before)."""
    from momentsearch.training.config import TrainConfig
    from momentsearch.training.lock import run_lock

    cfg = from_dict(TrainConfig, cfg_dict)
    out = Path(cfg.out_dir)
    if (out / "result.json").exists():  # finished: only read (several experiments may read one run at once)
        return _run_one(cfg, cfg_dict, out, split, pools)
    with run_lock(out):  # another command training this run stops here, before it touches the folder
        return _run_one(cfg, cfg_dict, out, split, pools)


def _run_one(cfg: TrainConfig, cfg_dict: dict[str, Any], out: Path, split: str, pools: str | None) -> dict[str, Any]:
    from momentsearch.api import evaluate
    from momentsearch.training.trainer import Trainer

    done = out / "result.json"
    if done.exists():
        check_inputs(out, cfg_dict, record=False)
        return _with_mvmr(_with_new_columns(json.loads(done.read_text()), out, split), out, split, pools)
    earlier = 0.0
    if not (out / "checkpoints" / "last.pt").exists():
        earlier = continue_shorter_run(cfg_dict, out)  # copies the shorter run's inputs.json, checked next
    check_inputs(out, cfg_dict, record=not (out / "checkpoints" / "last.pt").exists())
    t0 = time.time()
    trainer = Trainer(cfg, progress=False)
    trainer.resume()
    history = trainer.fit()
    train_s = earlier + time.time() - t0
    row = evaluate(trainer.ckpt_dir / "best.pt", split, out / f"eval_{split}", progress=False).row
    epoch_s = [h["train_seconds"] for h in history]
    pairs = [h.get("pairs_per_batch", 0.0) for h in history]
    result = {"metrics": row, "seconds_per_epoch": sum(epoch_s) / len(epoch_s), "train_seconds": train_s,
              "pairs_per_batch": sum(pairs) / len(pairs), "best_epoch": (cfg.epochs if cfg.checkpoint == "last" else
                                                  max(history, key=lambda h: h["selection"])["epoch"]),
              "eval_version": EVAL_VERSION, "code": source_commit()}
    write_json(done, result)
    return _with_mvmr(result, out, split, pools)


def _with_new_columns(result: dict[str, Any], out: Path, split: str) -> dict[str, Any]:
    """A run stored before the evaluation gained columns (``EVAL_VERSION``) is evaluated again, once, and
    the new columns join its row; the values it stored stay as they were."""
    if result.get("eval_version", 1) >= EVAL_VERSION:
        return result
    from momentsearch.api import evaluate

    row = evaluate(out / "checkpoints" / "best.pt", split, out / f"eval_{split}", progress=False).row
    result = {**result, "metrics": {**row, **result["metrics"]}, "eval_version": EVAL_VERSION}
    write_json(out / "result.json", result)
    return result


# Stored MVMR rows are keyed by protocol: "mvmr2" is full pools, the authors' NMS for every family and every
# proposal ranked (rows under an older protocol are redone); ":<retriever>:<K>" when a retriever picks K videos.
MVMR_PROTOCOL = "mvmr2"


def mvmr_key(pools: str, retriever: str | None = None, top_videos: int = 5) -> str:
    """The key under which result.json stores a run's MVMR row for ``pools`` (and ``retriever``)."""
    return f"{MVMR_PROTOCOL}:{Path(pools).name}" + (f":{retriever}:{top_videos}" if retriever else "")


def mvmr_metrics(key: str, row: dict[str, Any]) -> dict[str, float]:
    """A stored MVMR row as report metrics ("topK "-prefixed when a retriever was in front); {} for a row
    under an older protocol."""
    protocol, _pools, *retriever = key.split(":", 2)  # a retriever's path may hold ":" itself
    if protocol != MVMR_PROTOCOL:
        return {}
    prefix = f"top{retriever[0].rsplit(':', 1)[1]} " if retriever else ""
    return {prefix + k: float(v) for k, v in row.items() if isinstance(v, (int, float))}


def _with_mvmr(result: dict[str, Any], out: Path, split: str, pools: str | None, retriever: str | None = None,
               top_videos: int = 5) -> dict[str, Any]:
    """``result`` with the run's MVMR row in its metrics (keys "MVMR 0.5-r1", "NLVL 0.5-r1", ...; with a
    ``retriever`` checkpoint "top5 MVMR 0.5-r1", ...), evaluated and stored in result.json where missing."""
    if pools is None:
        return result
    from momentsearch.api import evaluate_mvmr

    key = mvmr_key(pools, retriever, top_videos)
    row = stored_once(out, "mvmr", key, lambda: evaluate_mvmr(
        out / "checkpoints" / "best.pt", pools, split,
        out / (f"eval_mvmr_top{top_videos}_{Path(retriever).parent.parent.parent.name}" if retriever else "eval_mvmr"),
        progress=False, video_retriever=retriever, top_videos=top_videos).row)
    return {**result, "metrics": {**result["metrics"], **mvmr_metrics(key, row)}}


def results_folder(exp: ExperimentConfig) -> Path:
    """Where the experiment's report goes: its ``out_dir``, else one named by the experiment."""
    return Path(exp.out_dir) if exp.out_dir else Path("runs/experiments") / exp.name


def runs_folder(exp: ExperimentConfig, bench: Path) -> Path:
    """Where the experiment's runs live: its ``runs_dir``, else one per benchmark, shared by experiments."""
    return Path(exp.runs_dir) if exp.runs_dir else Path("runs/experiments/runs") / bench.name


def planned_runs(exp: ExperimentConfig, only: list[str] | None, bench: Path, tables: dict[str, Path]
                 ) -> list[tuple[str, int, dict[str, Any]]]:
    """(condition, seed, run config) of every run of ``exp`` (``only``: those conditions; an unknown one is
    refused), seed-major: an interrupted experiment has every condition at its first seeds."""
    unknown = sorted(set(only or []) - set(exp.conditions))
    if unknown:
        raise ConfigError(f"experiment {exp.name!r} has no condition {unknown}; it has {list(exp.conditions)}")
    conditions = [c for c in exp.conditions if not only or c in only]
    return [(c, s, run_config(exp, c, s, bench, tables, runs_folder(exp, bench))) for s in exp.seeds
            for c in conditions]


def shallowest(waiting: Sequence[tuple[Any, ...]]) -> int:
    """The index of the waiting run to hand out next: the one fewest continuations into its chain (its first
    field), the first queued among equals. First in, first out (the order runs came back in, not their depth), one
    chain's step to 80 epochs on charades_vo waited behind other chains' steps to 100 and 120; shallowest first, a
    reading at a lower cap is ready as soon as it can be."""
    return min(range(len(waiting)), key=lambda i: (waiting[i][0], i))


def run_experiment(config: Path, jobs: int = 2, only: list[str] | None = None,
                   continuation: Continuation | None = None) -> dict[str, Any]:
    """Train and evaluate every (condition, seed) run of an experiment, then write its report. With
    ``continuation`` a run the trend test finds still rising is continued (``experiments.continuation``) and the
    last run of its chain is the one reported. A run that fails (``jobs`` > 1) is said at once and no run
    starts after it; the runs already training finish and are kept, then its error is raised."""
    from momentsearch.experiments.report import write_report

    exp = load_yaml_config(ExperimentConfig, config)
    out = results_folder(exp)
    bench, tables = prepare(exp)
    runs_dir = runs_folder(exp, bench)
    runs = planned_runs(exp, only, bench, tables)
    conditions = list(dict.fromkeys(c for c, _, _ in runs))
    # a condition that fine-tunes another's model trains after every run of the first wave
    later = {c for c in conditions if (exp.conditions[c] or {}).get("init_from") in exp.conditions}
    waves = [[r for r in runs if r[0] not in later], [r for r in runs if r[0] in later]]
    results: dict[tuple[str, int], dict[str, Any]] = {}
    final = {(c, s): d for c, s, d in runs}
    say(f"experiment {exp.name}: {len(conditions)} conditions x {len(exp.seeds)} seeds = {len(runs)} runs, "
          f"{jobs} at a time; runs under {runs_dir}, results under {out}" + (
              f"; runs still rising continued by {continuation.step} epochs up to {continuation.max_epochs}"
              if continuation else ""))
    from tqdm import tqdm

    pools = str(tables["mvmr pools"]) if "mvmr pools" in tables else None
    bar = tqdm(total=len(runs), desc=exp.name, unit="run")

    def settle(c: str, s: int, d: dict[str, Any], result: dict[str, Any]) -> dict[str, Any] | None:
        """Keep a finished run's result; its continuation when it is still rising (None: done)."""
        results[(c, s)], final[(c, s)] = {**result, "epochs": d["epochs"]}, d
        bar.update()
        nxt = next_run(d, continuation)
        if nxt is not None:
            bar.total += 1
            bar.refresh()
            if not (Path(nxt["out_dir"]) / "result.json").exists():
                tqdm.write(f"{c} seed {s}: still rising at {d['epochs']} epochs; continued to {nxt['epochs']}")
        return nxt

    failed: list[tuple[str, BaseException]] = []  # (jobs > 1) runs that raised: no run starts after the first
    for wave in waves:
        if failed:
            break
        if jobs <= 1:
            for c, s, d in wave:
                step: dict[str, Any] | None = d
                while step is not None:
                    step = settle(c, s, step, run_one(step, exp.eval_split, pools))
            continue
        # (continuations so far, condition, seed, config), handed to a process only when one is free: a failure
        # stops everything not yet begun
        waiting = [(0, c, s, d) for c, s, d in wave]
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn"), initializer=die_with_parent,
                                 initargs=(os.getpid(),)) as pool:  # killing this command ends its trainings
            pending: dict[Any, tuple[int, str, int, dict[str, Any]]] = {}
            while waiting or pending:
                while waiting and len(pending) < jobs and not failed:
                    depth, c, s, d = waiting.pop(shallowest(waiting))
                    pending[pool.submit(run_one, d, exp.eval_split, pools)] = (depth, c, s, d)
                if not pending:
                    break
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    depth, c, s, d = pending.pop(f)
                    if (e := f.exception()) is not None:  # said now; no run starts after it
                        failed.append((f"{c} seed {s}", e))
                        tqdm.write(f"{c} seed {s} failed: {type(e).__name__}: {e}" + (
                            f"; {len(waiting)} runs not yet started will not start" if waiting else "") +
                            (f"; waiting for the {len(pending)} running" if pending else ""))
                        continue
                    nxt = settle(c, s, d, f.result())
                    if nxt is not None:
                        waiting.append((depth + 1, c, s, nxt))
    bar.close()
    if failed:
        e = failed[0][1]
        e.add_note(f"experiment {exp.name!r}: {', '.join(n for n, _ in failed)} failed; every finished run is "
                   f"kept, so the same command again trains only the runs still missing")
        raise e
    runs = [(c, s, final[(c, s)]) for c, s, _ in runs]  # the last run of each chain
    if exp.mvmr is not None and exp.mvmr.retriever:  # Table 2: the retriever's model of the same seed in front
        ckpt = {s: Path(d["out_dir"]) / "checkpoints" / "best.pt" for c, s, d in runs if c == exp.mvmr.retriever}
        for c, s, d in tqdm(runs, desc=f"{exp.name}: top {exp.mvmr.top_videos} by {exp.mvmr.retriever}", unit="run"):
            with_top = _with_mvmr(results[(c, s)], Path(d["out_dir"]), exp.eval_split, pools, str(ckpt[s]),
                                  exp.mvmr.top_videos)
            results[(c, s)]["metrics"].update(with_top["metrics"])
    for name in exp.score_with:  # Wray et al.'s nDCG against a text proxy (issue 42 item 6)
        for c, s, d in tqdm(runs, desc=f"{exp.name}: nDCG against {name}", unit="run"):
            results[(c, s)] = with_proxy_ndcg(results[(c, s)], Path(d["out_dir"]), exp.eval_split, name, tables[name])
    return write_report(exp.name, out, conditions, exp.seeds, results, str(config))
