"""The experiment runner: conditions x seeds from one YAML, a table and a PNG, finished runs kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from momentsearch.errors import ConfigError
from momentsearch.experiments import run_experiment
from momentsearch.version import source_commit


def _train_yaml(path: Path, val_max_queries: int = 20, model: str = "{name: xml, hidden: 32}") -> Path:
    """A one-epoch training config for the tiny benchmark."""
    path.write_text(f"epochs: 1\nbatch_size: 32\nlr: 0.001\nval_split: test\nval_max_queries: {val_max_queries}\n"
                    f"num_threads: 1\nmodel: {model}\n")
    return path


def _head(name: str, train: Path, bench: Path, out: Path, runs: Path, seeds: str = "[0]") -> str:
    """The start of an experiment YAML over the tiny benchmark (tables, conditions and the rest follow)."""
    return (f"name: {name}\npreset: tiny\ntrain: {train}\nbenchmark_dir: {bench}\nout_dir: {out}\n"
            f"runs_dir: {runs}\nseeds: {seeds}\n")


@pytest.mark.slow
def test_experiment_runs_conditions_over_seeds_and_resumes(tiny_benchmark: Path, tmp_path: Path) -> None:
    train = _train_yaml(tmp_path / "train.yaml", 40)
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(_head("t", train, tiny_benchmark, tmp_path / "out", tmp_path / "runs", "[0, 1]") + """tables:
  sent: {kind: pairs, detector: sent}
conditions:
  XML: {}
  +PR: {model: {relevance: {method: pairs, table: sent, theta: 0.6}}}
""")
    agg = run_experiment(cfg, jobs=1)
    assert list(agg) == ["XML", "+PR"]
    for row in agg.values():
        assert len(row["VCMR 0.5-r10"]["runs"]) == 2 and row["seconds_per_epoch"]["mean"] > 0
    assert agg["XML"]["pairs_per_batch"]["mean"] == 0 and agg["+PR"]["pairs_per_batch"]["mean"] > 0
    # seeds differ, so the spread is real
    assert agg["XML"]["nDCG VR"]["runs"][0] != agg["XML"]["nDCG VR"]["runs"][1]
    out = tmp_path / "out"
    md = (out / "results.md").read_text()
    assert (out / "results.png").stat().st_size > 1000 and "± " in md
    # TVR-Ranking's NDCG@K,IoU against the oracle: its own table, with paired differences
    assert md.count("NDCG@40 IoU0.7") == 1 and "| +PR − XML |" in md
    assert agg["XML"]["NDCG@10 IoU0.3"]["mean"] >= agg["XML"]["NDCG@10 IoU0.7"]["mean"] > 0
    saved = json.loads((out / "results.json").read_text())
    assert saved["conditions"]["+PR"]["VR r100"]["mean"] == agg["+PR"]["VR r100"]["mean"]
    results = sorted((tmp_path / "runs").glob("*/seed*/result.json"))
    assert len(results) == 4
    stamp = [p.stat().st_mtime for p in results]
    run_experiment(cfg, jobs=1)  # everything done: nothing retrained
    assert [p.stat().st_mtime for p in results] == stamp
    # a run stored before the every-S nDCG columns existed is evaluated once more; what it stored stays
    stored = json.loads(results[0].read_text())
    assert stored["eval_version"] == 2 and 0 < stored["metrics"]["nDCG VR 2-way"] <= 100
    assert stored["code"] == source_commit()  # the commit the run was made from
    added = {k: stored["metrics"].pop(k) for k in ("nDCG VR 2-way", "nDCG VCMR 0.5 S>0")}
    del stored["eval_version"]
    stored["metrics"]["VR r1"] = -1.0
    results[0].write_text(json.dumps(stored))
    run_experiment(cfg, jobs=1)
    again = json.loads(results[0].read_text())
    assert again["eval_version"] == 2 and again["metrics"]["VR r1"] == -1.0
    assert {k: again["metrics"][k] for k in added} == added
    with pytest.raises(ConfigError, match="no condition"):
        run_experiment(cfg, jobs=1, only=["+SL"])


@pytest.mark.slow
def test_a_longer_condition_continues_the_shorter_run(tiny_benchmark: Path, tmp_path: Path) -> None:
    """A run with more epochs starts from the finished shorter run of the same config and ends with the
    weights of a run trained from scratch (the trainer resumes exactly)."""
    import torch

    def experiment(name: str, epochs: int, runs: str) -> Path:
        cfg = tmp_path / f"{name}.yaml"
        cfg.write_text(_head(name, train, tiny_benchmark, tmp_path / name, tmp_path / runs) + f"""conditions:
  XML: {{epochs: {epochs}}}
""")
        run_experiment(cfg, jobs=1)
        return next((tmp_path / runs).glob("*/seed0/history.json")).parent if epochs == 1 else \
            next(p.parent for p in (tmp_path / runs).glob("*/seed0/history.json")
                 if len(json.loads(p.read_text())) == epochs)

    train = _train_yaml(tmp_path / "train.yaml", 40)
    short = experiment("short", 1, "runs")
    longer = experiment("longer", 3, "runs")  # continues `short`
    scratch = experiment("scratch", 3, "fresh")  # another runs folder: nothing to continue
    assert longer != short and (short / "result.json").exists()
    h_short, h_long, h_scratch = (json.loads((p / "history.json").read_text()) for p in (short, longer, scratch))
    assert h_long[0]["train_seconds"] == h_short[0]["train_seconds"]  # epoch 1 was copied, not retrained
    assert h_scratch[0]["train_seconds"] != h_short[0]["train_seconds"]
    a, b = (torch.load(p / "checkpoints" / "last.pt", weights_only=False)["model"] for p in (longer, scratch))
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert json.loads((longer / "result.json").read_text())["train_seconds"] > \
        json.loads((short / "result.json").read_text())["train_seconds"]


@pytest.mark.slow
def test_a_condition_fine_tunes_another_conditions_model(tiny_benchmark: Path, tmp_path: Path) -> None:
    """``init_from: <condition>`` starts each seed's run from that condition's best.pt of the same seed,
    trained first whatever the order of the conditions; chains are refused."""
    train = _train_yaml(tmp_path / "train.yaml")

    def experiment(conditions: str) -> Path:
        cfg = tmp_path / "exp.yaml"
        cfg.write_text(_head("f", train, tiny_benchmark, tmp_path / "out", tmp_path / "runs") +
                       f"conditions:\n{conditions}")
        return cfg

    agg = run_experiment(experiment("  tuned: {init_from: XML, lr: 0.0001}\n  XML: {}\n"), jobs=1)
    assert list(agg) == ["tuned", "XML"]
    configs = {json.loads(p.read_text())["lr"]: json.loads(p.read_text()) for p in (tmp_path / "runs").glob("*/seed0/train_config.json")}
    parent = Path(configs[0.001]["out_dir"]).resolve() / "checkpoints" / "best.pt"
    assert configs[0.0001]["init_from"] == str(parent) and parent.exists()
    with pytest.raises(ConfigError, match="itself starts from another condition"):
        run_experiment(experiment("  XML: {}\n  tuned: {init_from: XML}\n  again: {init_from: tuned}\n"), jobs=1)


def test_diagnosis_tables_at_two_thetas_get_their_own_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A table named after theta 0.7 must not share files with theta 0.9 (Path.with_suffix cuts at the dot)."""
    from momentsearch.experiments.tables import TableSpec, table_files
    from momentsearch.relevance import oracle_pairs

    for name in ("pairs_np-vp.queries.json", "pairs_np-vp.psi.npz", "oracle_train.queries.json", "oracle_train.qq.npz"):
        (tmp_path / name).write_text("")  # present: table_files does not recompute them

    def fake(detector: Path, oracle: Path, out: Path, theta: float, video_of: object) -> dict:
        for suffix in (".queries.json", ".psi.npz"):
            out.with_suffix(suffix).write_text(str(theta))
        return {}

    monkeypatch.setattr(oracle_pairs, "oracle_confidence", fake)
    a = table_files(tmp_path, tmp_path, TableSpec("oracle_confidence", "np-vp", theta=0.7), corpus=type("C", (), {"moments": []}))
    b = table_files(tmp_path, tmp_path, TableSpec("oracle_confidence", "np-vp", theta=0.9), corpus=type("C", (), {"moments": []}))
    assert a != b
    assert a.with_suffix(".psi.npz").read_text() == "0.7" and b.with_suffix(".psi.npz").read_text() == "0.9"


@pytest.mark.slow
def test_mvmr_experiment_adds_pool_and_retriever_columns(tiny_benchmark: Path, tmp_path: Path) -> None:
    xml = _train_yaml(tmp_path / "xml.yaml")
    mmn = _train_yaml(tmp_path / "mmn.yaml", model="{name: mmn, hidden: 16, joint_dim: 16, num_clips: 8, "
                      "conv_layers: 1, kernel_size: 3, n_heads: 2}")
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(_head("m", mmn, tiny_benchmark, tmp_path / "out", tmp_path / "runs") + f"""\
mvmr: {{n: 5, k: 3, t_pos: 0.8, t_neg: 0.5, retriever: XML, top_videos: 2}}
conditions:
  XML: {{train: {xml}}}
  MMN: {{}}
""")
    agg = run_experiment(cfg, jobs=1)
    for c in ("XML", "MMN"):
        row = agg[c]
        assert 0 <= row["NLVL 0.5-r1"]["mean"] <= 100 and 0 <= row["MVMR 0.5-r1"]["mean"] <= 100
        # a pool cut to 2 videos holds the gold video at most as often as the whole pool does
        assert row["top2 MVMR 0.5-r5"]["mean"] <= row["MVMR 0.5-r5"]["mean"] + 1e-9
    assert "The MVMR protocol" in (tmp_path / "out" / "results.md").read_text()
    from momentsearch.experiments.report import PLOT_COLUMNS, plot_columns

    assert plot_columns(agg)[:2] == ["NLVL 0.5-r1", "MVMR 0.5-r1"] and plot_columns(agg)[-1] == "top2 MVMR 0.5-r1"
    assert plot_columns({"XML": {"VCMR 0.5-r1": {}}}) == PLOT_COLUMNS
    assert (tmp_path / "out" / "results.png").stat().st_size > 1000
    stored = [json.loads(p.read_text()) for p in sorted((tmp_path / "runs").glob("*/seed0/result.json"))]
    assert all(len(r["mvmr"]) == 2 for r in stored)  # the pool row and the top-2 row, stored once
    pools = next((tiny_benchmark / "mvmr").glob("pools_test_n5_k3_*.txt"))
    assert pools.stat().st_size > 0
    with pytest.raises(ConfigError, match="mvmr.retriever"):
        bad = tmp_path / "bad.yaml"
        bad.write_text(cfg.read_text().replace("retriever: XML", "retriever: CET"))
        run_experiment(bad, jobs=1)


def test_top_of_pools_keeps_the_retrievers_best_videos(tiny_benchmark: Path) -> None:
    import numpy as np

    from momentsearch.api.mvmr import top_of_pools
    from momentsearch.data.mvmr import MVMRPools, Positive
    from momentsearch.data.synthetic import SyntheticBenchmark

    test = SyntheticBenchmark.load(tiny_benchmark).corpus.split("test")
    vids = list(test.videos)
    m = test.moments[0]
    pool = [m.video_id] + [v for v in vids if v != m.video_id][:4]
    pools = MVMRPools("p", test, {m.query_id: pool}, {m.query_id: [Positive(m.video_id, m.span, m.text)]})
    scores = np.zeros((len(test.moments), len(vids)))
    scores[0, vids.index(pool[3])], scores[0, vids.index(pool[1])] = 2.0, 1.0
    cut = top_of_pools(pools, scores, test, 2)
    assert cut.pools[m.query_id] == [pool[3], pool[1]] and cut.positives == pools.positives


def test_a_run_is_keyed_by_the_values_set_apart_from_the_defaults() -> None:
    """A setting written at its default (or an option added later, at its default) leaves the run's hash as it was;
    a value apart from the default, or another family, makes another run; where it trains does not."""
    from momentsearch.config import to_dict
    from momentsearch.data.dataset import DatasetConfig
    from momentsearch.experiments import run_digest
    from momentsearch.models.minute import MINUTEConfig
    from momentsearch.models.xml import XMLConfig
    from momentsearch.training.config import TrainConfig

    base = to_dict(TrainConfig(dataset=DatasetConfig(benchmark="/b"), model=XMLConfig()))
    base.update(seed=3, dataset={**base["dataset"], "benchmark": "/b"})
    key = run_digest(base)
    assert run_digest({**base, "lr_gamma": 0.1, "device": "cuda", "amp": "bf16"}) == key  # default; where it runs
    assert run_digest({**base, "model": {**base["model"], "relevance": {**base["model"]["relevance"]}}}) == key
    assert run_digest({k: v for k, v in base.items() if k != "max_grad_norm"}) == key  # an option not yet known
    assert run_digest({**base, "lr": base["lr"] * 2}) != key
    assert run_digest({**base, "seed": 4}) != key
    assert run_digest({**base, "model": {**base["model"], "hidden": base["model"]["hidden"] + 1}}) != key
    minute = to_dict(TrainConfig(dataset=DatasetConfig(benchmark="/b"), model=MINUTEConfig()))
    minute.update(seed=3, dataset={**minute["dataset"], "benchmark": "/b"})
    assert run_digest(minute) != key
    # a default that changed (issue 75: relevance.exclusion, batch -> table) is hashed against the old one, where
    # it changes what is trained (with a pair table): a run made before is found by asking for "batch"
    import momentsearch.experiments.digest as digest

    rel = {k: v for k, v in base["model"]["relevance"].items() if k != "exclusion"} | {"method": "pairs", "table": "t"}
    pr = {**base, "model": {**base["model"], "relevance": rel}}
    new, old = run_digest(pr), run_digest({**pr, "model": {**pr["model"], "relevance": {**rel, "exclusion": "batch"}}})
    assert new != old and run_digest({**pr, "model": {**pr["model"], "relevance": {**rel, "exclusion": "table"}}}) == new
    saved = dict(digest.CHANGED_DEFAULTS)
    digest.CHANGED_DEFAULTS.clear()
    try:  # the hash the code before issue 75 gave the same config
        assert run_digest({**pr, "model": {**pr["model"], "relevance": {**rel, "exclusion": "batch"}}}) != old
        assert run_digest(pr) == old
        # MINUTE's length_passes (1 -> 4): the hash of a MINUTE config written before the option existed
        before = run_digest({**minute, "model": {k: v for k, v in minute["model"].items() if k != "length_passes"}})
    finally:
        digest.CHANGED_DEFAULTS.update(saved)
    assert run_digest({**minute, "model": {**minute["model"], "length_passes": 1}}) == before  # pinned: found again
    assert run_digest(minute) != before  # today's default is another run


def test_proxy_tables_cut_at_a_threshold_get_their_own_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy table stored from S >= 0.5 (what T = 0.5 trains on) is not the every-S > 0 table, and the runner
    passes the threshold to ``run_relevance``."""
    from momentsearch.api import relevance_tables
    from momentsearch.experiments.tables import TableSpec, table_files

    calls: list[tuple[str, int, float]] = []

    def fake(bench: Path, proxy: str, out: Path, top_k: int = 100, threshold: float = 0.0) -> dict:
        calls.append((out.name, top_k, threshold))
        for suffix in (".queries.json", ".qq.npz"):
            out.with_suffix(suffix).write_text("")
        return {}

    monkeypatch.setattr(relevance_tables, "run_relevance", fake)
    every = table_files(tmp_path, tmp_path, TableSpec("proxy", proxy="bow", top_k=0), corpus=None)
    cut = table_files(tmp_path, tmp_path, TableSpec("proxy", proxy="bow", top_k=0, threshold=0.5), corpus=None)
    assert calls == [("proxy_bow_all.npz", 0, 0.0), ("proxy_bow_all_s0p5.npz", 0, 0.5)]
    assert (every.name, cut.name) == ("proxy_bow_all.npz", "proxy_bow_all_s0p5.npz")
    table_files(tmp_path, tmp_path, TableSpec("proxy", proxy="bow", top_k=0, threshold=0.5), corpus=None)
    assert len(calls) == 2  # present: not computed again


@pytest.mark.slow
def test_runs_scored_against_a_proxy_table(tiny_benchmark: Path, tmp_path: Path) -> None:
    """``score_with: [bow]`` adds nDCG against the BoW table to every run (issue 42 item 6): the value evaluate()
    gives with that table, stored once in result.json; a table stored from a threshold is refused."""
    from momentsearch.api import evaluate

    xml = _train_yaml(tmp_path / "xml.yaml")
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(_head("p", xml, tiny_benchmark, tmp_path / "out", tmp_path / "runs") + """tables:
  bow: {kind: proxy, proxy: bow, top_k: 0}
score_with: [bow]
conditions:
  XML: {}
""")
    agg = run_experiment(cfg, jobs=1)
    result_path = next((tmp_path / "runs").glob("*/seed0/result.json"))
    stored = json.loads(result_path.read_text())
    assert list(stored["proxy_ndcg"]) == ["bow:proxy_bow_all.npz"]
    table = tiny_benchmark / "relevance" / "proxy_bow_all.npz"
    direct = evaluate(result_path.parent / "checkpoints" / "best.pt", "test", progress=False, relevance=table)
    assert direct.proxy_row is not None
    for col in ("nDCG VR", "nDCG VCMR 0.5"):
        assert agg["XML"][f"{col} (bow)"]["mean"] == pytest.approx(direct.proxy_row[col])
        assert 0 < direct.proxy_row[col] < 100
    assert agg["XML"]["nDCG VR (bow)"]["mean"] != agg["XML"]["nDCG VR"]["mean"]  # the proxy, not the oracle
    assert "| XML | " in (tmp_path / "out" / "results.md").read_text().split("text proxies of `score_with`")[1]
    before = result_path.stat().st_mtime_ns
    run_experiment(cfg, jobs=1)
    assert result_path.stat().st_mtime_ns == before  # scored once
    bad = tmp_path / "bad.yaml"
    bad.write_text(cfg.read_text().replace("top_k: 0}", "top_k: 0, threshold: 0.5}"))
    with pytest.raises(ConfigError, match="score_with 'bow' must name one of its proxy tables stored without"):
        run_experiment(bad, jobs=1)


@pytest.mark.slow
def test_a_failing_run_is_said_at_once_and_no_run_starts_after_it(tiny_benchmark: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """With two processes, a run that fails (here: a stopped run whose benchmark changed) is reported when it
    fails, the runs not yet handed to a process never start, the running ones finish and are kept, and the
    error names the run and says that the same command resumes. Until 2026-12-03 the pool trained every
    remaining run first (for a 30-run experiment, hours) and only then raised."""
    from momentsearch.config import load_yaml_config
    from momentsearch.experiments.runner import ExperimentConfig, prepare, run_config

    train = _train_yaml(tmp_path / "train.yaml")
    cfg = tmp_path / "exp.yaml"
    cfg.write_text(_head("t", train, tiny_benchmark, tmp_path / "out", tmp_path / "runs", "[0, 1, 2, 3, 4]")
                   + "conditions:\n  XML: {}\n  XML lr 0.002: {lr: 0.002}\n")
    exp = load_yaml_config(ExperimentConfig, cfg)
    bench, tables = prepare(exp)
    bad = Path(run_config(exp, "XML lr 0.002", 0, bench, tables, tmp_path / "runs")["out_dir"])
    (bad / "checkpoints").mkdir(parents=True)  # a stopped run, trained on a benchmark since generated again
    (bad / "checkpoints" / "last.pt").write_bytes(b"")
    (bad / "inputs.json").write_text(json.dumps({"benchmark": "0" * 32}))
    with pytest.raises(Exception) as e:
        run_experiment(cfg, jobs=2)
    assert "experiment 't': XML lr 0.002 seed 0 failed; every finished run is kept, so the same command again " \
           "trains only the runs still missing" in e.value.__notes__
    said = capsys.readouterr().out
    assert "XML lr 0.002 seed 0 failed: ConfigError: " in said and "benchmark changed" in said and "runs not yet started will not start" in said
    trained = {p.parent.name for p in (tmp_path / "runs").glob("*/seed*/result.json")}
    # 10 runs: a run starts only when a process is free, so beside the failing one only XML seed 0 (and seed 1,
    # if seed 0 finished first) can have trained
    assert {"seed0"} <= trained <= {"seed0", "seed1"}
    assert (bad / "inputs.json").read_text() == json.dumps({"benchmark": "0" * 32})  # nothing stored is lost
