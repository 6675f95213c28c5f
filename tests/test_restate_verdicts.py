"""benchmarks/restate_verdicts.py: the 3-seed verdicts restated from stored per-seed results, checked by hand."""

from __future__ import annotations

import json

import pytest
from benchmarks.restate_verdicts import CLAIMS, RESULTS, restate


def test_a_between_conditions_claim_is_the_hand_computed_t_interval():
    # C = Psi − C = 1 at the recipe: per seed -(+1.77 on average); t(0.975, 2) = 4.302653
    r = restate("pr_recipe_ablations", "+PR (paper's weights, 160 epochs)", "+PR C=1 (160 epochs)", "VCMR 0.5-r1")
    runs = json.loads((RESULTS / "convergence_pr_recipe_ablations.json").read_text())["runs"]
    a = {x["seed"]: x["test"]["VCMR 0.5-r1"] for x in runs if x["condition"] == "+PR (paper's weights, 160 epochs)"}
    b = {x["seed"]: x["test"]["VCMR 0.5-r1"] for x in runs if x["condition"] == "+PR C=1 (160 epochs)"}
    d = [a[s] - b[s] for s in (0, 1, 2)]
    mean = sum(d) / 3
    sd = (sum((x - mean) ** 2 for x in d) / 2) ** 0.5
    assert r["n"] == 3 and r["mean"] == pytest.approx(mean) and r["std"] == pytest.approx(sd)
    assert r["low"] == pytest.approx(mean - 4.302653 * sd / 3**0.5, abs=1e-5)
    assert r["mean"] == pytest.approx(-1.77, abs=0.01) and r["verdict"] == "inconclusive"


def test_a_within_run_claim_pairs_two_metrics_of_the_same_run():
    r = restate("mvmr_table1_converge", "MMN", None, "NLVL 0.5-r1 − MVMR 0.5-r1")
    assert r["per_seed"] == pytest.approx([32.92, 36.38, 32.67], abs=1e-6)
    assert r["verdict"] == "borne out" and r["runs"] == 3


def test_every_listed_claim_resolves_against_the_stored_results():
    for _, name, a, b, metric in CLAIMS:
        r = restate(name, a, b, metric)
        assert r["n"] == 3, (name, a, b)


def test_an_unknown_condition_is_named_in_the_error():
    with pytest.raises(SystemExit, match="no runs of 'XML typo'"):
        restate("pr_recipe", "XML typo", "XML", "VCMR 0.5-r1")
