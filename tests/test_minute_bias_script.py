"""benchmarks/minute_bias.py's paired statistics and report, on hand-made per-seed results (no model)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmarks.minute_bias import KS, paired_contrasts, paired_gain, report

from momentsearch.evaluation.bias import bin_labels

METRICS = ("VR r@K", "VCMR 0.5-r1", "VCMR 0.5-r10", "VCMR 0.7-r1")


def run(r1_k1: float, r1_k100: float, top_video: float) -> dict[str, object]:
    ramp = [r1_k1 + (r1_k100 - r1_k1) * i / (len(KS) - 1) for i in range(len(KS))]
    ranks = [top_video] + [(100.0 - top_video) / (len(bin_labels()) - 1)] * (len(bin_labels()) - 1)
    return {"recall": {m: ramp for m in METRICS}, "ranks": {"top-1 moment's video": ranks, "correct video": ranks}}


PER_SEED = {
    "XML": [run(40, 40, 80), run(42, 43, 82), run(38, 38, 79)],
    "MINUTE (Shared-Norm, Eq. 13)": [run(20, 30, 50), run(22, 29, 52), run(21, 33, 49)],
    "MINUTE (two-stage, Eqs. 5-7)": [run(20, 24, 75), run(22, 25, 77), run(21, 24, 74)],
}


def test_the_gain_with_k_is_paired_by_seed_with_its_t_interval():
    g = paired_gain(PER_SEED)["MINUTE (Shared-Norm, Eq. 13)"]
    assert g.diffs == pytest.approx((10, 7, 12))
    assert g.mean == pytest.approx(29 / 3) and g.std == pytest.approx(2.5166, abs=1e-4)
    # t(0.975, 2) = 4.302653: 29/3 ± 4.302653 * 2.5166 / sqrt 3
    assert g.low == pytest.approx(3.4150, abs=1e-3) and g.verdict == "borne out"
    assert paired_gain(PER_SEED)["XML"].verdict == "inconclusive"  # +0, +1, +0


def test_the_contrasts_are_shared_norm_against_two_stage_and_each_against_xml():
    c = paired_contrasts(PER_SEED)
    assert list(c) == ["MINUTE (Shared-Norm, Eq. 13) − MINUTE (two-stage, Eqs. 5-7)",
                       "MINUTE (Shared-Norm, Eq. 13) − XML", "MINUTE (two-stage, Eqs. 5-7) − XML"]
    # Shared-Norm's top-1 moments come from the top video 50, 52, 49 % of the time, two-stage's 75, 77, 74 %
    below = c["MINUTE (Shared-Norm, Eq. 13) − MINUTE (two-stage, Eqs. 5-7)"]["top-1 from below the top video (%)"]
    assert below.diffs == pytest.approx((25, 25, 25)) and below.verdict == "borne out"


def test_the_report_names_its_files_after_the_experiment(tmp_path, monkeypatch):
    import benchmarks.minute_bias as mb

    monkeypatch.setattr(mb, "ROOT", tmp_path)
    (tmp_path / "benchmarks" / "results").mkdir(parents=True)
    report(PER_SEED, tmp_path / "out", tmp_path / "figures", "some_exp")
    assert (tmp_path / "figures" / "some_exp_bias_recall_by_k.png").stat().st_size > 0
    assert (tmp_path / "figures" / "some_exp_bias_top1_rank.png").stat().st_size > 0
    saved = json.loads((tmp_path / "benchmarks" / "results" / "bias_some_exp.json").read_text())
    assert saved == json.loads((tmp_path / "out" / "bias.json").read_text())
    assert saved["paired"]["MINUTE (Shared-Norm, Eq. 13)"]["verdict"] == "borne out"
    assert "borne out" in (tmp_path / "out" / "bias.md").read_text()


def test_each_seed_is_read_at_the_end_of_its_chain_of_continuations(tmp_path):
    from argparse import Namespace

    from benchmarks.minute_bias import chain_checkpoint
    from tests.test_continuation import _finished, _history, _line

    from momentsearch.experiments import Continuation, run_digest

    d = {"epochs": 12, "seed": 1, "model": {"name": "xml"}, "out_dir": ""}
    run12 = tmp_path / run_digest(d) / "seed1"
    d["out_dir"] = str(run12)
    _finished(run12, d, _line(12))  # VR still rising at 12 epochs
    (run12 / "checkpoints").mkdir()
    (run12 / "checkpoints" / "best.pt").write_bytes(b"12")
    cont, flags = Continuation(step=8, max_epochs=30), Namespace(continue_rising=8, max_epochs=30)
    assert chain_checkpoint(d, None, "XML seed 1", Path("e.yaml"), flags) == run12 / "checkpoints" / "best.pt"
    with pytest.raises(SystemExit, match="XML seed 1 still rises at 12 epochs and its continuation to 20 has not "
                                         "finished; run `momentsearch experiment e.yaml --continue-rising 8 "
                                         "--max-epochs 30` first"):
        chain_checkpoint(d, cont, "XML seed 1", Path("e.yaml"), flags)
    longer = {**d, "epochs": 20, "out_dir": ""}
    run20 = tmp_path / run_digest(longer) / "seed1"
    _finished(run20, {**longer, "out_dir": str(run20)}, _history([30.0 + i % 2 for i in range(20)], [5.0] * 20))
    with pytest.raises(SystemExit, match="XML seed 1 has no best checkpoint"):
        chain_checkpoint(d, cont, "XML seed 1", Path("e.yaml"), flags)
    (run20 / "checkpoints").mkdir()
    (run20 / "checkpoints" / "best.pt").write_bytes(b"20")
    assert chain_checkpoint(d, cont, "XML seed 1", Path("e.yaml"), flags) == run20 / "checkpoints" / "best.pt"
