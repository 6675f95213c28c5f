"""benchmarks/transfer_table.py's shift between two realisations of one experiment: the second's per-seed A − B minus
the first's, matched by seed (not by position), with the t interval of the paired mean (hand-computed)."""

from __future__ import annotations

import pytest
from benchmarks.transfer_table import _shift


def cell(seeds: list[int], per_seed: list[float]) -> dict:
    return {"seeds": seeds, "per_seed": per_seed}


def test_the_shift_is_paired_by_seed_over_the_seeds_both_hold() -> None:
    # shared seeds 1 and 2: shifts 2.5 - 2.0 = 0.5 and 4.0 - 3.0 = 1.0; mean 0.75, sd sqrt(0.125) = 0.35355,
    # t(0.975, 1) = 12.7062: half width 12.7062 * 0.35355 / sqrt(2) = 3.1766
    s = _shift(cell([0, 1, 2], [1.0, 2.0, 3.0]), cell([2, 1, 3], [4.0, 2.5, 9.0]))
    assert s["seeds"] == [1, 2] and s["n"] == 2
    assert s["mean"] == pytest.approx(0.75) and s["std"] == pytest.approx(0.353553, abs=1e-6)
    assert (s["low"], s["high"]) == (pytest.approx(-2.4266, abs=1e-4), pytest.approx(3.9266, abs=1e-4))
    assert s["excludes 0"] is False


def test_a_shift_whose_interval_excludes_0() -> None:
    # shifts 1.0, 1.1, 0.9: mean 1.0, sd 0.1, t(0.975, 2) = 4.3027: half width 4.3027 * 0.1 / sqrt(3) = 0.24841
    s = _shift(cell([0, 1, 2], [0.0, 0.0, 0.0]), cell([0, 1, 2], [1.0, 1.1, 0.9]))
    assert (s["low"], s["high"]) == (pytest.approx(0.75159, abs=1e-4), pytest.approx(1.24841, abs=1e-4))
    assert s["excludes 0"] is True


def test_no_shift_where_a_realisation_did_not_run() -> None:
    assert _shift(None, cell([0], [1.0])) is None and _shift(cell([0], [1.0]), None) is None
