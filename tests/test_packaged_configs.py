"""Every YAML shipped in momentsearch/configs/ is a valid config of its kind, and every condition of every
packaged experiment resolves to a valid training config (a typo in a long experiment is caught here, not an
hour into its runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from momentsearch.config import CONFIG_DIR, from_dict, load_yaml_config, read_yaml
from momentsearch.data.synthetic import load_preset
from momentsearch.errors import ConfigError
from momentsearch.experiments import ExperimentConfig, run_config
from momentsearch.training.config import TrainConfig

FAMILIES = ("xml", "minute", "mmn", "span")
TRAIN_YAMLS = sorted(p for f in FAMILIES for p in (CONFIG_DIR / f).glob("*.yaml"))
EXPERIMENT_YAMLS = sorted((CONFIG_DIR / "experiments").glob("*.yaml"))


def test_the_lists_are_not_empty() -> None:
    # the globs below would pass vacuously if the configs moved
    assert len(TRAIN_YAMLS) >= 15 and len(EXPERIMENT_YAMLS) >= 10
    assert {p.parent.name for p in CONFIG_DIR.glob("*/*.yaml")} == {*FAMILIES, "experiments", "synthetic"}


@pytest.mark.parametrize("path", TRAIN_YAMLS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_training_config_loads(path: Path) -> None:
    d = read_yaml(path)
    d.setdefault("dataset", {"benchmark": "runs/bench"})  # experiment bases leave it to the runner
    cfg = from_dict(TrainConfig, d, str(path))
    family = {"cet": "span", "bet": "span"}.get(d["model"]["name"], d["model"]["name"])
    assert cfg.epochs > 0 and type(cfg.model).__name__.lower() == f"{family}config"


@pytest.mark.parametrize("path", sorted((CONFIG_DIR / "synthetic").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_synthetic_preset_loads(path: Path) -> None:
    assert load_preset(str(path)).n_videos > 0


@pytest.mark.parametrize("path", EXPERIMENT_YAMLS, ids=lambda p: p.stem)
def test_every_experiment_condition_is_a_valid_run(path: Path, tmp_path: Path) -> None:
    exp = load_yaml_config(ExperimentConfig, path)
    tables = {name: tmp_path / name for name in exp.tables}
    digests = set()
    for cond in exp.conditions:
        d = run_config(exp, cond, exp.seeds[0], tmp_path / "bench", tables, tmp_path / "runs")
        assert d["seed"] == exp.seeds[0]
        digests.add(Path(d["out_dir"]).parent.name)
    # two conditions with one resolved config would share a run folder and silently report one model twice
    assert len(digests) == len(exp.conditions), f"{path.name}: conditions that resolve to the same run"


def test_a_bad_condition_is_refused_with_its_name(tmp_path: Path) -> None:
    p = tmp_path / "e.yaml"
    p.write_text("name: e\npreset: tiny\ntrain: configs/xml/experiment.yaml\n"
                 "conditions:\n  ok: {}\n  typo: {model: {relevence: {theta: 0.5}}}\n")
    exp = load_yaml_config(ExperimentConfig, p)
    run_config(exp, "ok", 0, tmp_path / "bench", {}, tmp_path / "runs")
    with pytest.raises(ConfigError, match="relevence"):
        run_config(exp, "typo", 0, tmp_path / "bench", {}, tmp_path / "runs")
