"""The real-caption benchmark (issue 43 item 3): Charades-STA's captions, spans, videos and durations with
clip features from the real action timelines, through generate, train and evaluate, and its action-class oracle,
checked by hand on real lines."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from tests.conftest import shared

from momentsearch.data.synthetic import SyntheticBenchmark, generate, load_preset
from momentsearch.data.synthetic.charades import ActionClassOracle, class_prototypes, clip_features


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


def test_class_parts_read_from_the_real_captions() -> None:
    """Issue 75 part 5: each class's verb and object from its Charades-STA captions; by hand on classes whose
    captions say them plainly (c006 "person close the door", c008 "person opening a door")."""
    from momentsearch.data.synthetic.charades import all_class_captions
    from momentsearch.data.synthetic.charades_parts import class_parts

    cfg = dataclasses.replace(load_preset("charades_vo"), data_dir=str(shared("charades_sta/charades_sta_train.txt").parent))
    parts = class_parts(all_class_captions(cfg))
    assert len(parts) == 157
    assert parts["c006"] == ("close", "door") and parts["c008"] == ("open", "door")
    assert parts["c142"] == ("close", "refrigerator") and parts["c143"] == ("open", "refrigerator")
    assert parts["c026"] == ("hold", "book") and parts["c027"] == ("open", "book")
    assert parts["c149"][1] is None  # "person starts laughing": no object
    objects = Counter(o for _, o in parts.values() if o)
    verbs = Counter(v for v, _ in parts.values())
    assert objects["door"] >= 3 and verbs["hold"] >= 10 and verbs["open"] >= 5  # shared parts, as Charades' are
    # each word to its shortest form the captions use too: opening, opens -> open (said in the third)
    assert class_parts({"c1": ["a person is opening the door.", "person opens a door", "they open the door"],
                        "c2": ["person laughing.", "a person starts to laugh."]}) == {"c1": ("open", "door"),
                                                                                    "c2": ("laugh", None)}


def test_classes_sharing_a_verb_or_an_object_are_closer_than_classes_sharing_neither(tmp_path: Path) -> None:
    """The charades_vo preset's pictures: mean cosine of class pairs sharing an object > sharing a verb > sharing
    neither (about 0), against the old preset where every pair is about orthogonal; instance noise makes two
    instances of a class alike but not equal; written beside the benchmark as class_parts.json."""
    from momentsearch.data.synthetic.charades import all_class_captions
    from momentsearch.data.synthetic.charades_parts import class_parts, structured_prototypes

    sta = shared("charades_sta/charades_sta_train.txt").parent
    cfg = dataclasses.replace(load_preset("charades_vo"), n_videos=60, data_dir=str(sta))
    parts = class_parts(all_class_captions(cfg))
    p = structured_prototypes(cfg.seed, cfg.feature_dim, parts)
    old = class_prototypes(cfg, sorted(parts))
    groups: dict[str, list[float]] = {"object": [], "verb": [], "neither": [], "old": []}
    cs = sorted(parts)
    for i, a in enumerate(cs):
        for b in cs[i + 1:]:
            same_v, same_o = parts[a][0] == parts[b][0], parts[a][1] is not None and parts[a][1] == parts[b][1]
            key = "object" if same_o and not same_v else "verb" if same_v and not same_o else "neither" if not (
                same_v or same_o) else None
            if key:
                groups[key].append(float(p[a] @ p[b]))
            groups["old"].append(float(old[a] @ old[b]))
    mean = {k: float(np.mean(v)) for k, v in groups.items()}
    assert mean["object"] > 0.35 and mean["verb"] > 0.2 and abs(mean["neither"]) < 0.05 and abs(mean["old"]) < 0.05
    assert mean["object"] > mean["verb"] > mean["neither"] + 0.15
    # by hand: open / close the door share the object (0.7^2 / |x|^2), hold a book / hold a phone the verb (0.55^2)
    norm2 = 0.55 ** 2 + 0.7 ** 2 + 0.45 ** 2
    assert float(p["c006"] @ p["c008"]) == pytest.approx(0.49 / norm2, abs=0.25)
    acts = [("c008", 0.0, 4.0), ("c008", 10.0, 14.0)]
    x = clip_features(cfg, 3, 20.0, acts, p)
    y = clip_features(dataclasses.replace(cfg, instance_noise=0.0), 3, 20.0, acts, p)
    a, b = x[0] - x[0].mean() * 0, x[5]  # (clips 0-1 hold the first instance, 5-6 the second)
    cos = float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))
    cos0 = float(y[0] @ y[5] / np.linalg.norm(y[0]) / np.linalg.norm(y[5]))
    assert cos < cos0  # two instances of one class differ more with instance noise
    bench = generate(cfg, tmp_path / "vo", progress=False)
    stored = json.loads((bench / "class_parts.json").read_text())
    assert stored["c008"] == ["open", "door"]
