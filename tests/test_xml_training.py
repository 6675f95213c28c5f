"""XML end to end on the tiny preset: training beats random, checkpoints resume exactly, search works."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from tests.conftest import TEST_SEED, TEST_THREADS

import momentsearch
from momentsearch.api import evaluate
from momentsearch.api.relevance_tables import run_relevance
from momentsearch.data.dataset import DatasetConfig
from momentsearch.data.synthetic import SyntheticBenchmark, generate, load_preset
from momentsearch.errors import CheckpointError, QueryError
from momentsearch.evaluation.recall import evaluate_ranked
from momentsearch.models.xml import XMLConfig
from momentsearch.search.baselines import random_ranker
from momentsearch.serving.checkpoint import load_checkpoint
from momentsearch.training.checkpoint import train_config_of
from momentsearch.training.config import TrainConfig
from momentsearch.training.trainer import Trainer


def tiny_cfg(bench: Path, out: Path, epochs: int) -> TrainConfig:
    """XML on the tiny preset for tests that need a trained checkpoint, not a good one (resume, schedules,
    workers, checkpoint choice, indexes): it trains on the 9-video val split (115 queries, 4 batches an
    epoch, a quarter of the train split's cost) and validates on test."""
    return TrainConfig(dataset=DatasetConfig(benchmark=str(bench)), out_dir=str(out), epochs=epochs, batch_size=32,
                       lr=1e-3, train_split="val", val_split="test",
                       model=XMLConfig(hidden=64, dropout=0.1, hard_negative_start_epoch=4, lambda_tl=0.1))


@pytest.mark.slow
def test_resume_gives_identical_weights(tiny_benchmark: Path, tmp_path: Path) -> None:
    straight = Trainer(tiny_cfg(tiny_benchmark, tmp_path / "a", 2), progress=False)
    straight.fit(until=1)
    shutil.copytree(straight.ckpt_dir, tmp_path / "b" / "checkpoints")  # the run as if stopped after epoch 1
    straight.fit()  # carries on in memory: the uninterrupted run
    with pytest.raises(ValueError, match=r"until must be in 2\.\.2"):
        straight.fit(until=1)
    resumed = Trainer(tiny_cfg(tiny_benchmark, tmp_path / "b", 2), progress=False)
    assert resumed.resume() and resumed.start_epoch == 1
    resumed.fit()
    for (k, a), (_, b) in zip(straight.model.state_dict().items(), resumed.model.state_dict().items(), strict=True):
        assert torch.equal(a, b), k
    ck = load_checkpoint(tmp_path / "b" / "checkpoints" / "last.pt")
    assert ck.header.epoch == 1 and len(ck.header.history) == 2 and train_config_of(ck).epochs == 2
    assert ck.family.name == "xml" and ck.header.versions["momentsearch"] == momentsearch.__version__
    other = Trainer(dataclasses.replace(tiny_cfg(tiny_benchmark, tmp_path / "b", 2), lr=0.5), progress=False)
    with pytest.raises(CheckpointError, match=r"another config \(differs in \['lr'\]\).*--out-dir"):
        other.resume()
    # a checkpoint saved before an option existed resumes: the option takes its default
    state = torch.load(tmp_path / "b" / "checkpoints" / "last.pt", weights_only=False)
    del state["train_config"]["model"]["conv_kernel"], state["train_config"]["model"]["relevance"]["floor_mode"]
    torch.save(state, tmp_path / "b" / "checkpoints" / "last.pt")
    assert Trainer(tiny_cfg(tiny_benchmark, tmp_path / "b", 2), progress=False).resume()
    del state["train_config"]["model"]["encoder_layer"]  # from before encoder_layer: its layers were transformer
    torch.save(state, tmp_path / "b" / "checkpoints" / "last.pt")
    with pytest.raises(CheckpointError, match=r"differs in \['model'\]"):
        Trainer(tiny_cfg(tiny_benchmark, tmp_path / "b", 2), progress=False).resume()
    state["train_config"]["model"]["encoder_layer"] = "attention"
    state["train_config"]["model"]["hidden"] = 32  # a stored value that differs still refuses
    torch.save(state, tmp_path / "b" / "checkpoints" / "last.pt")
    with pytest.raises(CheckpointError, match=r"differs in \['model'\]"):
        Trainer(tiny_cfg(tiny_benchmark, tmp_path / "b", 2), progress=False).resume()
    for (k, a), (_, b) in zip(ck.model.state_dict().items(), resumed.model.state_dict().items(), strict=True):
        assert torch.equal(a, b), k


@pytest.fixture(scope="module")
def small_benchmark(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """300 videos (~3,000 training captions): the least from which XML generalises to unseen videos."""
    root = tmp_path_factory.mktemp("small")
    generate(dataclasses.replace(load_preset("tiny"), n_videos=300, name="small"), root, progress=False)
    return root


@pytest.mark.slow
def test_trained_xml_beats_random(small_benchmark: Path, tmp_path: Path, margin) -> None:
    cfg = TrainConfig(dataset=DatasetConfig(benchmark=str(small_benchmark)), out_dir=str(tmp_path / "run"), epochs=12,
                      batch_size=64, lr=1e-3, val_max_queries=200, seed=TEST_SEED, num_threads=TEST_THREADS,
                      model=XMLConfig(hidden=64, hard_negative_start_epoch=3, queries_per_video=4))
    Trainer(cfg, progress=False).fit()
    ckpt = tmp_path / "run" / "checkpoints" / "best.pt"
    ev = evaluate(ckpt, "test", tmp_path / "eval", progress=False)
    row = ev.row
    test = SyntheticBenchmark.load(small_benchmark).corpus.split("test")
    rnd = random_ranker(test, seed=0)
    rnd_m = evaluate_ranked(rnd["VCMR"], test, ("VCMR",)) | evaluate_ranked(rnd["VR"], test, ("VR",)) | \
        evaluate_ranked(rnd["SVMR"], test, ("SVMR",))
    # 45 test videos, 433 queries. 12 epochs at lr 1e-3: at 5 epochs and 5e-4 seed 2's start/end
    # convolutions had not started to learn (its localization loss took off only at epoch 7), and its SVMR
    # 0.5-r5 was 19.6, at chance. Measured as written, seeds 0-2 at 1 thread and seed 0 at 2 threads:
    # VR r10 - chance 43.2-49.9, VCMR 0.5-r100 - chance 60.3-80.6, SVMR 0.5-r5 - chance 48.5-67.9.
    margin("test VR r10 - chance", row["VR r10"] - rnd_m["VR"]["r10"], 20)
    margin("test VCMR 0.5-r100 - chance", row["VCMR 0.5-r100"] - rnd_m["VCMR"]["0.5-r100"], 30)
    margin("test SVMR 0.5-r5 - chance", row["SVMR 0.5-r5"] - rnd_m["SVMR"]["0.5-r5"], 30)
    # instance-based bounds (oracle-equivalent moments): lower <= standard <= upper geometric mean
    assert row["lower VCMR 0.5-gmean"] <= row["VCMR 0.5-gmean"] <= row["upper VCMR 0.5-gmean"]
    assert row["upper VCMR 0.5-gmean"] > row["VCMR 0.5-gmean"]
    # the same against a text proxy (BoW IoU over the benchmark's captions)
    run_relevance(small_benchmark, "bow", tmp_path / "bow.npz")
    evaluate(ckpt, "test", tmp_path / "eval_bow", progress=False, relevance=tmp_path / "bow.npz", equivalent=0.8)
    proxy = json.loads((tmp_path / "eval_bow" / "metrics.json").read_text())["metrics"]["proxy"]
    assert proxy["bounds"]["n_equivalent"] >= 1.0  # the annotated moment (BoW IoU 1 with itself) at least
    for task, key in (("VCMR@0.5", "VCMR 0.5-r10"), ("VR", "VR r10")):
        lo, up = proxy["bounds"][task]["lower-r10"], proxy["bounds"][task]["upper-r10"]
        assert lo <= row[key] <= up, (task, lo, row[key], up)
    assert 0 < proxy["ndcg"]["nDCG VR"] <= 100 and 0 < proxy["ndcg_linear"]["nDCG VR"] <= 100
    assert "Against the text proxy" in (tmp_path / "eval_bow" / "metrics.md").read_text()
    assert (tmp_path / "eval" / "predictions.json").exists() and (tmp_path / "run" / "training_curves.png").exists()
    per = json.loads((tmp_path / "eval" / "per_query.json").read_text())  # each test query's hits (issue 75)
    assert round(sum(q["VCMR 0.5-r1"] for q in per.values()) / len(per), 2) == pytest.approx(row["VCMR 0.5-r1"])
    # the Python API: the five lines of the README
    searcher = momentsearch.load(ckpt)
    hits = searcher.search("a person opens the fridge", k=5)
    assert len(hits) == 5 and all(0 <= h.start < h.end for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.video_id in SyntheticBenchmark.load(small_benchmark).corpus.split("test").videos for h in hits)
    with pytest.raises(QueryError, match="query is empty"):
        searcher.search("   ")
    # a query through the API (in memory) ranks exactly as the evaluation (HDF5 cache) ranks it
    test = SyntheticBenchmark.load(small_benchmark).corpus.split("test")
    m = test.moments[0]
    r = ev.ranked["VCMR"].row_of()[m.query_id]
    got = searcher.search(m.text, k=10)
    want = [(ev.ranked["VCMR"].video_ids[int(v)], float(a), float(b))
            for v, a, b in zip(ev.ranked["VCMR"].video_idx[r, :10], ev.ranked["VCMR"].start[r, :10],
                               ev.ranked["VCMR"].end[r, :10], strict=True)]
    assert [(h.video_id, h.start, h.end) for h in got] == want


@pytest.mark.slow
def test_dataloader_workers_give_the_same_training(tiny_benchmark: Path, tmp_path: Path) -> None:
    """Batches collated in two worker processes (the path CUDA training takes) train exactly as the
    in-process path does, and fit() leaves torch's thread count and deterministic mode as it found them."""
    threads, det = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    a = Trainer(dataclasses.replace(tiny_cfg(tiny_benchmark, tmp_path / "a", 1), num_threads=1), progress=False)
    a.fit()
    b = Trainer(dataclasses.replace(tiny_cfg(tiny_benchmark, tmp_path / "b", 1), num_threads=1, num_workers=2),
                progress=False)
    b.fit()
    for (k, x), (_, y) in zip(a.model.state_dict().items(), b.model.state_dict().items(), strict=True):
        assert torch.equal(x, y), k
    assert (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()) == (threads, det)


@pytest.mark.parametrize("every, drawn", [(1e9, [1, 3]), (0.0, [1, 2, 3])])
def test_training_curves_are_drawn_after_the_first_epoch_then_on_a_clock_and_at_the_end(
        tiny_benchmark: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, every: float, drawn: list[int]) -> None:
    """training_curves.png costs ~4 % of an XML epoch to draw, so a 3-epoch fit draws it after epoch 1, at most
    every PLOT_EVERY_S seconds, and after its last epoch, each time with the whole history so far."""
    from momentsearch.training import trainer as trainer_module

    seen: list[int] = []
    monkeypatch.setattr(trainer_module, "PLOT_EVERY_S", every)
    monkeypatch.setattr(trainer_module, "plot_training", lambda history, path, family="": seen.append(len(history)))
    Trainer(tiny_cfg(tiny_benchmark, tmp_path / "run", 3), progress=False).fit()
    assert seen == drawn


def test_training_and_search_take_the_query_encoder_from_the_family(tiny_benchmark: Path, tmp_path: Path) -> None:
    """XML at max_tokens 8: the trainer's query features are cut at 8 tokens by the family's own encoder (as
    search's are), the cache records that encoder, and another encoder's run refuses the cache."""
    import h5py

    from momentsearch.errors import MomentSearchError

    def cfg(max_tokens: int, out: str) -> TrainConfig:
        return TrainConfig(dataset=DatasetConfig(benchmark=str(tiny_benchmark), query_cache=str(tmp_path / "q.h5")),
                           out_dir=str(tmp_path / out), epochs=1, batch_size=32, val_split="test",
                           model=XMLConfig(hidden=32, max_tokens=max_tokens))

    t = Trainer(cfg(8, "a"), progress=False)
    moments = t.dataset.corpus.moments[:50]
    t.queries.ensure(moments, progress=False)
    rows = [len(t.queries.get(m.query_id, m.text)) for m in moments]
    assert max(rows) == 8 and min(rows) >= 3  # some captions are longer than 8 tokens: cut, as search cuts them
    searched = t.family.query_features(t.model).encode_many([moments[rows.index(8)].text])[0]
    assert np.allclose(searched, t.queries.get(moments[rows.index(8)].query_id, moments[rows.index(8)].text), atol=1e-2)
    with h5py.File(tmp_path / "q.h5", "r") as f:
        assert json.loads(f.attrs["query_encoder"]) == t.family.text_encoder
    t.store.close()
    with pytest.raises(MomentSearchError, match="q.h5: query features made by .*max_tokens.*8.* and this model reads"):
        Trainer(cfg(32, "b"), progress=False).queries.get(moments[0].query_id, moments[0].text)
