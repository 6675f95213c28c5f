"""The real-caption benchmark (issue 43 item 3): Charades-STA's captions, spans, videos and durations with
clip features from the real action timelines, through generate, train and evaluate, and its action-class oracle,
checked by hand on real lines."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from momentsearch.data.synthetic import SyntheticBenchmark, generate, load_preset
from momentsearch.data.synthetic.charades import ActionClassOracle, class_prototypes, clip_features
from tests.conftest import shared


@pytest.fixture(scope="module")
def bench(tmp_path_factory) -> Path:
    sta = shared("charades_sta/charades_sta_train.txt").parent
    cfg = dataclasses.replace(load_preset("charades"), n_videos=120, data_dir=str(sta))
    return generate(cfg, tmp_path_factory.mktemp("charades") / "b", progress=False)


def test_captions_spans_and_durations_are_charades_stas(bench: Path) -> None:
    b = SyntheticBenchmark.load(bench)
    assert b.config.source == "charades-sta" and len(b.corpus.videos) == 120
    assert set(b.corpus.splits) == {"train", "val", "test"}
    lines = {}
    for name in ("train", "test"):
        for line in shared(f"charades_sta/charades_sta_{name}.txt").read_text().splitlines():
            head, text = line.split("##", 1)
            vid, st, ed = head.split()
            lines.setdefault((vid, float(st), float(ed)), set()).add(text.strip())
    lengths = {}
    for name in ("train", "test"):
        import csv

        for row in csv.DictReader(shared(f"charades_sta/Charades_v1_{name}.csv").open(encoding="utf-8")):
            lengths[row["id"]] = float(row["length"])
    assert all(v.duration == pytest.approx(lengths[v.video_id]) for v in b.corpus.videos.values())
    for m in b.corpus.moments:  # the real sentence at its real span (an end past the video's length cut to it, as
        st, ed = m.span            # the Charades-STA loader reads every split: 562 test lines end after their video)
        real = [k for k in lines if k[0] == m.video_id and k[1] == st and min(k[2], lengths[m.video_id]) == ed]
        assert real and any(m.text in lines[k] for k in real), m
    test_ids = {ln.split()[0] for ln in shared("charades_sta/charades_sta_test.txt").read_text().splitlines()}
    assert all((v.split == "test") == (v.video_id in test_ids) for v in b.corpus.videos.values())


def test_features_follow_the_real_action_timeline(bench: Path) -> None:
    """A clip inside an interval of class c is nearer P_c than a clip outside every interval of c."""
    b = SyntheticBenchmark.load(bench)
    v = next(v for v in b.corpus.videos.values() if v.meta["actions"] and v.duration > 20)
    protos = class_prototypes(b.config, sorted({a[0] for u in b.corpus.videos.values() for a in u.meta["actions"]}))
    with b.features() as store:
        x = store.get(v.video_id)[0].astype(np.float32)
    cls, st, ed = v.meta["actions"][0]
    again = clip_features(b.config, list(b.corpus.videos).index(v.video_id), v.duration,
                          [tuple(a) for a in v.meta["actions"]], protos)
    assert np.allclose(x, again, atol=2e-3)  # stored as fp16
    inside = [t for t in range(len(x)) if st <= t * 2.0 and (t + 1) * 2.0 <= ed]
    outside = [t for t in range(len(x)) if not any(a[0] == cls and a[1] < (t + 1) * 2.0 and a[2] > t * 2.0
                                                   for a in v.meta["actions"])]
    if inside and outside:
        assert min(x[inside] @ protos[cls]) > max(x[outside] @ protos[cls])


def test_the_oracle_is_the_action_class_table_by_hand(bench: Path) -> None:
    b = SyntheticBenchmark.load(bench)
    test = b.corpus.split("test")
    oracle = b.oracle("test")
    assert isinstance(oracle, ActionClassOracle)
    rel = oracle.moment_relevance(0.5)
    m = next(m for m in test.moments if m.meta["class"])
    i = rel.query_ids.index(m.query_id)
    got = {(rel.video_ids[v], s, e) for v, s, e in zip(rel.video_idx[rel.indptr[i]:rel.indptr[i + 1]],
                                                       rel.start[rel.indptr[i]:rel.indptr[i + 1]],
                                                       rel.end[rel.indptr[i]:rel.indptr[i + 1]], strict=True)}
    want = {(v.video_id, a[1], a[2]) for v in test.videos.values() for a in v.meta["actions"] if a[0] == m.meta["class"]}
    assert got == want and len(want) >= 1
    qq = oracle.query_relevance(test, 0.5).toarray()
    for a, qa in enumerate(test.moments):
        for c, qc in enumerate(test.moments):
            same_class = qa.meta["class"] is not None and qa.meta["class"] == qc.meta["class"]
            if qq[a, c] > 0:
                assert qa.meta["class"] is not None  # only classed queries have relevant queries
            if same_class and a == c:
                assert qq[a, c] >= 0.5  # its own moment: its class's interval at tIoU >= 0.5


@pytest.mark.slow
def test_generate_train_evaluate_like_any_preset(bench: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from momentsearch.cli.main import app

    run = CliRunner().invoke
    r = run(app, ["train", "configs/xml/demo.yaml", "--set", f"dataset.benchmark={bench}", "--epochs", "2",
                  "--out-dir", str(tmp_path / "x"), "--set", "val_split=val"])
    assert r.exit_code == 0, r.output
    r = run(app, ["evaluate", str(tmp_path / "x" / "checkpoints" / "best.pt"), "--split", "test"])
    assert r.exit_code == 0, r.output
    metrics = json.loads((tmp_path / "x" / "eval_test" / "metrics.json").read_text())["metrics"]
    # the action-class oracle graded the ranking: multi-positive recall, nDCG and NDCG@K,IoU against it
    assert {"multi_positive", "ndcg", "ndcg_every", "bounds_oracle", "ndcg_iou"} <= set(metrics)
    mp, sp = metrics["multi_positive"]["VCMR"], metrics["VCMR"]
    assert mp["0.5-r100"] >= sp["0.5-r100"]  # every same-class interval counts: never below the one annotated


def test_the_oracle_pairs_table_an_experiment_reads(bench: Path, tmp_path: Path) -> None:
    """``{kind: oracle}`` tables (run_oracle_pairs) over the real captions: (i, j) is a pair exactly when query j's
    annotated span overlaps an interval of query i's class in j's video at tIoU >= 0.5, with that tIoU as grade."""
    from scipy import sparse

    from momentsearch.api.relevance_tables import run_oracle_pairs
    from momentsearch.data.loaders.charades_actions import grade

    stats = run_oracle_pairs(bench, tmp_path / "o", "train")
    m = sparse.load_npz(tmp_path / "o.qq.npz").toarray()
    b = SyntheticBenchmark.load(bench)
    train = b.corpus.split("train")
    oracle = b.oracle("train")
    assert stats["n_queries"] == len(train.moments) == m.shape[0]
    for i, qi in enumerate(train.moments[:40]):
        for j, qj in enumerate(train.moments):
            g = grade(oracle.table, qi.meta["class"], qj.video_id, *qj.span)
            assert m[i, j] == pytest.approx(g if g >= 0.5 else 0.0, abs=1e-6)
    assert (np.diag(m) >= 0.5).sum() == sum(q.meta["class"] is not None for q in train.moments)
