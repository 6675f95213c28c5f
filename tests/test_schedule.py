"""Schedules over epochs for every family: learning-rate milestones, model-config floats from given
epochs on, gradient clipping with the norm logged; a resumed run continues on the same schedule."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import torch
from tests.test_xml_training import tiny_cfg

from momentsearch.config import from_dict, to_dict
from momentsearch.errors import ConfigError
from momentsearch.models.mmn.config import MMNConfig
from momentsearch.training.config import TrainConfig
from momentsearch.training.schedule import lr_factor, model_config_at
from momentsearch.training.trainer import Trainer


def test_lr_factor_and_model_config_by_hand() -> None:
    assert [lr_factor(e, [2, 4], 0.5) for e in range(6)] == [1, 1, 0.5, 0.5, 0.25, 0.25]
    base = MMNConfig()
    sched = {"lambda_rmm": [[3, 0.01], [5, 0.001]], "tau_q": [[0, 0.2]]}
    assert model_config_at(base, sched, 0) == dataclasses.replace(base, tau_q=0.2)
    assert model_config_at(base, sched, 4).lambda_rmm == 0.01 and model_config_at(base, sched, 9).lambda_rmm == 0.001
    assert model_config_at(base, {}, 3) is base


@pytest.mark.parametrize(("schedule", "message"), [
    ({"lambda_rmmm": [[1, 0.1]]}, "not a float setting of the MMNConfig"),
    ({"hidden": [[1, 32]]}, "not a float setting"),
    ({"lambda_rmm": []}, "expected a list of"),
    ({"lambda_rmm": [[1.5, 0.1]]}, "must be \\[epoch"),
    ({"lambda_rmm": [[1, float("nan")]]}, "finite number"),
    ({"lambda_rmm": [[1, 10**400]]}, "finite number"),
    ({"lambda_rmm": [[3, 0.1], [2, 0.2]]}, "must be >= 0 and rise"),
])
def test_bad_schedules_name_the_key(tmp_path: Path, schedule: dict, message: str) -> None:
    d = {"dataset": {"benchmark": str(tmp_path)}, "model": {"name": "mmn"}, "weight_schedule": schedule}
    with pytest.raises(ConfigError, match=message):
        from_dict(TrainConfig, d)
    with pytest.raises(ConfigError, match="lr_gamma in"):
        from_dict(TrainConfig, {**d, "weight_schedule": {}, "lr_gamma": 0.0})


def _scheduled(bench: Path, out: Path, epochs: int) -> TrainConfig:
    cfg = tiny_cfg(bench, out, epochs)
    return dataclasses.replace(cfg, lr_milestones=[1, 2], lr_gamma=0.5, max_grad_norm=0.5,
                               weight_schedule={"lambda_tl": [[1, 0.0]]})


@pytest.mark.slow
def test_trainer_follows_the_schedules_and_resumes_on_them(tiny_benchmark: Path, tmp_path: Path) -> None:
    tr = Trainer(_scheduled(tiny_benchmark, tmp_path / "a", 3), progress=False)
    tr.fit(until=1)
    shutil.copytree(tr.ckpt_dir, tmp_path / "b" / "checkpoints")  # the run as if stopped after epoch 1
    tr.fit()
    h = tr.history
    assert [r["lr"] for r in h] == [1e-3, 5e-4, 2.5e-4]
    # lambda_tl 0.1 in epoch 1, then 0: the loss is the ranking loss alone
    assert h[0]["loss"] == pytest.approx(h[0]["loss_vr"] + 0.1 * h[0]["loss_tl"], rel=1e-5)
    assert h[1]["loss"] == pytest.approx(h[1]["loss_vr"], rel=1e-6) and h[1]["loss_tl"] > 0
    assert all(r["grad_norm_max"] >= r["grad_norm"] > 0 for r in h)
    assert tr.family.cfg.lambda_tl == 0.0 and tr.base_model_cfg.lambda_tl == 0.1
    # stopped after epoch 1 and resumed: the same weights as the straight run
    resumed = Trainer(_scheduled(tiny_benchmark, tmp_path / "b", 3), progress=False)
    assert resumed.resume()
    resumed.fit()
    assert [r["lr"] for r in resumed.history] == [1e-3, 5e-4, 2.5e-4]
    full = tr.model.state_dict()
    for k, v in resumed.model.state_dict().items():
        assert torch.equal(v, full[k]), k
    # the schedule is part of the stored config
    assert to_dict(resumed.cfg)["weight_schedule"] == {"lambda_tl": [[1, 0.0]]}


@pytest.mark.slow
def test_checkpoint_last_keeps_the_last_epoch_not_the_best(tiny_benchmark: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """``checkpoint: last`` (a fixed budget, no selection on validation: issue 42 item 5) makes best.pt the last
    epoch's model; the default keeps the epoch of the best selection score (here, made to fall: epoch 1)."""
    import momentsearch.training.trainer as trainer_module
    from momentsearch.serving.checkpoint import StoredCheckpoint

    falling = iter(range(100, 0, -1))
    monkeypatch.setattr(trainer_module, "selection_score", lambda metrics: float(next(falling)))
    for mode, want in (("best", 0), ("last", 1)):
        cfg = dataclasses.replace(tiny_cfg(tiny_benchmark, tmp_path / mode, 2), checkpoint=mode)
        tr = Trainer(cfg, progress=False)
        tr.fit()
        best, last = (StoredCheckpoint.read(tr.ckpt_dir / f) for f in ("best.pt", "last.pt"))
        assert (best.header.epoch, last.header.epoch) == (want, 1)
        same = all(torch.equal(a, b) for a, b in zip(best.model.values(), last.model.values(), strict=True))
        assert same == (mode == "last")
    with pytest.raises(ConfigError, match="checkpoint must be best or last"):
        from_dict(TrainConfig, {"dataset": {"benchmark": str(tmp_path)}, "model": {"name": "xml"}, "checkpoint": "mid"})
