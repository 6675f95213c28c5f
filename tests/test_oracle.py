"""The synthetic oracle's graded relevance, on hand-built events."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from momentsearch.data.corpus import Corpus, Moment, Video
from momentsearch.data.relevance import MomentRelevance
from momentsearch.data.synthetic import SyntheticBenchmark, SyntheticOracle


def ev(i: int, action: str, obj: str, adj: str | None = None, st: float = 0.0, ed: float = 5.0) -> dict:
    return {"id": f"e{i}", "start": st, "end": ed, "action": action, "object": obj, "adjective": adj}


def q(qid: str, action: str, obj: str, video: str = "A", span=(0.0, 5.0), **extra) -> Moment:
    concepts = {"action": action, "object": obj, "adjective": None, "subject": "person", "scene": None, **extra}
    return Moment(qid, "text", video, (span,), meta={"concepts": concepts})


@pytest.fixture
def oracle() -> SyntheticOracle:
    videos = [
        Video("A", 60.0, meta={"scene": "kitchen", "subject": "man", "events": [
            ev(0, "open", "fridge"), ev(1, "open", "cup", st=10, ed=15), ev(2, "drink", "coffee", st=20, ed=25)]}),
        Video("B", 60.0, meta={"scene": "office", "subject": "woman", "events": [
            ev(3, "open", "fridge", "red"), ev(4, "close", "fridge", st=10, ed=15), ev(5, "open", "mug", st=20, ed=30),
            ev(6, "pick_up", "laptop", st=30, ed=40)]}),
    ]
    moments = [
        q("q0", "open", "fridge"),
        q("q1", "open", "fridge", scene="kitchen"),
        q("q2", "open", "fridge", subject="man"),
        q("q3", "open", "fridge", video="B", adjective="red"),
    ]
    return SyntheticOracle(Corpus.from_parts(videos, moments))


def test_grades_by_hand(oracle: SyntheticOracle) -> None:
    r = oracle.relevance
    assert r("q0", "e0") == 1.0  # the exact event
    assert r("q0", "e3") == 1.0  # the same event in another video: as relevant
    assert r("q0", "e1") == pytest.approx(0.5 + 0.5 * 0.0)  # same action, object of another group (cup vs fridge)
    assert r("q0", "e4") == pytest.approx(0.5 * 0.3 + 0.5)  # related action (close ~ open), same object
    assert r("q0", "e2") == 0.0  # nothing shared
    assert r("q0", "e6") == 0.0
    assert r("q1", "e0") == 1.0 and r("q1", "e3") == pytest.approx(0.8)  # named scene differs
    assert r("q2", "e3") == pytest.approx(0.8)  # "a man" vs a woman's video
    assert r("q3", "e3") == 1.0 and r("q3", "e0") == pytest.approx(0.9)  # "red fridge" vs a plain one


@pytest.mark.parametrize("min_relevance", [0.4, 1e-6])  # 1e-6: every S > 0 (Wray et al.'s Eqs. 2-3)
def test_sparse_table_matches_pointwise_and_video_max(oracle: SyntheticOracle, min_relevance: float) -> None:
    table = oracle.moment_relevance(min_relevance=min_relevance)
    dense = {(table.query_ids[i], table.video_ids[v], float(st)): float(val) for i in range(len(table))
             for v, st, _, val in zip(*table.row(i), strict=True)}
    assert dense[("q0", "A", 0.0)] == 1.0 and dense[("q0", "B", 10.0)] == pytest.approx(0.65)  # close fridge
    n_expected = 0
    for qid in table.query_ids:
        for i, eid in enumerate(oracle.events.event_ids):
            val = oracle.relevance(qid, eid)
            key = (qid, oracle.events.video_ids[i], float(oracle.events.start[i]))
            if val >= min_relevance:
                n_expected += 1
                assert dense[key] == pytest.approx(val)
            else:
                assert key not in dense
    assert table.nnz == n_expected and table.value.min() > 0
    vr = table.dense_video_relevance()
    assert vr[table.query_ids.index("q1")].tolist() == pytest.approx([1.0, 0.8])  # max over each video's events
    # exact matches: q0 -> e0, e3; q1 (kitchen) -> e0; q2 (a man) -> e0; q3 (red fridge) -> e3
    assert table.threshold(1.0).nnz == 2 + 1 + 1 + 1


def test_every_annotated_pair_of_a_generated_corpus_scores_one(tiny_benchmark: Path) -> None:
    bench = SyntheticBenchmark.load(tiny_benchmark)
    oracle = bench.oracle()
    table = oracle.moment_relevance(min_relevance=1.0)
    vindex = {v: i for i, v in enumerate(table.video_ids)}
    many = 0
    for i, m in enumerate(bench.corpus.moments):
        v, st, ed, val = table.row(i)
        own = (v == vindex[m.video_id]) & (st == m.span[0]) & (ed == m.span[1])
        assert own.sum() == 1 and val[own][0] == 1.0
        many += len(v) > 1
    assert many > 0  # some queries have more than one fully relevant moment


def test_relevance_table_storage_and_validation(tmp_path: Path) -> None:
    t = MomentRelevance.from_rows(["a", "b"], ["v0", "v1"], [[(1, 0.0, 1.0, 0.5), (0, 2.0, 3.0, 1.0)], []])
    assert t.row(0)[0].tolist() == [0, 1]  # sorted by video
    t.save(tmp_path / "r.npz")
    back = MomentRelevance.load(tmp_path / "r.npz")
    assert back.query_ids == ["a", "b"] and np.array_equal(back.value, t.value)
    with pytest.raises(ValueError, match=r"values must lie in \(0, 1\]"):
        MomentRelevance.from_rows(["a"], ["v0"], [[(0, 0.0, 1.0, 1.5)]])


def test_oracle_query_relevance_matches_pairwise(tiny_benchmark: Path) -> None:
    bench = SyntheticBenchmark.load(tiny_benchmark)
    corpus = bench.corpus.split("train")
    oracle = bench.oracle("train")
    m = oracle.query_relevance(corpus, min_relevance=0.5).toarray()
    assert m.shape == (len(corpus), len(corpus))
    rng = np.random.default_rng(0)
    for i, j in rng.integers(0, len(corpus), size=(60, 2)):
        want = oracle.relevance(corpus.moments[i].query_id, corpus.moments[j].meta["event"])
        assert m[i, j] == pytest.approx(want if want >= 0.5 else 0.0, abs=1e-6)
    assert np.allclose(np.diag(m), 1.0)  # a query is fully relevant to its own event
