"""The verdict rule and the trend test (issue 42), by hand."""

from __future__ import annotations

import math

import pytest

from momentsearch.experiments.stats import paired, trend


def test_paired_t_interval_by_hand() -> None:
    """d = (1, 2, 3, 4, 5) - 0: mean 3, sd sqrt(2.5) = 1.5811; t(0.975, 4) = 2.7764; half-width 2.7764 x 1.5811 /
    sqrt(5) = 1.9632 -> [1.04, 4.96]: borne out."""
    p = paired([1, 2, 3, 4, 5], [0, 0, 0, 0, 0])
    assert (p.mean, p.n) == (3.0, 5) and p.std == pytest.approx(math.sqrt(2.5))
    assert (p.low, p.high) == (pytest.approx(3 - 1.96324, abs=1e-4), pytest.approx(3 + 1.96324, abs=1e-4))
    assert p.verdict == "borne out" and p.cell() == "+3.00 ± 1.58 [+1.04, +4.96]"
    assert p.as_dict() == {"mean": 3.0, "std": p.std, "n": 5, "low": p.low, "high": p.high, "verdict": "borne out",
                           "per_seed": [1.0, 2.0, 3.0, 4.0, 5.0]}
    # the issue's +PR at theta 0.9: +3.93 ± 2.05 over 3 seeds -> t(0.975, 2) = 4.3027 -> [-1.16, 9.02]
    q = paired([3.93 - 2.05, 3.93, 3.93 + 2.05], [0, 0, 0])
    assert q.low == pytest.approx(3.93 - 4.3027 * 2.05 / math.sqrt(3), abs=1e-3) and q.verdict == "inconclusive"
    assert paired([-3, -2, -4, -3, -3], [0] * 5).verdict == "refuted"
    assert paired([5], [1]).verdict == "inconclusive"  # one seed decides nothing


def test_trend_test_by_hand() -> None:
    rising = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19.5]
    flat = [20.1, 19.8, 20.3, 19.9, 20.0, 20.2, 19.7, 20.1, 20.0, 19.9]
    slow = [50 + 0.3 * i + (0.4 if i % 2 else -0.4) for i in range(10)]  # 0.3 points an epoch under noise of 0.4
    assert not trend(rising).converged and trend(rising).slope > 0.9
    assert trend(flat).converged and abs(trend(flat).slope) < 0.05
    assert not trend(slow).converged
    assert not trend([1, 2]).converged  # too short to say
    assert trend([5.0] * 10).converged  # exactly flat
