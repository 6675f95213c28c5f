"""Runs still rising are continued (issue 42, item 3): the trend test on a run's history, the chain of
continuations, and the experiment runner reporting the last run of each chain."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from conftest import xml_experiment
from momentsearch.errors import ConfigError
from momentsearch.experiments import Continuation, final_run, run_digest, run_experiment, run_trends
from momentsearch.experiments.continuation import next_run
from momentsearch.experiments.runner import shallowest
from momentsearch.training.lock import run_lock


def _history(vr: list[float], vcmr: list[float]) -> list[dict]:
    return [{"epoch": i + 1, "selection": b, "val": {"VR": {"r10": a}, "VCMR": {"0.5-r10": b}}}
            for i, (a, b) in enumerate(zip(vr, vcmr))]


def _finished(run: Path, d: dict, history: list[dict]) -> None:
    run.mkdir(parents=True)
    (run / "history.json").write_text(json.dumps(history))
    (run / "train_config.json").write_text(json.dumps(d))
    (run / "result.json").write_text(json.dumps({"metrics": {}, "train_seconds": 1.0}))


def _line(n: int) -> list[dict]:
    """VR rising 0.5 an epoch, VCMR flat, over n epochs."""
    return _history([i / 2 for i in range(n)], [5.0] * n)


RISING = _line(12)
FLAT = _history([30.0, 31.0, 30.0, 31.0] * 3, [5.0, 6.0] * 6)


def test_trend_test_of_a_history_by_hand() -> None:
    vr, vcmr = run_trends(RISING, {"model": {"name": "xml"}}, window=10)
    # a straight line: slope 0.5 exactly, no residual, so a rise with p = 0; a constant: slope 0, p = 1
    assert vr.slope == pytest.approx(0.5) and vr.p_rising == 0.0 and not vr.converged
    assert vcmr.slope == pytest.approx(0.0) and vcmr.converged
    # 30, 31 alternating over 10 epochs: slope 1/33 (least squares by hand: Sxy 2.5 / Sxx 82.5), not significant
    vr, vcmr = run_trends(FLAT, {"model": {"name": "xml"}}, window=10)
    assert vr.slope == pytest.approx(2.5 / 82.5) and vr.converged and vcmr.converged
    # a two-phase family has its VR tested over its retriever phase only: flat there, rising after
    two_phase = _history([30.0] * 6 + [40.0, 50.0, 60.0, 70.0, 80.0, 90.0], [5.0] * 12)
    vr, _ = run_trends(two_phase, {"model": {"name": "minute", "retriever_epochs": 6}}, window=10)
    assert vr.window == 6 and vr.converged
    vr, _ = run_trends(two_phase, {"model": {"name": "xml"}}, window=10)
    assert not vr.converged


def test_a_rising_run_is_continued_until_it_passes_or_reaches_the_cap(tmp_path: Path) -> None:
    d = {"epochs": 12, "seed": 3, "lr": 0.0005, "model": {"name": "xml"}, "out_dir": ""}
    d["out_dir"] = str(tmp_path / run_digest(d) / "seed3")
    cont = Continuation(step=8, max_epochs=30)
    assert next_run(d, cont) is None  # not trained yet: nothing to test
    _finished(Path(d["out_dir"]), d, RISING)
    nxt = next_run(d, cont)
    assert nxt is not None and nxt["epochs"] == 20 and nxt["lr"] == 0.0005
    # its folder is the one run_config names for a 20-epoch condition of the same config: shared with it
    assert Path(nxt["out_dir"]) == tmp_path / run_digest({**d, "epochs": 20, "out_dir": ""}) / "seed3"
    assert Path(nxt["out_dir"]) != Path(d["out_dir"])
    assert final_run(d, cont) == (d, nxt)  # the continuation still lacks
    assert final_run(d, None) == (d, None) and next_run(d, None) is None  # without continuation: as configured
    _finished(Path(nxt["out_dir"]), nxt, _line(20))  # still rising at 20: continued to 28
    last, missing = final_run(d, cont)
    assert last == nxt and missing is not None and missing["epochs"] == 28
    _finished(Path(missing["out_dir"]), missing, _line(28))  # still rising, but 36 would pass the cap of 30
    assert final_run(d, cont) == (missing, None)
    assert next_run(d, Continuation(step=8, max_epochs=19)) is None  # 20 would pass the cap
    # a two-phase family whose VR still rose at the end of its retriever phase (epoch 6): more epochs would train
    # its localizer alone, so it is not continued; its localizer still rising is
    two = {"epochs": 12, "seed": 5, "model": {"name": "minute", "retriever_epochs": 6}, "out_dir": ""}
    two["out_dir"] = str(tmp_path / run_digest(two) / "seed5")
    _finished(Path(two["out_dir"]), two, _history([0.0, 1.0, 2.0, 3.0, 4.0, 5.0] + [5.0] * 6, [5.0, 6.0] * 6))
    assert next_run(two, cont) is None
    two7 = {**two, "seed": 7, "out_dir": str(tmp_path / run_digest({**two, "seed": 7, "out_dir": ""}) / "seed7")}
    _finished(Path(two7["out_dir"]), two7, _history([5.0] * 12, [float(i) for i in range(12)]))
    assert next_run(two7, cont)["epochs"] == 20
    flat = {**d, "seed": 4}
    flat["out_dir"] = str(tmp_path / run_digest(flat) / "seed4")
    _finished(Path(flat["out_dir"]), flat, FLAT)
    assert final_run(flat, cont) == (flat, None)


@pytest.mark.parametrize("text, says", [
    ("{not json", "invalid JSON"), ("[]", "non-empty list of epochs"), ('{"epoch": 1}', "non-empty list"),
    ('[{"epoch": 1, "selection": 1.0, "val": {"VR": {}}}]', "epoch entry 0 lacks epoch, selection, val.VR.r10"),
    ('[{"epoch": 1, "selection": 1.0, "val": {"VR": {"r10": "7"}, "VCMR": {"0.5-r10": 1}}}]', "not a finite number"),
    # an integer too large for a float (found by benchmarks/fuzz_loaders.py), and NaN
    ('[{"epoch": 1, "selection": 1.0, "val": {"VR": {"r10": 1%s}, "VCMR": {"0.5-r10": 1}}}]' % ("0" * 400),
     "not a finite number"),
    ('[{"epoch": 1, "selection": NaN, "val": {"VR": {"r10": 7}, "VCMR": {"0.5-r10": 1}}}]', "not a finite number")])
def test_a_damaged_history_names_the_run_to_retrain(tmp_path: Path, text: str, says: str) -> None:
    d = {"epochs": 12, "seed": 0, "model": {"name": "xml"}, "out_dir": str(tmp_path / "abc" / "seed0")}
    _finished(Path(d["out_dir"]), d, RISING)
    (Path(d["out_dir"]) / "history.json").write_text(text)
    with pytest.raises(ConfigError, match=says) as e:
        next_run(d, Continuation(step=8, max_epochs=30))
    assert str(e.value).startswith(f"{d['out_dir']}/history.json") and str(e.value).endswith(
        f"delete {d['out_dir']} to retrain that run")


def test_the_report_says_the_epochs_of_each_seed_where_they_differ() -> None:
    from momentsearch.experiments.report import aggregate, markdown

    results = {("XML", s): {"metrics": {"VCMR 0.5-r1": 20.0 + s}, "epochs": e} for s, e in ((0, 160), (1, 320))}
    results |= {("+PR", s): {"metrics": {"VCMR 0.5-r1": 25.0}, "epochs": 160} for s in (0, 1)}
    md = markdown(aggregate(["XML", "+PR"], [0, 1], results), [0, 1])
    assert "Epochs per seed where they differ (runs still rising by the trend test were continued): XML: 160, 320." in md
    assert "+PR: 160" not in md  # every seed alike: not listed
    results[("XML", 1)]["epochs"] = 160
    assert "Epochs per seed" not in markdown(aggregate(["XML", "+PR"], [0, 1], results), [0, 1])


def test_continuation_settings_are_checked() -> None:
    from typer.testing import CliRunner

    from momentsearch.cli.main import app

    with pytest.raises(ConfigError, match="at least 1"):
        Continuation(step=0, max_epochs=240)
    with pytest.raises(ConfigError, match="window must be at least 3"):
        Continuation(step=80, max_epochs=240, window=2)
    # the command line says which setting is wrong before it reads the experiment
    r = CliRunner().invoke(app, ["experiment", "configs/experiments/pr_recipe.yaml", "--max-epochs", "320"])
    said = " ".join(r.output.replace("│", " ").split())  # the error box wraps lines
    assert r.exit_code == 2 and "--continue-rising and --max-epochs must be at least 1, got 0 and 320" in said


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [1, 2])
def test_the_experiment_reports_the_last_run_of_each_chain(tiny_benchmark: Path, tmp_path: Path, jobs: int) -> None:
    """A one-epoch run cannot pass a 3-epoch trend test (too short to say), so it is continued epoch by
    epoch up to the cap of 3: the report is the 3-epoch run's, and its first epoch was not retrained."""
    cfg = xml_experiment(tmp_path, tiny_benchmark)
    cont = Continuation(step=1, max_epochs=3, window=3)
    agg = run_experiment(cfg, jobs=jobs, continuation=cont)
    assert agg["XML"]["epochs"]["runs"] == [3.0]
    histories = {len(json.loads(p.read_text())): p.parent for p in (tmp_path / "runs").glob("*/seed0/history.json")}
    assert sorted(histories) == [1, 2, 3]
    first = [json.loads((histories[n] / "history.json").read_text())[0]["train_seconds"] for n in (1, 2, 3)]
    assert first[0] == first[1] == first[2]  # epoch 1 copied along the chain, not retrained
    reported = json.loads((histories[3] / "result.json").read_text())["metrics"]["VCMR 0.5-r10"]
    assert agg["XML"]["VCMR 0.5-r10"]["runs"] == [reported]
    stamp = (histories[3] / "result.json").stat().st_mtime
    run_experiment(cfg, jobs=jobs, continuation=cont)  # done: nothing retrained, the same report
    assert (histories[3] / "result.json").stat().st_mtime == stamp
    assert run_experiment(cfg, jobs=jobs)["XML"]["VCMR 0.5-r10"]["runs"] == [
        json.loads((histories[1] / "result.json").read_text())["metrics"]["VCMR 0.5-r10"]]  # without: as configured


def test_the_waiting_runs_go_shallowest_first() -> None:
    """With two processes the experiment hands out the waiting run fewest continuations into its chain, the first
    queued among equals (base runs, all at 0, keep their seed-major order), whatever order they were queued in."""
    waiting = [(2, "XML seed 0 to 100"), (1, "XML seed 1 to 80"), (0, "BoW seed 0"), (1, "BoW seed 2 to 80"),
               (0, "BoW seed 1")]
    order = []
    while waiting:
        order.append(waiting.pop(shallowest(waiting))[1])
    assert order == ["BoW seed 0", "BoW seed 1", "XML seed 1 to 80", "BoW seed 2 to 80", "XML seed 0 to 100"]


def test_the_equivalence_rule_by_hand(tmp_path: Path) -> None:
    """Issue 75: flat means the upper end of the slope's 90 % t interval over >= 20 epochs is below the tolerance,
    on every measure, R@1 included. By hand: a line of slope 0.05 with no noise has upper == slope (passes at 0.1);
    a noisy rise of 15 points over 80 epochs (0.19 an epoch) fails; an R@1 curve rising while R@10 is flat fails
    the run, where the trend test looked at R@10 alone and passed it."""
    import numpy as np

    from momentsearch.experiments.continuation import run_flatness
    from momentsearch.experiments.stats import flatness

    f = flatness([0.05 * i for i in range(30)], window=20, tolerance=0.1)
    assert f.slope == pytest.approx(0.05) and f.upper == pytest.approx(0.05) and f.converged
    assert not flatness([0.15 * i for i in range(30)], window=20, tolerance=0.1).converged
    assert not flatness([1.0] * 19, window=20).converged  # too short to show it is flat
    # alternating 30, 31 over 20 epochs: slope 1/133 by hand (Sxy 5 / Sxx 665), stderr from the residuals
    alt = [30.0, 31.0] * 10
    f = flatness(alt, window=20)
    x = np.arange(20.0)
    slope = np.polyfit(x, alt, 1)[0]
    resid = np.asarray(alt) - np.polyval(np.polyfit(x, alt, 1), x)
    se = np.sqrt((resid ** 2).sum() / 18 / ((x - x.mean()) ** 2).sum())
    assert f.slope == pytest.approx(5 / 665) == pytest.approx(slope)
    assert f.upper == pytest.approx(slope + 1.7340636066 * se) and f.converged  # t(0.95, 18) = 1.7341
    rng = np.random.default_rng(0)
    rising = 40 + 15 * np.arange(80) / 80 + rng.normal(0, 0.9, 80)  # the example, 0.9 points of noise
    assert not flatness(rising, window=20).converged
    with pytest.raises(ValueError, match="20 epochs or more"):
        flatness(alt, window=10)
    n = 30
    hist = [{"epoch": i + 1, "selection": 5.0, "val": {"VR": {"r1": 10 + 0.3 * i, "r10": 50.0},
                                                        "VCMR": {"0.5-r1": 5.0, "0.5-r10": 9.0}}} for i in range(n)]
    flat = run_flatness(hist, {"model": {"name": "xml"}}, 20, 0.1)
    assert sorted(flat) == ["VCMR 0.5-r1", "VCMR 0.5-r10", "VR r1", "VR r10"]
    assert not flat["VR r1"].converged and all(flat[k].converged for k in ("VR r10", "VCMR 0.5-r1", "VCMR 0.5-r10"))
    vr, vcmr = run_trends(hist, {"model": {"name": "xml"}}, window=20)
    assert vr.converged and vcmr.converged  # the trend test never looked at R@1
    d = {"epochs": n, "seed": 1, "model": {"name": "xml"}, "out_dir": ""}
    d["out_dir"] = str(tmp_path / run_digest(d) / "seed1")
    _finished(Path(d["out_dir"]), d, hist)
    assert next_run(d, Continuation(20, 100, window=20)) is None  # the trend test: done
    assert next_run(d, Continuation(20, 100, window=20, rule="equivalence"))["epochs"] == 50  # R@1 still rises
    with pytest.raises(ConfigError, match="at least 20 epochs"):
        Continuation(20, 100, window=10, rule="equivalence")
    with pytest.raises(ConfigError, match="trend or equivalence"):
        Continuation(20, 100, rule="tost")


def test_the_two_level_bootstrap_by_hand() -> None:
    """Issue 75 part 4: resampling seeds and queries. With one seed and every query's difference equal, the interval
    is that value; with query differences of +1 and -1 in equal numbers it covers 0 however many seeds agree, where
    the t interval over seeds (their means all 0) would be a point."""
    import numpy as np

    from momentsearch.experiments.stats import paired, two_level_bootstrap

    a = np.full((1, 50), 3.0)
    b = np.zeros((1, 50))
    r = two_level_bootstrap(a, b, resamples=200)
    assert (r.mean, r.low, r.high, r.verdict) == (3.0, 3.0, 3.0, "borne out")
    d = np.tile(np.array([1.0, -1.0] * 25), (5, 1))  # every seed: half the queries +1, half -1
    r = two_level_bootstrap(d, np.zeros_like(d), resamples=2000)
    assert r.mean == 0.0 and r.low < -0.1 and r.high > 0.1 and r.verdict == "inconclusive"
    t = paired(d.mean(1).tolist(), [0.0] * 5)
    assert t.low == t.high == 0.0  # the seeds alone: no spread at all
    with pytest.raises(ValueError, match="one shape"):
        two_level_bootstrap(a, np.zeros((2, 50)))


def test_a_chains_status_by_hand(tmp_path: Path) -> None:
    """``experiment --status`` reads each chain from its folders: not started, training (its history so far), a
    finished run still rising whose continuation is not yet begun, the continuation training, rising at the cap,
    and flat; under the equivalence rule each measure's upper slope bound, under the trend test the slopes."""
    from momentsearch.experiments.continuation import chain_status

    cont = Continuation(step=8, max_epochs=30)
    d = {"epochs": 12, "seed": 3, "model": {"name": "xml"}, "out_dir": ""}
    d["out_dir"] = str(tmp_path / run_digest(d) / "seed3")
    st = chain_status(d, cont)
    assert (st.state, st.trained, st.epochs, st.measures) == ("not started", 0, 12, {})
    assert (st.due, st.at_most) == (12, 28)  # 12, then 8 at a time while within the cap of 30: 20, 28
    rows = [("XML", 3, st)]
    Path(d["out_dir"]).mkdir(parents=True)
    (Path(d["out_dir"]) / "history.json").write_text(json.dumps(RISING[:5]))
    st = chain_status(d, cont)  # begun, and no process trains it: stopped (a killed command, a session's end)
    assert (st.state, st.trained, st.epochs, st.due, st.at_most) == ("stopped (the same command resumes it)", 5, 12,
                                                                     7, 23)
    with run_lock(d["out_dir"]):  # a process trains it now: its pid
        st = chain_status(d, cont)
    assert (st.state, st.trained, st.epochs) == (f"training (pid {os.getpid()} on {socket.gethostname()})", 5, 12)
    (Path(d["out_dir"]) / "history.json").unlink()
    Path(d["out_dir"]).rmdir()
    _finished(Path(d["out_dir"]), d, RISING)
    st = chain_status(d, cont)
    assert (st.state, st.trained, st.due, st.at_most) == ("rising, continues to 20", 12, 8, 16)
    rows.append(("XML", 4, st))
    assert st.measures == {"VR r10": pytest.approx(0.5), "VCMR 0.5-r10": pytest.approx(0.0)}  # the slopes
    nxt = next_run(d, cont)
    Path(nxt["out_dir"]).mkdir(parents=True)  # the continuation has begun (its first epochs copied)
    (Path(nxt["out_dir"]) / "history.json").write_text(json.dumps(_line(14)))
    st = chain_status(d, cont)
    assert (st.state, st.trained, st.epochs, st.folder) == ("stopped (the same command resumes it)", 14, 20,
                                                            nxt["out_dir"])
    assert (st.due, st.at_most) == (6, 14)
    (Path(nxt["out_dir"]) / "history.json").unlink()
    Path(nxt["out_dir"]).rmdir()
    _finished(Path(nxt["out_dir"]), nxt, _line(20))
    last = next_run(nxt, cont)
    _finished(Path(last["out_dir"]), last, _line(28))
    st = chain_status(d, cont)
    assert (st.state, st.due, st.at_most) == ("rising at the cap", 0, 0)  # 36 would pass the cap of 30
    from momentsearch.experiments.status import status_table

    assert status_table(rows + [("XML", 5, st)], cont).splitlines()[-1] == (
        "epochs to train: 20 before every chain is judged again (unfinished runs and the continuations due), at most "
        "44 if every chain still rising is continued to the cap")
    assert chain_status(d, None).state == "finished"  # without continuation: as configured, the 12-epoch run
    flat = {**d, "seed": 4, "epochs": 30}
    flat["out_dir"] = str(tmp_path / run_digest(flat) / "seed4")
    n = 30  # every measure constant but VR r1, 0.05 an epoch with no noise: its upper bound is 0.05 exactly
    _finished(Path(flat["out_dir"]), flat, [
        {"epoch": i + 1, "selection": 5.0, "val": {"VR": {"r1": 10 + 0.05 * i, "r10": 50.0},
                                                    "VCMR": {"0.5-r1": 5.0, "0.5-r10": 9.0}}} for i in range(n)])
    eq = Continuation(20, 100, window=20, rule="equivalence")
    st = chain_status(flat, eq)
    assert st.state == "flat" and st.measures["VR r1"] == pytest.approx(0.05) and st.measures["VCMR 0.5-r1"] == 0.0
    assert chain_status(flat, Continuation(20, 100, window=20, rule="equivalence", tolerance=0.04)).state == (
        "rising, continues to 50")


@pytest.mark.slow
def test_the_status_of_an_experiment_from_the_command_line(tiny_benchmark: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from momentsearch.cli.main import app

    cfg = xml_experiment(tmp_path, tiny_benchmark)
    r = CliRunner().invoke(app, ["experiment", str(cfg), "--status"])
    assert r.exit_code == 0, r.output
    assert "| XML | 0 | 0 of 1 | not started |" in r.output and "1 runs: 1 not started" in r.output
    from momentsearch.experiments.continuation import ChainStatus
    from momentsearch.experiments.status import status_table

    table = status_table([("XML", 0, ChainStatus(80, 12, "training (pid 7 on h)", {"VR r1": float("inf"),
                                                                                    "VCMR 0.5-r1": 0.25}, "f"))],
                         Continuation(20, 200, 20, "equivalence"))
    assert "| VR r1 | VCMR 0.5-r1 |" in table and "| XML | 0 | 12 of 80 | training (pid 7 on h) | short | +0.25 |" \
        in table and "1 runs: 1 training (measures" in table
    assert "(measures: upper 90 % slope bound, points an epoch; short: fewer epochs than the window)" in table
    assert not (tmp_path / "runs").exists()  # nothing trained
    missing = tmp_path / "none.yaml"
    missing.write_text(cfg.read_text().replace(str(tiny_benchmark), str(tmp_path / "nobench")))
    r = CliRunner().invoke(app, ["experiment", str(missing), "--status"])
    assert r.exit_code != 0 and "has not started: no benchmark at" in str(r.exception) + r.output
