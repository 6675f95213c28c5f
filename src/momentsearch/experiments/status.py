"""Where an experiment's runs stand, read from their folders without training anything
(``momentsearch experiment CONFIG --status``): for each (condition, seed), the latest run of its chain of
continuations, its epochs, whether it is training, flat, or still rising and to be continued, and each measure's
convergence statistic under the rule given (``experiments.continuation.chain_status``)."""

from __future__ import annotations

import math
from pathlib import Path

from momentsearch.config import load_yaml_config
from momentsearch.errors import ConfigError
from momentsearch.experiments.continuation import ChainStatus, Continuation, chain_status
from momentsearch.experiments.runner import ExperimentConfig, benchmark_dir, planned_runs, prepare


def experiment_status(config: Path, only: list[str] | None = None, continuation: Continuation | None = None
                      ) -> list[tuple[str, int, ChainStatus]]:
    """(condition, seed, status) of every run of experiment ``config`` (``only``: those conditions), in the
    order the experiment trains them. The benchmark must exist (nothing is generated for a status)."""
    exp = load_yaml_config(ExperimentConfig, config)
    bench = benchmark_dir(exp)
    if not (bench / "benchmark.yaml").exists():
        raise ConfigError(f"experiment {exp.name!r} has not started: no benchmark at {bench}; "
                          f"`momentsearch experiment {config}` generates it and trains")
    bench, tables = prepare(exp)
    return [(c, s, chain_status(d, continuation)) for c, s, d in planned_runs(exp, only, bench, tables)]


def _cell(v: float | None) -> str:
    """A measure's statistic; "short" where the history is shorter than the window (no slope to bound yet)."""
    return "" if v is None else f"{v:+.2f}" if math.isfinite(v) else "short"


def status_table(rows: list[tuple[str, int, ChainStatus]], continuation: Continuation | None) -> str:
    """A Markdown table of :func:`experiment_status`'s rows, with a line counting the states."""
    names = sorted({k for *_, st in rows for k in st.measures}, key=lambda k: (not k.startswith("VR"), k))
    what = ("upper 90 % slope bound" if continuation is not None and continuation.rule == "equivalence"
            else "slope") + ", points an epoch"
    lines = [f"| condition | seed | epochs | state | {' | '.join(names)} |", "|---|---:|---|---|" + "---:|" * len(names)]
    for c, s, st in rows:
        vals = " | ".join(_cell(st.measures.get(k)) for k in names)
        lines.append(f"| {c} | {s} | {st.trained} of {st.epochs} | {st.state} | {vals} |")
    counts: dict[str, int] = {}
    for *_, st in rows:
        key = st.state.split(",")[0].split(" (")[0]
        counts[key] = counts.get(key, 0) + 1
    lines.append("")
    lines.append(f"{len(rows)} runs: " + ", ".join(f"{n} {k}" for k, n in counts.items()) + f" (measures: {what}; "
                 "short: fewer epochs than the window)")
    due, most = sum(st.due for *_, st in rows), sum(st.at_most for *_, st in rows)
    lines.append(f"epochs to train: {due:,} before every chain is judged again (unfinished runs and the continuations "
                 f"due), at most {most:,} if every chain still rising is continued to the cap")
    return "\n".join(lines)
