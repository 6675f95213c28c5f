from __future__ import annotations

from pathlib import Path

import pytest

from momentsearch.config import load_yaml_config
from momentsearch.data.synthetic import PRESETS, SyntheticConfig, load_preset
from momentsearch.errors import ConfigError


def test_presets_load() -> None:
    sizes = {p: load_preset(p).n_videos for p in PRESETS}
    assert sizes == {"tiny": 60, "small": 600, "converge": 300, "default": 2000, "large": 100_000, "charades": 6672, "charades_vo": 6672}
    assert load_preset("charades").source == "charades-sta" and all(not load_preset(p).source for p in PRESETS[:5])


def test_unknown_key_and_wrong_type_name_the_file(tmp_path: Path) -> None:
    p = tmp_path / "c.yaml"
    p.write_text("n_videos: 10\nnoize: 0.3\n")
    with pytest.raises(ConfigError, match=r"c.yaml: unknown key\(s\) \['noize'\]"):
        load_yaml_config(SyntheticConfig, p)
    p.write_text("n_videos: ten\n")
    with pytest.raises(ConfigError, match=r"c.yaml.n_videos: expected an integer, got 'ten'"):
        load_yaml_config(SyntheticConfig, p)
    p.write_text("oracle: {action: 0.7}\n")
    with pytest.raises(ConfigError, match="must sum to 1"):
        load_yaml_config(SyntheticConfig, p)
    p.write_text("video_duration: [20, 150]\nsplits: {train: 1.0}\n")
    cfg = load_yaml_config(SyntheticConfig, p)
    assert cfg.video_duration == (20.0, 150.0) and cfg.splits == {"train": 1.0}


def test_unknown_preset() -> None:
    with pytest.raises(ConfigError, match="unknown preset 'huge'"):
        load_preset("huge")


def test_exponent_floats_without_a_dot_are_numbers(tmp_path: Path) -> None:
    """YAML 1.1 (PyYAML) reads `1e-4` and `1e-06` as strings; JSON and YAML 1.2 read numbers. A run's own
    train_config.json (json.dumps writes 1e-06) must load back as the config that made it, and `lr: 1e-4` is
    what users write."""
    import json

    from momentsearch.api.training import load_train_config
    from momentsearch.config import to_dict

    cfg = load_train_config("configs/xml/converge.yaml", {"dataset": {"benchmark": "b"}, "lr": 1e-4,
                                                                "model": {"relevance": {"floor": 1e-6}}})
    p = tmp_path / "train_config.json"
    p.write_text(json.dumps(to_dict(cfg), indent=2))
    assert '"floor": 1e-06' in p.read_text() and '"lr": 0.0001' in p.read_text()
    back = load_train_config(p)
    assert back == cfg and back.model.relevance.floor == 1e-6
    y = tmp_path / "c.yaml"
    y.write_text("n_videos: 10\nnoise: 2e-1\n")
    assert load_yaml_config(SyntheticConfig, y).noise == pytest.approx(0.2)
    y.write_text("n_videos: 1e1\n")  # a float is still not an integer
    with pytest.raises(ConfigError, match=r"n_videos: expected an integer, got 10.0"):
        load_yaml_config(SyntheticConfig, y)
