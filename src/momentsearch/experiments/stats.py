"""The statistics every verdict carries (issue 42): paired differences with a 95 % interval, the verdict rule, and
the trend test that says whether a run has converged.

**A verdict.** For a claim "A beats B" on a metric, over seeds paired by seed (the same seed: the same
initialisation and batch order), d_s = A_s - B_s. The report gives the mean of d, its sample standard deviation,
n and the two-sided 95 % t interval mean ± t(0.975, n-1) sd / sqrt(n). The claim is **borne out** when the whole
interval is above 0, **refuted** when it is below 0, and **inconclusive** otherwise (with fewer than 2 seeds:
inconclusive). Five seeds where three do not decide.

**Convergence.** A run has converged on a validation metric when, over the last ``window`` epochs, the least-
squares slope of the metric against the epoch is not significantly positive: the one-sided t test of slope > 0
has p >= 0.05 (equivalently, the lower end of the two-sided 90 % interval of the slope is <= 0). A run whose
curve is still rising by this test is continued (or reported as not converged).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Paired:
    mean: float
    std: float
    n: int
    low: float  # the 95 % t interval of the mean difference
    high: float
    diffs: tuple[float, ...]

    @property
    def verdict(self) -> str:
        if self.n < 2 or not (math.isfinite(self.low) and math.isfinite(self.high)):
            return "inconclusive"
        return "borne out" if self.low > 0 else "refuted" if self.high < 0 else "inconclusive"

    def as_dict(self) -> dict[str, object]:
        """The JSON form a report stores: the statistics, the verdict and the per-seed differences."""
        return {"mean": self.mean, "std": self.std, "n": self.n, "low": self.low, "high": self.high,
                "verdict": self.verdict, "per_seed": list(self.diffs)}

    def cell(self) -> str:
        """``+3.93 ± 2.05 [-1.16, 9.02]``: mean ± sd of the per-seed differences, then the 95 % interval."""
        return f"{self.mean:+.2f} ± {self.std:.2f} [{self.low:+.2f}, {self.high:+.2f}]"


def paired(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> Paired:
    """a - b paired by seed (the same seed order) with the two-sided t interval of the mean difference."""
    from scipy import stats

    d = np.asarray(a, float) - np.asarray(b, float)
    n = len(d)
    mean = float(d.mean()) if n else float("nan")
    sd = float(d.std(ddof=1)) if n > 1 else 0.0
    if n < 2:
        return Paired(mean, sd, n, float("-inf"), float("inf"), tuple(d.tolist()))
    half = float(stats.t.ppf(0.5 + level / 2, n - 1)) * sd / math.sqrt(n)
    return Paired(mean, sd, n, mean - half, mean + half, tuple(d.tolist()))


@dataclass(frozen=True)
class Trend:
    slope: float  # metric points per epoch over the window
    p_rising: float  # one-sided p of slope > 0
    window: int

    @property
    def converged(self) -> bool:
        return self.p_rising >= 0.05


@dataclass(frozen=True)
class Bootstrap:
    """A two-level bootstrap interval of a paired mean difference (issue 75 part 4): what it covers is a new
    draw of training seeds **and** of test queries, where the t interval of :func:`paired` covers seeds alone."""

    mean: float
    low: float
    high: float
    level: float
    resamples: int

    @property
    def verdict(self) -> str:
        return "borne out" if self.low > 0 else "refuted" if self.high < 0 else "inconclusive"


def two_level_bootstrap(a: np.ndarray, b: np.ndarray, resamples: int = 10_000, level: float = 0.95,
                        seed: int = 0) -> Bootstrap:
    """``a``, ``b``: (S, Q) per-query scores (e.g. 100 x hit at rank 1) of two conditions, paired by seed (rows)
    and by query (columns). Each resample draws S seeds and Q queries with replacement (the same draw for both
    conditions: the pairing is kept) and takes the mean of a - b over them; the interval is the percentile one."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape or a.ndim != 2 or min(a.shape) < 1:
        raise ValueError(f"two (seeds, queries) arrays of one shape, got {a.shape} and {b.shape}")
    d = a - b
    s, q = d.shape
    rng = np.random.default_rng(seed)
    out = np.empty(resamples)
    for r in range(resamples):
        rows = rng.integers(0, s, s)
        cols = rng.integers(0, q, q)
        out[r] = d[np.ix_(rows, cols)].mean()
    lo, hi = np.quantile(out, [(1 - level) / 2, (1 + level) / 2])
    return Bootstrap(float(d.mean()), float(lo), float(hi), level, resamples)


EQUIVALENCE_WINDOW = 20  # epochs: the least the equivalence rule looks at
EQUIVALENCE_TOLERANCE = 0.1  # points of recall per epoch: 2 points over the 20-epoch window


@dataclass(frozen=True)
class Flatness:
    """The equivalence rule (issue 75): a curve has converged when the upper end of the 90 % t interval of its
    least-squares slope over the last ``window`` epochs (at least :data:`EQUIVALENCE_WINDOW`) is below
    ``tolerance`` points per epoch. Unlike :class:`Trend`, a curve too noisy or too short to show that it is
    flat does not pass."""

    slope: float
    upper: float  # the upper end of the slope's 90 % t interval (one-sided 95 %)
    window: int
    tolerance: float

    @property
    def converged(self) -> bool:
        return self.window >= EQUIVALENCE_WINDOW and math.isfinite(self.upper) and self.upper < self.tolerance


def flatness(values: Sequence[float], window: int = EQUIVALENCE_WINDOW,
             tolerance: float = EQUIVALENCE_TOLERANCE) -> Flatness:
    """:class:`Flatness` of the last ``window`` values (fewer than ``window``: not converged)."""
    from scipy import stats

    if window < EQUIVALENCE_WINDOW:
        raise ValueError(f"the equivalence rule looks at {EQUIVALENCE_WINDOW} epochs or more, got {window}")
    y = np.asarray(values, float)[-window:]
    if len(y) < window:
        return Flatness(float("nan"), float("inf"), len(y), tolerance)
    if not np.isfinite(y).all():
        return Flatness(float("nan"), float("inf"), len(y), tolerance)
    x = np.arange(len(y), dtype=float) - (len(y) - 1) / 2
    sxx = float((x * x).sum())
    slope = float((x * (y - y.mean())).sum() / sxx)
    resid = y - y.mean() - slope * x
    se = math.sqrt(float((resid * resid).sum()) / (len(y) - 2) / sxx)  # (0 for a straight line)
    return Flatness(slope, slope + float(stats.t.ppf(0.95, len(y) - 2)) * se, len(y), tolerance)


def trend(values: Sequence[float], window: int = 10) -> Trend:
    """The least-squares slope of the last ``window`` values against their index, and the one-sided p of a rise."""
    from scipy import stats

    y = np.asarray(values, float)[-window:]
    if len(y) < 3:
        return Trend(float("nan"), 0.0, len(y))  # too short to say: not converged
    x = np.arange(len(y), dtype=float)
    fit = stats.linregress(x, y)
    if not math.isfinite(fit.stderr) or fit.stderr == 0:
        return Trend(float(fit.slope), 0.0 if fit.slope > 0 else 1.0, len(y))
    t = fit.slope / fit.stderr
    return Trend(float(fit.slope), float(stats.t.sf(t, len(y) - 2)), len(y))
