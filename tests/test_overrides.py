"""Overrides merge at every depth, on every path: YAML + overrides, a config object + overrides (the API),
experiment conditions and ``momentsearch train --set``. Overriding ``model.relevance.theta`` alone must
keep ``method`` and ``table`` (it once reset them to ``none`` and ``''``, training another model)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import momentsearch.api.training as api_training
from momentsearch.api import load_train_config
from momentsearch.cli.main import app
from momentsearch.config import merge, parse_set
from momentsearch.errors import ConfigError
from momentsearch.experiments import ExperimentConfig, run_config

THETA_ONLY = {"model": {"relevance": {"theta": 0.5}}}


@pytest.fixture
def pairs_yaml(tmp_path: Path) -> Path:
    """A training YAML whose relevance block is fully set, as a pairs run's is."""
    cfg = yaml.safe_load(Path(api_training.resolve_config("xml/experiment")).read_text())
    cfg["dataset"] = {"benchmark": str(tmp_path / "bench")}
    cfg["model"]["relevance"] = {"method": "pairs", "table": str(tmp_path / "pairs.npz"), "theta": 0.7,
                                 "lambda_vcmr": 1.0}
    p = tmp_path / "pairs.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def _assert_theta_only(rel, table: str) -> None:
    assert (rel.method, rel.table, rel.theta, rel.lambda_vcmr) == ("pairs", table, 0.5, 1.0)


def test_merge_keeps_siblings_at_every_depth_and_replaces_leaves() -> None:
    base = {"a": {"b": {"c": 1, "d": 2}, "e": [1, 2]}, "f": 3}
    over = {"a": {"b": {"c": 9}, "e": [7]}, "g": {"h": 1}}
    out = merge(base, over)
    assert out == {"a": {"b": {"c": 9, "d": 2}, "e": [7]}, "f": 3, "g": {"h": 1}}
    out["g"]["h"] = 5
    assert base == {"a": {"b": {"c": 1, "d": 2}, "e": [1, 2]}, "f": 3} and over["g"] == {"h": 1}
    assert merge(base, None) == base and merge(base, None) is not base
    assert merge({"a": 1}, {"a": {"b": 2}}) == {"a": {"b": 2}}  # a mapping over a scalar replaces it


def test_parse_set_reads_dotted_paths_and_yaml_values() -> None:
    got = parse_set(["model.relevance.theta=0.5", "model.relevance.method=pairs", "epochs=3", "amp=none",
                     "model.use_subtitle=false", "dataset.annotations={train: a.jsonl}", "out_dir='007'",
                     "epochs=4", "model.name = xml"])
    assert got == {"model": {"relevance": {"theta": 0.5, "method": "pairs"}, "use_subtitle": False, "name": "xml"},
                   "epochs": 4, "amp": "none", "dataset": {"annotations": {"train": "a.jsonl"}}, "out_dir": "007"}


@pytest.mark.parametrize(("text", "message"), [
    ("model.relevance.theta", "expected KEY.PATH=VALUE"),
    ("model..theta=1", "expected KEY.PATH=VALUE"),
    ("=1", "expected KEY.PATH=VALUE"),
    ("epochs=[1, 2", "the value: invalid YAML"),
])
def test_parse_set_says_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        parse_set([text])


def test_parse_set_refuses_a_path_through_a_value() -> None:
    with pytest.raises(ConfigError, match="model was set to a value above"):
        parse_set(["model=xml", "model.hidden=3"])


def test_yaml_path_overrides_one_nested_value(pairs_yaml: Path, tmp_path: Path) -> None:
    cfg = load_train_config(pairs_yaml, THETA_ONLY)
    _assert_theta_only(cfg.model.relevance, str(tmp_path / "pairs.npz"))
    assert cfg.model.hidden == 64 and cfg.epochs == 12  # untouched groups stay as the YAML has them


def test_config_object_path_overrides_one_nested_value(pairs_yaml: Path, tmp_path: Path) -> None:
    base = load_train_config(pairs_yaml)
    cfg = load_train_config(base, {**THETA_ONLY, "epochs": 2})
    _assert_theta_only(cfg.model.relevance, str(tmp_path / "pairs.npz"))
    assert cfg.epochs == 2 and load_train_config(base) is base


def test_api_train_trains_the_merged_config(pairs_yaml: Path, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    seen = []

    class Recorder:
        def __init__(self, cfg, progress=True):
            seen.append(cfg)

        def fit(self):
            pass

    monkeypatch.setattr(api_training, "Trainer", Recorder)
    api_training.train(pairs_yaml, THETA_ONLY, resume=False)
    api_training.train(load_train_config(pairs_yaml), THETA_ONLY, resume=False)
    assert len(seen) == 2
    for cfg in seen:
        _assert_theta_only(cfg.model.relevance, str(tmp_path / "pairs.npz"))


def test_experiment_condition_overrides_one_nested_value(pairs_yaml: Path, tmp_path: Path) -> None:
    exp = ExperimentConfig(name="t", preset="experiment", train=str(pairs_yaml),
                           conditions={"theta 0.5": THETA_ONLY})
    d = run_config(exp, "theta 0.5", 0, tmp_path / "bench", {}, tmp_path / "runs")
    rel = d["model"]["relevance"]
    assert (rel["method"], rel["table"], rel["theta"], rel["lambda_vcmr"]) == (
        "pairs", str(tmp_path / "pairs.npz"), 0.5, 1.0)


def test_cli_set_overrides_one_nested_value(pairs_yaml: Path, tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["train", str(pairs_yaml), "--set", "model.relevance.theta=0.5", "--set",
                                 "model.hidden=32", "--epochs", "3", "--print-config"])
    assert r.exit_code == 0, r.output
    shown = yaml.safe_load(r.output)
    rel = shown["model"]["relevance"]
    assert (rel["method"], rel["table"], rel["theta"], rel["lambda_vcmr"]) == (
        "pairs", str(tmp_path / "pairs.npz"), 0.5, 1.0)
    assert (shown["model"]["hidden"], shown["epochs"], shown["lr"]) == (32, 3, 0.001)


def test_cli_set_names_an_unknown_key(pairs_yaml: Path) -> None:
    r = CliRunner().invoke(app, ["train", str(pairs_yaml), "--set", "model.relevance.thta=0.5", "--print-config"])
    assert r.exit_code != 0
    assert "model.relevance: unknown key(s) ['thta']" in r.output + str(r.exception)
