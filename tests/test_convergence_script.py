"""benchmarks/convergence.py's paired comparison (``--versus A=B``), checked on hand-made runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.convergence import paired, parse_versus, read_stored, run_metrics, start_epoch, stored_rows

from momentsearch.experiments import mvmr_key
from momentsearch.experiments.proxy_scores import proxy_key


def test_paired_differences_by_seed_by_hand() -> None:
    rows = [{"condition": "A", "seed": s, "test": {"VR r10": a, "only A": 1.0}} for s, a in ((0, 50.0), (1, 54.0), (2, 49.0))]
    rows += [{"condition": "B", "seed": s, "test": {"VR r10": b}} for s, b in ((0, 48.0), (1, 50.0), (2, 49.0))]
    (row,) = paired(rows, "A", "B", ("VR r10", "only A"))  # a metric one side lacks is left out
    assert row["per_seed"] == [2.0, 4.0, 0.0]
    assert row["mean"] == pytest.approx(2.0)
    assert row["std"] == pytest.approx(2.0)  # sample std of (2, 4, 0)
    assert row["versus"] == "A − B"
    # the 95 % t interval: 2 ± t(0.975, 2) 2 / sqrt(3) = 2 ± 4.968 -> [-2.97, 6.97]: inconclusive
    assert (row["low"], row["high"]) == (pytest.approx(-2.968, abs=1e-3), pytest.approx(6.968, abs=1e-3))
    assert row["n"] == 3 and row["verdict"] == "inconclusive"


def test_versus_names_may_hold_an_equals_sign() -> None:
    conds = ["XML (instance)", "T=0.2 (BoW, every S)"]
    assert parse_versus("T=0.2 (BoW, every S)=XML (instance)", conds) == ("T=0.2 (BoW, every S)", "XML (instance)")
    with pytest.raises(SystemExit, match="two of the conditions"):
        parse_versus("T=0.2=XML", conds)


def test_mvmr_rows_join_the_metrics_and_fine_tunes_start_at_their_source(tmp_path: Path) -> None:
    result = {"metrics": {"VR r10": 70.0, "name": "x"},
              "mvmr": {"mvmr2:pools.txt": {"MVMR 0.5-r1": 9.5}, "mvmr2:pools.txt:ret.pt:5": {"MVMR 0.5-r1": 20.0},
                       "mvmr:pools.txt": {"MVMR 0.5-r1": 1.0}}}  # an older protocol's row is not read
    assert run_metrics(result) == {"VR r10": 70.0, "MVMR 0.5-r1": 9.5, "top5 MVMR 0.5-r1": 20.0}
    # the keys the experiment runner writes are the keys read here
    written = {mvmr_key("/b/mvmr/pools.txt"): {"MVMR 0.5-r1": 9.5}, mvmr_key("pools.txt", "/r/best.pt", 3): {"MVMR 0.5-r1": 2.0},
               mvmr_key("pools.txt", "C:/r/a:b.pt", 7): {"MVMR 0.5-r1": 4.0}}  # ":" in a retriever's path
    assert run_metrics({"metrics": {}, "mvmr": written}) == {"MVMR 0.5-r1": 9.5, "top3 MVMR 0.5-r1": 2.0,
                                                            "top7 MVMR 0.5-r1": 4.0}
    # nDCG against a proxy table (score_with), under the key the runner stores it with
    proxy = {proxy_key("bow", "/x/tables/bow.npz"): {"nDCG VR": 74.5, "nDCG VCMR 0.5": 33.25}}
    assert run_metrics({"metrics": {"nDCG VR": 67.0}, "proxy_ndcg": proxy}) == {
        "nDCG VR": 67.0, "nDCG VR (bow)": 74.5, "nDCG VCMR 0.5 (bow)": 33.25}
    run = tmp_path / "seed0"
    (run / "checkpoints").mkdir(parents=True)
    (run / "history.json").write_text(json.dumps([{"epoch": e, "selection": v} for e, v in ((1, 3.0), (2, 9.0), (3, 5.0))]))
    assert start_epoch({"init_from": str(run / "checkpoints" / "best.pt")}) == 2
    assert start_epoch({}) == 0


def test_a_run_trained_on_other_inputs_is_not_reported(tiny_benchmark: Path, tmp_path: Path) -> None:
    """The scripts read runs through chain_end, which refuses a run whose inputs.json is not what its config
    reads now (a benchmark generated again with other contents), as the experiment runner does."""
    from benchmarks._common import chain_end

    from momentsearch.experiments.inputs import run_inputs

    run = tmp_path / "seed0"
    run.mkdir()
    (run / "result.json").write_text("{}")
    d = {"dataset": {"benchmark": str(tiny_benchmark)}, "model": {"name": "xml"}, "out_dir": str(run), "epochs": 1}
    assert chain_end(d, None, "XML seed 0", Path("exp.yaml"), None) == d  # no record: a run made before it existed
    (run / "inputs.json").write_text(json.dumps(run_inputs(d)))  # as the runner records it
    assert chain_end(d, None, "XML seed 0", Path("exp.yaml"), None) == d
    (run / "inputs.json").write_text(json.dumps({"benchmark": "0" * 32}))
    with pytest.raises(SystemExit, match=r"XML seed 0: .*benchmark changed"):
        chain_end(d, None, "XML seed 0", Path("exp.yaml"), None)


def test_stored_rows_stand_in_for_runs_whose_folders_are_gone(tmp_path: Path) -> None:
    """--stored: a condition's rows from an earlier convergence JSON of the same experiment pair with new runs."""
    keys = {"epochs": 160, "best_epoch": 150, "curves": {}, "converged": True, "flat": True, "slope VR r10": 0.0,
            "p VR r10": 0.5, "slope VCMR 0.5-r10": 0.0, "p VCMR 0.5-r10": 0.5, "epoch_train_seconds": 1.0,
            "start_epoch": 0}
    old = [{"condition": "XML", "seed": s, **keys, "test": {"VR r10": v}} for s, v in ((0, 40.0), (1, 41.0))]
    path = tmp_path / "convergence_exp.json"
    path.write_text(json.dumps({"experiment": "exp", "runs": old}))
    runs = read_stored(path, "exp")
    rows = stored_rows(runs, path, "XML", [0, 1])
    assert [(r["seed"], r["test"]["VR r10"], r["stored"]) for r in rows] == [(0, 40.0, str(path)), (1, 41.0, str(path))]
    assert stored_rows(runs, path, "+PR", [0, 1]) is None  # the file does not hold it: the runs must be on disk
    new = [{"condition": "+PR", "seed": s, "test": {"VR r10": v}} for s, v in ((0, 43.0), (1, 45.0))]
    (row,) = paired(new + rows, "+PR", "XML", ("VR r10",))
    assert row["per_seed"] == [3.0, 4.0] and row["mean"] == pytest.approx(3.5)
    with pytest.raises(SystemExit, match=r"experiment 'exp', not 'other'"):
        read_stored(path, "other")
    with pytest.raises(SystemExit, match=r"holds 'XML' without seed\(s\) \[2\]"):
        stored_rows(runs, path, "XML", [0, 1, 2])
    with pytest.raises(SystemExit, match=r"holds 'XML' seed\(s\) \[1\] more than once"):
        stored_rows(runs + [{**old[1], "test": {"VR r10": 39.0}}], path, "XML", [0, 1])  # not the last silently
    path.write_text(json.dumps({"experiment": "exp", "runs": [{"condition": "XML", "seed": 0, "test": {}}]}))
    with pytest.raises(SystemExit, match=r"XML seed 0 lacks \['epochs'"):
        stored_rows(read_stored(path, "exp"), path, "XML", [0])
    for field, bad in (("test", {"VR r10": "40"}), ("curves", {"VR r10": [1.0, None]}), ("epochs", True),
                       ("p VR r10", float("nan")), ("best_epoch", 10**400)):  # a row a hand edited: an error naming it, not a traceback
        path.write_text(json.dumps({"experiment": "exp", "runs": [{**old[0], field: bad}]}))
        with pytest.raises(SystemExit, match=rf"XML seed 0: \['{field}'\] not of the type"):
            stored_rows(read_stored(path, "exp"), path, "XML", [0])
    path.write_text("{")
    with pytest.raises(SystemExit, match=r"convergence_exp.json"):
        read_stored(path, "exp")


def test_the_scripts_read_a_chain_under_the_rule_that_continued_it(tmp_path: Path) -> None:
    """A run passing the trend test at 30 epochs but not the equivalence rule was continued to 50 by
    `momentsearch experiment --convergence equivalence`: the scripts read the 50-epoch run only when told that
    rule (under the trend test the chain ends at 30), and name the flags that finish a missing continuation."""
    import argparse

    from benchmarks._common import add_continuation_flags, chain_end, continuation_of

    from momentsearch.experiments import run_digest

    def history(n: int) -> list[dict]:  # VCMR 0.5-r1 rises 0.3 an epoch to epoch 30, then stays; the rest alternate
        return [{"epoch": i + 1, "selection": 5.0,
                 "val": {"VR": {"r1": 20.0 + i % 2, "r10": 50.0 + i % 2},
                         "VCMR": {"0.5-r1": 5.0 + 0.3 * min(i, 29), "0.5-r10": 30.0 + i % 2}}} for i in range(n)]

    def finished(d: dict, hist: list[dict]) -> None:
        run = Path(d["out_dir"])
        run.mkdir(parents=True)
        (run / "history.json").write_text(json.dumps(hist))
        (run / "result.json").write_text(json.dumps({"metrics": {}, "train_seconds": 1.0}))

    d = {"epochs": 30, "seed": 0, "model": {"name": "xml"}, "out_dir": ""}
    d["out_dir"] = str(tmp_path / run_digest(d) / "seed0")
    finished(d, history(30))  # R@1 rises 0.3 an epoch, the r10 curves do not: trend passes, equivalence fails
    ap = argparse.ArgumentParser()
    add_continuation_flags(ap)
    trend = ap.parse_args(["--continue-rising", "20", "--max-epochs", "80", "--trend-window", "20"])
    equiv = ap.parse_args(["--continue-rising", "20", "--max-epochs", "80", "--trend-window", "20",
                           "--convergence", "equivalence"])
    assert chain_end(d, continuation_of(trend), "XML seed 0", Path("exp.yaml"), trend) == d
    with pytest.raises(SystemExit, match=r"to 50 has not finished; run `momentsearch experiment exp.yaml "
                                         r"--continue-rising 20 --max-epochs 80 --convergence equivalence "
                                         r"--trend-window 20` first"):
        chain_end(d, continuation_of(equiv), "XML seed 0", Path("exp.yaml"), equiv)
    longer = {**d, "epochs": 50, "out_dir": ""}
    longer["out_dir"] = str(tmp_path / run_digest(longer) / "seed0")
    finished(longer, history(50))  # flat over its last 20 epochs
    assert chain_end(d, continuation_of(equiv), "XML seed 0", Path("exp.yaml"), equiv)["epochs"] == 50


def test_replay_check_finds_the_first_epoch_that_differs_by_hand() -> None:
    """benchmarks/replay_check.py: a run trained again is compared with the stored row it should repeat."""
    from benchmarks.replay_check import compare_curves, compare_test

    def epoch(vr: float, r10: float, r1: float) -> dict:
        return {"val": {"VR": {"r10": vr}, "VCMR": {"0.5-r10": r10, "0.5-r1": r1}}}

    stored = {"VR r10": [10.0, 20.0, 30.0], "VCMR 0.5-r10": [1.0, 2.0, 3.0], "VCMR 0.5-r1": [0.0, 0.33, 0.67]}
    history = [epoch(10.0, 1.0, 0.0), epoch(20.0, 2.0, 0.33)]  # still training: 2 of the 3 stored epochs
    assert compare_curves(history, stored) == (2, None)
    history.append(epoch(30.0, 3.0, 1.0))  # epoch 3's R@1 moved by one query of 300
    assert compare_curves(history, stored) == (3, "epoch 3: VCMR 0.5-r1 1.0 now, 0.67 stored")
    assert compare_curves(history + [epoch(40.0, 4.0, 1.0)], {"VR r10": [10.0]}) == (1, None)  # the shorter decides
    assert compare_curves(history, {}) == (0, None)  # nothing stored to compare: the script counts it as a difference
    wrong = compare_test({"VR r1": 9.75, "VCMR 0.5-r1": 19.5, "only now": 1.0},
                         {"VR r1": 9.75, "VCMR 0.5-r1": 19.55, "only stored": 2.0})
    assert wrong == ["VCMR 0.5-r1 19.5 now, 19.55 stored"]  # a metric one side lacks is not compared


def test_paired_stored_pairs_two_experiments_by_seed_by_hand() -> None:
    """benchmarks/paired_stored.py: A − B over the seeds both stored JSONs hold, per metric."""
    from benchmarks.paired_stored import compare

    a = {0: {"VR r10": 44.0}, 1: {"VR r10": 45.0}, 2: {"VR r10": 41.0}, 3: {"VR r10": 50.0}}  # seed 3: A only
    b = {0: {"VR r10": 42.0}, 1: {"VR r10": 43.0}, 2: {"VR r10": 40.0}}
    (row,) = compare(a, b, ["VR r10"])
    assert row["seeds"] == [0, 1, 2] and row["per_seed"] == [2.0, 2.0, 1.0]
    # mean 5/3, sample std 1/sqrt(3): 5/3 ± t(0.975, 2) / 3 = 1.667 ± 1.434 -> [0.232, 3.101], borne out
    assert (row["low"], row["high"]) == (pytest.approx(0.232, abs=1e-3), pytest.approx(3.101, abs=1e-3))
    assert row["verdict"] == "borne out"


def test_paired_stored_reads_rows_and_names_the_flag_of_a_bad_file(tmp_path: Path) -> None:
    """paired_stored.seed_rows reads through convergence.read_stored: a condition's rows by seed, and each bad file
    refused with the option that named it (--a or --b), never a row silently dropped."""
    from benchmarks.paired_stored import seed_rows

    def stored(runs: object) -> Path:
        path = tmp_path / f"c{len(list(tmp_path.iterdir()))}.json"
        path.write_text(json.dumps({"experiment": "e", "runs": runs}))
        return path

    good = stored([{"condition": "A", "seed": 1, "test": {"VR r10": 3.0}}, {"condition": "B", "seed": 0, "test": {}}])
    assert seed_rows(good, "A", "--a") == {1: {"VR r10": 3.0}}
    with pytest.raises(SystemExit, match=r"--b .* holds no run of condition 'C'"):
        seed_rows(good, "C", "--b")
    with pytest.raises(SystemExit, match=r"--b .* has seed '1' and test of type dict"):  # a seed stored as text
        seed_rows(stored([{"condition": "A", "seed": "1", "test": {}}]), "A", "--b")
    with pytest.raises(SystemExit, match=r"--a .* holds 'A' seed 0 twice"):
        seed_rows(stored([{"condition": "A", "seed": 0, "test": {}}] * 2), "A", "--a")
    with pytest.raises(SystemExit, match=r"--a .*'runs' is not a list of rows"):
        seed_rows(stored({"A": 1}), "A", "--a")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(SystemExit, match=r"--b: .*bad.json:1: invalid JSON"):
        seed_rows(tmp_path / "bad.json", "A", "--b")


def test_tie_rate_counts_differences_in_queries_by_hand() -> None:
    """benchmarks/tie_rate.py: A − B as a whole number of queries, pairs at one seed apart from the rest."""
    from benchmarks.tie_rate import count_metrics, query_differences, summary

    def run(cond: str, seed: int, r1: float, r5: float) -> dict:
        return {"condition": cond, "seed": seed, "test": {"VCMR 0.5-r1": r1, "VCMR 0.5-r5": r5, "VR r1": 50.0}}

    # 200 queries: one query is 0.5 points
    runs = [run("A", 0, 20.0, 40.0), run("B", 0, 20.0, 39.5), run("A", 1, 21.5, 40.0), run("B", 1, 20.5, 41.0)]
    counts, ties = query_differences(runs, 200, count_metrics(1))
    # seed 0: A - B = 0; seed 1: +2 queries; other seeds: A0 - B1 = -1, B0 - A1 = -3 (VR r1 is not a count of moments)
    assert counts["same seed"] == {0: 1, 2: 1} and counts["other seeds"] == {-1: 1, -3: 1}
    assert ties == [{"A": "A", "B": "B", "seed": 0, "metric": "VCMR 0.5-r1", "value": 20.0}]
    assert summary(counts["same seed"]) == {"compared": 2, "at 0": 1, "mean at +-1": 0.0, "mean at +-2": 0.5,
                                           "within +-5": 2}
    counts5, _ = query_differences(runs, 200, count_metrics(5))
    assert counts5["same seed"] == {1: 1, -2: 1}
    with pytest.raises(SystemExit, match="not a whole number"):  # 433 queries: 0.5 points is no count
        query_differences(runs, 433, count_metrics(5))
