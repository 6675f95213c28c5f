"""Runs still rising are continued (issue 42, item 3).

A finished run is **still rising** when the trend test of ``stats.trend`` finds the slope of its validation VR r10
or VCMR 0.5-r10 over the last ``window`` epochs significantly positive (one-sided t, p < 0.05; a two-phase family
such as MINUTE has its VR tested at the end of its retriever phase, where VR stops changing, and is not continued
when that is the only half still rising: its added epochs would train the localizer alone). With a
``Continuation(step, max_epochs)`` such a run is continued: the same config with ``step`` more epochs, which
starts from the finished run's checkpoints (``continue_shorter_run``: the trainer resumes exactly, so this equals
training the longer run from scratch), then tested again, until the test passes or ``max_epochs`` is reached.
The run an experiment reports for a (condition, seed) is the last of that chain (``final_run``), so its
verdicts compare runs at convergence by the test, or a run that still rises at ``max_epochs``, reported as such.

``rule="equivalence"`` (issue 75; ``--convergence equivalence``) asks more: the upper end of the 90 % interval of
each measure's slope (VR r1 and r10, VCMR 0.5-r1 and 0.5-r10, where the history holds them) over the last
``window`` >= 20 epochs below ``tolerance`` points per epoch (``stats.flatness``). The trend test passes a curve
whose rise it cannot tell from noise; this one passes only a curve shown to be flat, R@1 included.
A condition that fine-tunes another's model (``init_from``) starts from the source run as configured, not
from its continuation.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from momentsearch.config import from_dict
from momentsearch.errors import ConfigError
from momentsearch.experiments.digest import run_digest
from momentsearch.experiments.stats import EQUIVALENCE_TOLERANCE, Flatness, Trend, flatness, trend
from momentsearch.readers import is_finite_number, read_json
from momentsearch.training.lock import lock_holder


@dataclass(frozen=True)
class Continuation:
    step: int  # epochs added to a run the trend test finds still rising
    max_epochs: int  # no run is continued past this many epochs
    window: int = 10  # the trend test's window (the last epochs)
    rule: str = "trend"  # trend | equivalence (issue 75: stats.flatness on every measure, R@1 included)
    tolerance: float = EQUIVALENCE_TOLERANCE  # the equivalence rule's points per epoch

    def __post_init__(self) -> None:
        if self.step < 1 or self.max_epochs < 1:
            raise ConfigError(f"--continue-rising and --max-epochs must be at least 1, got {self.step} and "
                              f"{self.max_epochs}")
        if self.window < 3:
            raise ConfigError(f"the trend test's window must be at least 3 epochs, got {self.window}")
        if self.rule not in ("trend", "equivalence"):
            raise ConfigError(f"the convergence rule is trend or equivalence, got {self.rule!r}")
        if self.rule == "equivalence" and (self.window < 20 or not self.tolerance > 0):
            raise ConfigError(f"the equivalence rule needs a window of at least 20 epochs and a tolerance > 0, got "
                              f"{self.window} and {self.tolerance}")


def curve_trends(curves: dict[str, Sequence[float]], vr_end: int, window: int = 10) -> tuple[Trend, Trend]:
    """The trend test's two halves: validation VR r10 up to the end of its phase, and VCMR 0.5-r10 to the end."""
    return trend(list(curves["VR r10"])[:vr_end], window), trend(curves["VCMR 0.5-r10"], window)


def vr_phase_end(history: Sequence[dict[str, Any]], train_cfg: dict[str, Any]) -> int:
    """The epochs during which VR can change: a two-phase family's ``retriever_epochs``, else the whole run."""
    return min(int((train_cfg.get("model") or {}).get("retriever_epochs", 0)) or len(history), len(history))


def read_history(path: Path, validation: bool = True) -> list[dict[str, Any]]:
    """A run's ``history.json``, checked: a non-empty list of epochs, each with its epoch number, selection score
    and (``validation``) validation VR r10 and VCMR 0.5-r10 as numbers. A damaged file says which run to retrain."""
    fix = f"; delete {path.parent} to retrain that run"
    try:
        history = read_json(path, ConfigError, "training history")
    except ConfigError as e:
        raise ConfigError(f"{e}{fix}") from None
    if not isinstance(history, list) or not history:
        raise ConfigError(f"{path}: expected a non-empty list of epochs{fix}")
    for i, h in enumerate(history):
        try:
            vals = [h["epoch"], h["selection"]]
            if validation:
                vals += [h["val"]["VR"]["r10"], h["val"]["VCMR"]["0.5-r10"]]
        except (KeyError, TypeError):
            raise ConfigError(f"{path}: epoch entry {i} lacks epoch, selection"
                              f"{', val.VR.r10 or val.VCMR.0.5-r10' if validation else ''}{fix}") from None
        if not all(is_finite_number(v) for v in vals):
            raise ConfigError(f"{path}: epoch entry {i} has a value that is not a finite number{fix}")
    return history


def run_trends(history: Sequence[dict[str, Any]], train_cfg: dict[str, Any], window: int = 10) -> tuple[Trend, Trend]:
    """The trend test of a run's ``history.json`` (validation after every epoch)."""
    curves = {"VR r10": [float(h["val"]["VR"]["r10"]) for h in history],
              "VCMR 0.5-r10": [float(h["val"]["VCMR"]["0.5-r10"]) for h in history]}
    return curve_trends(curves, vr_phase_end(history, train_cfg), window)


FLAT_MEASURES = (("VR", "r1"), ("VR", "r10"), ("VCMR", "0.5-r1"), ("VCMR", "0.5-r10"))


def curve_flatness(curves: dict[str, Sequence[float]], vr_end: int, window: int, tolerance: float
                   ) -> dict[str, Flatness]:
    """The equivalence rule on each curve (named ``VR r1``, ``VCMR 0.5-r1``...; VR up to the end of its phase)."""
    return {name: flatness(list(c)[:vr_end] if name.startswith("VR") else c, window, tolerance)
            for name, c in curves.items()}


def run_flatness(history: Sequence[dict[str, Any]], train_cfg: dict[str, Any], window: int, tolerance: float
                 ) -> dict[str, Flatness]:
    """The equivalence rule on every measure of :data:`FLAT_MEASURES` a run's ``history.json`` holds."""
    curves = {f"{task} {m}": [float(h["val"][task][m]) for h in history] for task, m in FLAT_MEASURES
              if all(is_finite_number((h["val"].get(task) or {}).get(m)) for h in history)}
    return curve_flatness(curves, vr_phase_end(history, train_cfg), window, tolerance)


def longer(d: dict[str, Any], epochs: int) -> dict[str, Any]:
    """Run config ``d`` with ``epochs`` epochs, in the folder its hash names (beside ``d``'s)."""
    out = Path(d["out_dir"])
    e = {**d, "epochs": epochs, "out_dir": ""}
    e["out_dir"] = str(out.parent.parent / run_digest(e) / out.name)
    return e


def still_rising(h: Sequence[dict[str, Any]], d: dict[str, Any], cont: Continuation) -> bool:
    """Whether finished run ``d`` (history ``h``) still rises by ``cont``'s rule. A two-phase family whose VCMR
    passes is not rising when only its VR is unsettled, at the end of its retriever phase: more epochs train the
    localizer alone and cannot change VR, so the run stays as it is (reported as still rising)."""
    two_phase = vr_phase_end(h, d) < len(h)
    if cont.rule == "equivalence":
        flat = run_flatness(h, d, cont.window, cont.tolerance)
        vcmr_flat = all(f.converged for k, f in flat.items() if k.startswith("VCMR"))
        return not (vcmr_flat and (two_phase or all(f.converged for f in flat.values())))
    vr, vcmr = run_trends(h, d, cont.window)
    return not (vcmr.converged and (two_phase or vr.converged))


def next_run(d: dict[str, Any], cont: Continuation | None) -> dict[str, Any] | None:
    """The run that continues finished run ``d`` when it is still rising and may grow; else None."""
    history = Path(d["out_dir"]) / "history.json"
    if cont is None or not (Path(d["out_dir"]) / "result.json").exists() or not history.exists():
        return None
    if d["epochs"] + cont.step > cont.max_epochs:
        return None  # (before the history is read: a run at the cap is not tested)
    return _grown(d, cont, still_rising(read_history(history), d, cont))


def _grown(d: dict[str, Any], cont: Continuation, rising: bool) -> dict[str, Any] | None:
    """The continuation of finished run ``d`` when it is ``rising`` and ``cont.step`` more epochs stay within
    ``cont.max_epochs``; else None."""
    return longer(d, d["epochs"] + cont.step) if rising and d["epochs"] + cont.step <= cont.max_epochs else None


def final_run(d: dict[str, Any], cont: Continuation | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The last finished run of ``d``'s chain of continuations, and the continuation it still lacks (None when
    the chain is complete: the last run passes the trend test, or has reached ``max_epochs``)."""
    while (nxt := next_run(d, cont)) is not None:
        if not (Path(nxt["out_dir"]) / "result.json").exists():
            return d, nxt
        d = nxt
    return d, None


@dataclass(frozen=True)
class ChainStatus:
    """Where one (condition, seed) chain stands (``momentsearch experiment --status``): the epochs trained of its
    latest run and the epochs that run is for, what happens next, and each measure's convergence statistic (the
    equivalence rule's upper slope bound, or the trend test's slope) over the latest history."""

    epochs: int  # the epochs the chain's latest run is for
    trained: int  # the epochs its history holds so far
    state: str  # not started | training (pid N on HOST) | stopped (...) | flat | rising, continues to N | rising at
    # the cap | finished
    measures: dict[str, float]  # measure -> upper slope bound (equivalence) or slope (trend), points an epoch
    folder: str
    due: int = 0  # epochs to train before the chain is judged again: its unfinished run's rest, or the continuation due
    at_most: int = 0  # epochs left if every continuation up to the cap is trained


def _left(trained: int, epochs: int, cont: Continuation | None) -> int:
    """Epochs from ``trained`` to the chain's furthest end: a run for ``epochs``, grown ``cont.step`` at a time
    while within ``cont.max_epochs``."""
    if cont is None:
        return epochs - trained
    return epochs + cont.step * max(0, (cont.max_epochs - epochs) // cont.step) - trained


def _measures(h: Sequence[dict[str, Any]], d: dict[str, Any], cont: Continuation | None
              ) -> tuple[dict[str, float], bool]:
    """Each measure's statistic under ``cont``'s rule, and whether every measure passes it."""
    if cont is not None and cont.rule == "equivalence":
        flat = run_flatness(h, d, cont.window, cont.tolerance)
        return {k: f.upper for k, f in flat.items()}, all(f.converged for f in flat.values())
    vr, vcmr = run_trends(h, d, cont.window if cont else 10)
    return {"VR r10": vr.slope, "VCMR 0.5-r10": vcmr.slope}, vr.converged and vcmr.converged


def chain_status(d: dict[str, Any], cont: Continuation | None) -> ChainStatus:
    """The status of run ``d``'s chain of continuations under ``cont``, read from its folders (nothing trains)."""
    while True:
        out = Path(d["out_dir"])
        h = read_history(out / "history.json") if (out / "history.json").exists() else []
        if not (out / "result.json").exists():
            state = "not started"
            if h or (out / "checkpoints" / "last.pt").exists():  # begun: is a process training it now?
                holder = lock_holder(out)
                state = f"training ({holder})" if holder else "stopped (the same command resumes it)"
            return ChainStatus(d["epochs"], len(h), state, _measures(h, d, cont)[0] if h else {}, str(out),
                               d["epochs"] - len(h), _left(len(h), d["epochs"], cont))
        rising = cont is not None and h != [] and still_rising(h, d, cont)  # as next_run tests it
        nxt = _grown(d, cont, rising) if cont is not None else None
        if nxt is not None and Path(nxt["out_dir"]).exists():
            d = nxt
            continue
        measures, passes = _measures(h, d, cont)
        if nxt is not None:
            state = f"rising, continues to {nxt['epochs']}"
        elif cont is None:
            state = "finished"
        elif rising:
            state = "rising at the cap"
        elif cont.rule == "trend":
            state = "passes the trend test"
        else:
            state = "flat" if passes else "VCMR flat (VR rose to its phase's end)"
        due, at_most = (0, 0) if nxt is None else (nxt["epochs"] - d["epochs"], _left(d["epochs"], nxt["epochs"], cont))
        return ChainStatus(d["epochs"], len(h), state, measures, str(out), due, at_most)


def continue_shorter_run(cfg_dict: dict[str, Any], out: Path) -> float:
    """A run asked for with more epochs than a finished run of the same config starts from that run's
    checkpoints (copied into ``out``) and trains only the epochs it lacks: the trainer resumes exactly (a
    resumed run equals one not stopped), so this equals training from scratch. Returns the earlier run's
    training seconds (0 when there is none)."""
    from momentsearch.training.config import TrainConfig
    from momentsearch.training.trainer import resume_mismatch

    cfg = from_dict(TrainConfig, cfg_dict)
    best: tuple[int, Path] | None = None
    for tc in out.parent.parent.glob(f"*/{out.name}/train_config.json"):
        run = tc.parent
        if run == out or not (run / "result.json").exists() or not (run / "checkpoints" / "last.pt").exists():
            continue
        d = json.loads(tc.read_text())
        longest_so_far = best is None or d["epochs"] > best[0]
        if longest_so_far and d["epochs"] < cfg_dict["epochs"] and resume_mismatch(d, cfg) is None:
            best = (d["epochs"], run)
    if best is None:
        return 0.0
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.copytree(best[1], tmp, ignore=shutil.ignore_patterns("result.json", "eval_*"))
    if out.exists():  # no checkpoint in it: an attempt stopped before its first epoch ended
        shutil.rmtree(out)
    tmp.replace(out)
    return float(json.loads((best[1] / "result.json").read_text())["train_seconds"])
