"""benchmarks/cmans_budget.py: CM-ANS − control rows read back by budget, on hand-made rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.cmans_budget import budget_rows, main, table


def _row(a: str, b: str, n: int, metric: str, mean: float, low: float, high: float, verdict: str) -> dict:
    return {"versus": f"CM-ANS a={a} b={b}, {n} epochs − control, {n} epochs at lr x 0.1", "metric": metric,
            "mean": mean, "std": 1.0, "low": low, "high": high, "n": 5, "verdict": verdict, "per_seed": []}


ROWS = [
    _row("50", "-0.1", 3, "MVMR 0.5-r1", -0.5, -1.5, 0.5, "inconclusive"),
    _row("50", "-0.1", 12, "MVMR 0.5-r1", 2.0, 0.5, 3.5, "borne out"),
    _row("10", "0", 3, "MVMR 0.5-r1", -2.0, -3.0, -1.0, "refuted"),
    _row("10", "0", 3, "VCMR 0.5-r1", 9.0, 8.0, 10.0, "borne out"),  # a metric not asked for
    {"versus": "RMMN† (grade 1) − MMN", "metric": "MVMR 0.5-r1", "mean": 0.0, "low": -1, "high": 1,
     "verdict": "inconclusive"},  # not a CM-ANS − control row
]


def test_rows_are_grouped_by_metric_and_setting_and_keyed_by_budget():
    rows = budget_rows(ROWS, ("MVMR 0.5-r1",))
    assert set(rows) == {("MVMR 0.5-r1", "a=50 b=-0.1"), ("MVMR 0.5-r1", "a=10 b=0")}
    assert sorted(rows[("MVMR 0.5-r1", "a=50 b=-0.1")]) == [3, 12]
    assert rows[("MVMR 0.5-r1", "a=10 b=0")][3]["mean"] == -2.0


def test_the_table_has_a_column_per_budget_and_names_decided_cells():
    text = table(budget_rows(ROWS, ("MVMR 0.5-r1",))).splitlines()
    assert text[0] == "| metric | CM-ANS | 3 epochs | 12 epochs |"
    assert text[2] == "| MVMR 0.5-r1 | a=10 b=0 | -2.00 [-3.00, -1.00] **refuted** |  |"  # a as a number: 10 < 50
    assert text[3] == "| MVMR 0.5-r1 | a=50 b=-0.1 | -0.50 [-1.50, +0.50] | +2.00 [+0.50, +3.50] **borne out** |"


def test_no_matching_rows_is_an_error_that_says_what_to_run():
    with pytest.raises(SystemExit, match="run benchmarks/convergence.py"):
        budget_rows(ROWS[-1:])


def test_main_writes_the_figure(tmp_path: Path, capsys):
    src = tmp_path / "c.json"
    src.write_text(json.dumps({"versus": ROWS}))
    fig = tmp_path / "f.png"
    main(["--json", str(src), "--figure", str(fig), "--metric", "MVMR 0.5-r1"])
    assert fig.stat().st_size > 5000 and fig.read_bytes()[:4] == b"\x89PNG"
    assert "a=50 b=-0.1" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="not found"):
        main(["--json", str(tmp_path / "missing.json")])
