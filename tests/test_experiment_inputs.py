"""A run records what it was trained on (experiments/inputs.py) and is refused over other inputs."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import xml_experiment
from momentsearch.data.synthetic import generate, load_preset
from momentsearch.errors import ConfigError
from momentsearch.experiments import run_experiment
from momentsearch.experiments.inputs import check_inputs, content_digest, run_inputs


def test_digests_are_of_contents_not_of_write_times(tmp_path):
    a, b, c = (tmp_path / f"{n}.npz" for n in "abc")
    np.savez(a, x=np.arange(6, dtype=np.float32).reshape(2, 3), y=np.array([1], np.int64))
    np.savez(b, y=np.array([1], np.int64), x=np.arange(6, dtype=np.float32).reshape(2, 3))  # other order
    np.savez(c, x=np.arange(6, dtype=np.float32).reshape(3, 2), y=np.array([1], np.int64))  # other shape
    assert a.read_bytes() != b.read_bytes()
    assert content_digest(a) == content_digest(b) != content_digest(c)
    h = [tmp_path / f"{n}.h5" for n in range(3)]
    for i, p in enumerate(h):
        with h5py.File(p, "w", track_times=True) as f:
            f.create_dataset("v", data=np.full((5, 4), 1.0 if i < 2 else 2.0, np.float32))
            f["v"].attrs["clip_length"] = 2.0
    assert content_digest(h[0]) == content_digest(h[1]) != content_digest(h[2])
    for p, names in ((h[0], ["a", "bb"]), (h[1], ["a", "bb"]), (h[2], ["a", "bc"])):  # variable-length strings
        with h5py.File(p, "a") as f:
            f.create_dataset("ids", data=names, dtype=h5py.string_dtype())
    assert content_digest(h[0]) == content_digest(h[1])
    with h5py.File(h[2], "a") as f:
        f["v"][...] = 1.0
    assert content_digest(h[0]) != content_digest(h[2])  # only the strings differ now
    with h5py.File(h[1], "a") as f:
        f["v"].attrs["clip_length"] = 1.5  # an attribute is content too
    assert content_digest(h[0]) != content_digest(h[1])


def test_check_inputs_records_a_new_run_and_refuses_a_changed_one(tiny_benchmark: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    cfg = {"dataset": {"benchmark": str(tiny_benchmark)}, "model": {"name": "xml"}}
    check_inputs(run, cfg, record=False)  # an older run: nothing known, nothing written
    assert not (run / "inputs.json").exists()
    check_inputs(run, cfg, record=True)
    assert json.loads((run / "inputs.json").read_text()) == run_inputs(cfg)
    check_inputs(run, cfg, record=False)
    table = tmp_path / "t"
    np.savez(tmp_path / "t.phi.npz", x=np.ones(3))
    (tmp_path / "t.stats.json").write_text("{}")  # a report, left out
    with_table = {**cfg, "model": {"name": "xml", "relevance": {"table": str(table)}}}
    assert set(run_inputs(with_table)) == {"benchmark", "table:relevance.table"}
    with pytest.raises(ConfigError, match=r"table:relevance.table changed.*move the run folder aside"):
        check_inputs(run, with_table, record=True)
    with pytest.raises(ConfigError, match="no files with the prefix"):
        run_inputs({**cfg, "model": {"name": "xml", "relevance": {"table": str(tmp_path / "missing")}}})
    (run / "inputs.json").write_text("{")
    with pytest.raises(ConfigError, match="inputs.json:1: invalid JSON"):
        check_inputs(run, cfg, record=False)
    (run / "inputs.json").write_text('{"benchmark": [1]}')
    with pytest.raises(ConfigError, match="'benchmark' is list, expected a digest string"):
        check_inputs(run, cfg, record=False)


def test_a_proxy_table_named_by_its_file_is_digested_with_its_parts(tiny_benchmark: Path, tmp_path: Path) -> None:
    """A text proxy's table is named by its .npz (``{kind: proxy}``: relevance.table ends in .npz); its parts share
    the stem. It was refused as "no files with the prefix" (the glob looked for NAME.npz.*), which stopped every
    run of Wray's thresholds on a proxy inside ``momentsearch experiment``."""
    np.savez(tmp_path / "proxy_bow.npz", s=np.ones(3))
    np.savez(tmp_path / "proxy_bow.qq.npz", s=np.ones(2))
    (tmp_path / "proxy_bow.stats.json").write_text("{}")  # a report, left out
    cfg = {"dataset": {"benchmark": str(tiny_benchmark)},
           "model": {"name": "xml", "relevance": {"table": str(tmp_path / "proxy_bow.npz")}}}
    first = run_inputs(cfg)["table:relevance.table"]
    (tmp_path / "proxy_bow.stats.json").write_text('{"changed": 1}')
    assert run_inputs(cfg)["table:relevance.table"] == first
    np.savez(tmp_path / "proxy_bow.qq.npz", s=np.zeros(2))  # a part of the table changed
    assert run_inputs(cfg)["table:relevance.table"] != first
    np.savez(tmp_path / "proxy_bow.npz", s=np.zeros(3))
    assert run_inputs(cfg)["table:relevance.table"] != first


@pytest.mark.slow
def test_a_run_over_a_regenerated_benchmark(tiny_benchmark: Path, tmp_path: Path) -> None:
    """Generated again from the same config, the benchmark is the same input and the run is kept; generated
    with other feature noise, the stored run is refused instead of being reported or resumed over other data."""
    bench = tmp_path / "bench"
    shutil.copytree(tiny_benchmark, bench)
    cfg = xml_experiment(tmp_path, bench)
    first = run_experiment(cfg, jobs=1)["XML"]["VCMR 0.5-r10"]["runs"]
    recorded = next((tmp_path / "runs").glob("*/seed0/inputs.json"))
    stamp = recorded.stat().st_mtime_ns
    generate(load_preset("tiny"), bench, progress=False)  # the same config: the same contents, new files
    assert run_experiment(cfg, jobs=1)["XML"]["VCMR 0.5-r10"]["runs"] == first
    assert recorded.stat().st_mtime_ns == stamp
    tiny = load_preset("tiny")  # other feature noise: the same captions (no encoding), other features
    generate(replace(tiny, noise=tiny.noise + 0.2), bench, progress=False)
    with pytest.raises(ConfigError, match="benchmark changed"):
        run_experiment(cfg, jobs=1)
    assert (recorded.parent / "result.json").exists()  # nothing stored is lost
