"""Experiments: a paper's conditions x seeds, trained, evaluated and aggregated into one table
(``momentsearch experiment CONFIG`` is its command line). ``runner``: the runs (each keyed by a hash of the
values its config sets apart from the defaults, ``digest``, so an interrupted experiment resumes); ``continuation``:
runs still rising by the trend test continued; ``status``: where each run stands, read without training;
``tables``: the relevance tables its conditions train on; ``report``: the table, the paired differences and the
plot; ``stats``: the intervals, verdicts and trend test; ``proxy_scores``: nDCG against a text proxy."""

from momentsearch.experiments.continuation import Continuation, final_run, run_trends
from momentsearch.experiments.digest import run_digest
from momentsearch.experiments.runner import (
    ExperimentConfig,
    MVMRSpec,
    TableSpec,
    mvmr_key,
    mvmr_metrics,
    prepare,
    results_folder,
    run_config,
    run_experiment,
    run_one,
    runs_folder,
)

__all__ = ["Continuation", "ExperimentConfig", "MVMRSpec", "TableSpec", "final_run", "mvmr_key", "mvmr_metrics",
           "prepare", "results_folder", "run_config", "run_digest", "run_experiment", "run_one", "run_trends",
           "runs_folder"]
