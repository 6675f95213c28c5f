"""Experiments: a paper's conditions x seeds, trained, evaluated and aggregated into one table
(``momentsearch experiment CONFIG`` is its command line). ``runner``: the runs (each keyed by a hash of the
values its config sets apart from the defaults, so an interrupted experiment resumes); ``tables``: the relevance
tables its conditions train on; ``report``: the table, the paired differences and the plot; ``stats``: the
intervals, verdicts and trend test; ``proxy_scores``: nDCG against a text proxy."""

from momentsearch.experiments.runner import (
    ExperimentConfig, MVMRSpec, TableSpec, mvmr_key, mvmr_metrics, prepare, run_config, run_digest, run_experiment,
    run_one)

__all__ = ["ExperimentConfig", "MVMRSpec", "TableSpec", "mvmr_key", "mvmr_metrics", "prepare", "run_config",
           "run_digest", "run_experiment", "run_one"]
