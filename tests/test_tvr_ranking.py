"""TVR-Ranking: the graded-pairs format (loader and writer) and NDCG@K,IoU, on hand-computed cases."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from momentsearch.data.loaders.tvr_ranking import load_tvr_ranking, write_tvr_ranking
from momentsearch.data.relevance import MomentRelevance
from momentsearch.errors import AnnotationError
from momentsearch.evaluation.ndcg_iou import ndcg_iou, ndcg_iou_query
from momentsearch.search.ranked import RankedMoments

L3, L5 = math.log2(3), math.log2(5)

# video A: g1 [0,10] grade 3, g2 [20,30] grade 2; video B: g3 [0,5] grade 1
GT = [("A", 0.0, 10.0, 3.0), ("A", 20.0, 30.0, 2.0), ("B", 0.0, 5.0, 1.0)]
# g1 exactly; the same moment again (g1 is taken, g2 does not overlap: 0); B [0,4] (IoU 0.8 with g3);
# A [21,30] (IoU 0.9 with g2)
PRED = [("A", 0.0, 10.0), ("A", 0.0, 10.0), ("B", 0.0, 4.0), ("A", 21.0, 30.0)]


def test_ndcg_iou_hand_computed():
    # IoU 0.5: earned grades 3, 0, 1, 2 -> DCG = 7 + 0 + 1/log2(4) + 3/log2(5); ideal 3, 2, 1 -> 7 + 3/log2(3) + 1/2
    r = ndcg_iou_query(PRED, GT, ks=(1, 2, 10), iou_threshold=0.5)
    assert r[10] == pytest.approx((7 + 0.5 + 3 / L5) / (7 + 3 / L3 + 0.5), abs=1e-12)  # 0.93604
    assert r[10] == pytest.approx(0.936040, abs=1e-6)
    assert r[2] == pytest.approx(7 / (7 + 3 / L3), abs=1e-12)  # the ideal is cut at K too
    assert r[1] == 1.0
    # IoU 0.85: B [0,4] (0.8) now misses -> grades 3, 0, 0, 2
    r = ndcg_iou_query(PRED, GT, ks=(10,), iou_threshold=0.85)
    assert r[10] == pytest.approx((7 + 3 / L5) / (7 + 3 / L3 + 0.5), abs=1e-12)
    # at the threshold exactly (IoU 4/5 == 0.8): no match by the reference's rule (>), a match by the paper's (>=)
    assert ndcg_iou_query([("B", 0.0, 4.0)], GT, ks=(10,), iou_threshold=0.8)[10] == 0.0
    assert ndcg_iou_query([("B", 0.0, 4.0)], GT, ks=(10,), iou_threshold=0.8, rule="paper")[10] == pytest.approx(
        1 / (7 + 3 / L3 + 0.5), abs=1e-12)


def test_ndcg_iou_takes_the_highest_iou_not_the_highest_grade():
    # g1 [0,10] grade 4, g2 [0,8] grade 1; the prediction [0,8] has IoU 1 with g2, 0.8 with g1: it earns 1
    gt = [("A", 0.0, 10.0, 4.0), ("A", 0.0, 8.0, 1.0)]
    r = ndcg_iou_query([("A", 0.0, 8.0)], gt, ks=(10,), iou_threshold=0.5)
    assert r[10] == pytest.approx(1 / (15 + 1 / L3), abs=1e-12)  # 0.06398
    # then a second prediction [0,8] takes g1 (IoU 0.8), the one left
    r = ndcg_iou_query([("A", 0.0, 8.0), ("A", 0.0, 8.0)], gt, ks=(10,), iou_threshold=0.5)
    assert r[10] == pytest.approx((1 + 15 / L3) / (15 + 1 / L3), abs=1e-12)


def test_ndcg_iou_ties_and_duplicates():
    # the same span annotated twice (grades 2 and 4): IoU ties go to the most relevant, then the other
    gt = [("A", 0.0, 10.0, 2.0), ("A", 0.0, 10.0, 4.0)]
    assert ndcg_iou_query([("A", 0.0, 10.0)] * 2, gt, ks=(10,))[10] == pytest.approx(1.0)
    assert ndcg_iou_query([("A", 0.0, 10.0)], gt, ks=(10,))[10] == pytest.approx(15 / (15 + 3 / L3))
    # a prediction equally close to two moments (IoU 0.6 each) earns the more relevant one
    gt = [("A", 0.0, 10.0, 1.0), ("A", 5.0, 15.0, 3.0)]
    assert ndcg_iou_query([("A", 2.5, 12.5)], gt, ks=(10,))[10] == pytest.approx(7 / (7 + 1 / L3))
    # grade-0 moments and other videos earn nothing; a query without a relevant moment scores 0 by the
    # reference's rule and is left out (None) by the paper's
    gt = [("A", 0.0, 10.0, 0.0), ("B", 0.0, 10.0, 2.0)]
    for rule in ("reference", "paper"):
        assert ndcg_iou_query([("A", 0.0, 10.0), ("C", 0.0, 10.0)], gt, ks=(10,), rule=rule)[10] == 0.0
    assert ndcg_iou_query([("A", 0.0, 10.0)], [("A", 0.0, 10.0, 0.0)]) == {10: 0.0, 20: 0.0, 40: 0.0}
    assert ndcg_iou_query([("A", 0.0, 10.0)], [("A", 0.0, 10.0, 0.0)], rule="paper") is None
    with pytest.raises(ValueError, match="rule must be one of"):
        ndcg_iou_query(PRED, GT, rule="papr")


def test_a_grade_zero_moment_takes_the_prediction_by_the_reference_rule():
    # A [0,10] grade 0 and A [0,6] grade 3; the prediction [0,9] is closer to the grade-0 moment (0.9 vs 0.67)
    gt = [("A", 0.0, 10.0, 0.0), ("A", 0.0, 6.0, 3.0)]
    assert ndcg_iou_query([("A", 0.0, 9.0)], gt, ks=(10,))[10] == 0.0  # it takes the grade-0 moment
    assert ndcg_iou_query([("A", 0.0, 9.0)], gt, ks=(10,), rule="paper")[10] == 1.0  # grade 0 is not there
    with pytest.raises(ValueError, match="K must be"):
        ndcg_iou_query(PRED, GT, ks=(0,))


def test_ndcg_iou_over_ranked_lists_matches_the_per_query_function():
    rel = MomentRelevance.from_rows(
        ["q1", "q2", "q3"], ["A", "B"],
        [[(0, 0.0, 10.0, 0.75), (0, 20.0, 30.0, 0.5), (1, 0.0, 5.0, 0.25)], [(1, 0.0, 10.0, 1.0)], []],
    )
    vid = {"A": 0, "B": 1}
    lists = [[(vid[v], s, e, 1.0) for v, s, e in PRED], [(0, 0.0, 10.0, 1.0), (1, 1.0, 10.0, 0.5)], [(0, 0.0, 1.0, 1.0)]]
    ranked = RankedMoments.from_lists(["q1", "q2", "q3"], ["A", "B"], lists)
    out = ndcg_iou(ranked, rel, ks=(10,), ious=(0.5,), rule="paper")
    q2 = (15 / L3) / 15  # B [1,10] has IoU 0.9 with the grade-4 moment, at rank 2
    assert out["n_queries"] == 2  # q3 has no relevant moment
    assert out["NDCG@10 IoU0.5"] == round((0.936040 + q2) / 2 * 100, 2)
    out = ndcg_iou(ranked, rel, ks=(10,), ious=(0.5,))  # the reference's rule: q3 counts as 0
    assert out["n_queries"] == 3 and out["NDCG@10 IoU0.5"] == round((0.936040 + q2) / 3 * 100, 2)
    with pytest.raises(KeyError, match="no ranked moments"):
        ndcg_iou(ranked, MomentRelevance.from_rows(["zz"], ["A"], [[(0, 0.0, 1.0, 1.0)]]))


PAIRS = [
    {"pair_id": 0, "query_id": 7, "query": "a man opens a door", "video_name": "v1", "timestamp": [2.0, 6.0],
     "duration": 30.0, "caption": "he opens the door", "similarity": 0.9, "relevance": 4},
    {"pair_id": 1, "query_id": 7, "query": "a man opens a door", "video_name": "v2", "timestamp": [25.0, 40.0],
     "duration": 32.0, "caption": "a door opens", "similarity": 0.7, "relevance": 2.33},
    {"pair_id": 2, "query_id": 7, "query": "a man opens a door", "video_name": "v1", "timestamp": [10.0, 12.0],
     "duration": 30.0, "caption": "she sits", "similarity": 0.2, "relevance": 0},
    {"pair_id": 3, "query_id": 8, "query": "she sits", "video_name": "v1", "timestamp": [10.0, 12.0],
     "duration": 30.0, "caption": "she sits", "similarity": 1.0, "relevance": 3},
]


def test_tvr_ranking_loader_reads_grades_and_counts_what_it_changed(tmp_path):
    p = tmp_path / "val.json"
    p.write_text(json.dumps(PAIRS))
    data = load_tvr_ranking(p)
    assert data.queries == {"7": "a man opens a door", "8": "she sits"}
    assert data.durations == {"v1": 30.0, "v2": 32.0}
    assert data.stats == {"n_pairs": 4, "n_queries": 2, "n_videos": 2, "n_relevant_pairs": 3, "n_grade_zero": 1,
                          "n_spans_clamped": 1, "n_zero_length_spans": 0}
    v, s, e, _ = data.relevance.row(0)
    assert [data.relevance.video_ids[i] for i in v] == ["v1", "v2"]
    assert e.tolist() == [6.0, 32.0]  # [25, 40] clamped to the duration 32
    assert data.grades(0).tolist() == pytest.approx([4.0, 2.33], abs=1e-5)
    # written back and read again: the same table
    out = tmp_path / "again.json"
    assert write_tvr_ranking(out, data.relevance, data.queries, data.durations) == 3
    again = load_tvr_ranking(out)
    assert np.allclose(again.relevance.value, data.relevance.value) and again.queries == data.queries
    assert json.loads(out.read_text())[0]["query_id"] == 7  # integer ids stay integers


@pytest.mark.parametrize(("change", "message"), [
    ({"relevance": 5}, r"relevance must lie in \[0, 4\]"),
    ({"relevance": "high"}, "must be a finite number"),
    ({"timestamp": [3.0]}, r"timestamp must be \[start, end\]"),
    ({"timestamp": [1.0, float("nan")]}, "timestamp must be"),
    ({"duration": 0}, "duration must be > 0"),
    ({"video_name": ""}, "empty video_name"),
    ({"query": "another text"}, "has two texts"),
    ({"pair_id": 0}, "duplicate pair_id"),
    ({"duration": 31.0}, "has two durations"),
])
def test_tvr_ranking_loader_names_the_file_and_the_pair(tmp_path, change, message):
    bad = [dict(PAIRS[0]), {**PAIRS[3], "query_id": 7, "query": PAIRS[0]["query"], **change}]
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(bad))
    with pytest.raises(AnnotationError, match=message) as e:
        load_tvr_ranking(p)
    assert str(p) in str(e.value) and "(record [1]" in str(e.value)


def test_tvr_ranking_loader_rejects_a_non_list(tmp_path):
    p = tmp_path / "obj.json"
    p.write_text(json.dumps({"pairs": PAIRS}))
    with pytest.raises(AnnotationError, match="expected a JSON list"):
        load_tvr_ranking(p)
    with pytest.raises(AnnotationError, match="file not found"):
        load_tvr_ranking(tmp_path / "missing.json")


def test_oracle_export_round_trips_and_the_perfect_ranking_scores_100(tiny_benchmark, tmp_path):
    from momentsearch.data.synthetic import SyntheticBenchmark

    bench = SyntheticBenchmark.load(tiny_benchmark)
    path = tmp_path / "test_ranking.json"
    n = bench.write_ranking(path, "test", min_relevance=0.5)
    oracle = bench.oracle("test").moment_relevance(0.5)
    data = load_tvr_ranking(path)
    assert n == oracle.nnz == data.stats["n_relevant_pairs"] and data.stats["n_spans_clamped"] == 0
    assert data.relevance.query_ids == oracle.query_ids

    def entries(rel):
        return sorted((rel.query_ids[q], rel.video_ids[v], round(s, 6), round(e, 6), round(float(x), 6)) for q, v, s, e, x
                      in zip(rel.row_ids(), rel.video_idx, rel.start, rel.end, rel.value, strict=True))

    assert entries(data.relevance) == entries(oracle)  # videos are numbered in file order, the entries are the same
    grouped = json.loads(path.read_text())  # the released layout: queries, each with its relevant_moment list
    assert [str(q["query_id"]) for q in grouped] == oracle.query_ids and data.layout == "grouped"
    pairs = [m for q in grouped for m in q["relevant_moment"]]
    assert {p["relevance"] for p in pairs} >= {4.0, 2.0}  # exact events (1.0) and half matches (0.5)
    assert sum(bool(p["caption"]) for p in pairs) > n / 4  # captioned events carry their description
    # the oracle's own moments, most relevant first, as a ranking: NDCG 100 at every K and IoU
    lists = []
    for i in range(len(oracle)):
        v, s, e, val = oracle.row(i)
        order = np.argsort(-val, kind="stable")
        lists.append([(int(v[j]), float(s[j]), float(e[j]), float(val[j])) for j in order])
    perfect = RankedMoments.from_lists(oracle.query_ids, oracle.video_ids, lists)
    out = ndcg_iou(perfect, data.relevance)
    assert out["n_queries"] == len(oracle) and all(out[k] == 100.0 for k in out if k != "n_queries")
    # shifted by 40 % of their length the moments still match at IoU 0.3 but not at 0.7
    shifted = RankedMoments.from_lists(oracle.query_ids, oracle.video_ids, [
        [(v, s + 0.4 * (e - s), e + 0.4 * (e - s), x) for v, s, e, x in row] for row in lists])
    out = ndcg_iou(shifted, data.relevance)
    assert out["NDCG@10 IoU0.3"] == 100.0 and out["NDCG@10 IoU0.7"] == 0.0


@pytest.mark.slow
def test_evaluate_reports_ndcg_iou_for_the_oracle_and_for_a_ranking_file(tiny_benchmark, tmp_path):
    from momentsearch.api import evaluate, train
    from momentsearch.cli.evaluate_cmd import run_evaluate_predictions
    from momentsearch.data.dataset import DatasetConfig
    from momentsearch.data.synthetic import SyntheticBenchmark
    from momentsearch.training.config import TrainConfig

    path = tmp_path / "test_ranking.json"
    SyntheticBenchmark.load(tiny_benchmark).write_ranking(path, "test")
    cfg = TrainConfig(dataset=DatasetConfig(benchmark=str(tiny_benchmark)), model={"name": "xml", "hidden": 32},
                      out_dir=str(tmp_path / "run"), epochs=1, batch_size=32, lr=1e-3)
    trainer = train(cfg, progress=False)
    ev = evaluate(trainer.ckpt_dir / "best.pt", "test", tmp_path / "eval", progress=False, ranking=path)
    oracle, from_file = ev.metrics["ndcg_iou"], ev.metrics["ranking"]
    # the file holds the same queries and grades, ranked again by text: the same numbers
    assert {k: from_file[k] for k in oracle} == oracle and from_file["n_queries"] == 85
    assert 0 < ev.row["NDCG@10 IoU0.5"] < 100 and ev.row["NDCG@40 IoU0.3"] >= ev.row["NDCG@40 IoU0.7"]
    assert "NDCG@K,IoU" in ev.markdown
    # the same from the written TVR-format predictions
    m = run_evaluate_predictions(tmp_path / "eval" / "predictions.json", None, None, (0.5,), (1,), True, None, path)
    assert {k: m["NDCG@K,IoU"][k] for k in oracle} == oracle


def test_a_ranking_file_given_as_a_corpus_says_what_it_is(tmp_path):
    from momentsearch.data.loaders import load_corpus

    p = tmp_path / "tvr_ranking_val.json"
    p.write_text(json.dumps(PAIRS))
    with pytest.raises(AnnotationError, match="TVR-Ranking file.*evaluate --ranking"):
        load_corpus(p)


def test_cli_exports_the_oracle_and_scores_predictions_against_it(tiny_benchmark, tmp_path):
    from typer.testing import CliRunner

    from momentsearch.cli.main import app
    from momentsearch.data.synthetic import SyntheticBenchmark
    from momentsearch.evaluation import Submission

    runner = CliRunner()
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["data", "export-ranking", str(tiny_benchmark), "--out", str(out)])
    assert res.exit_code == 0 and "graded pairs of split test" in res.output, res.output
    res = runner.invoke(app, ["data", "export-ranking", str(tiny_benchmark), "--out", str(out), "--min-relevance", "0"])
    assert res.exit_code == 2 and "(0, 1]" in res.output
    # the annotated moment of every test query, ranked first: VCMR from the ground truth itself
    test = SyntheticBenchmark.load(tiny_benchmark).corpus.split("test")
    vids = list(test.videos)
    ranked = RankedMoments.from_lists([m.query_id for m in test.moments], vids,
                                      [[(vids.index(m.video_id), *m.spans[0], 1.0)] for m in test.moments])
    pred = tmp_path / "pred.json"
    Submission.from_ranked({"VCMR": ranked}).write(pred)
    res = runner.invoke(app, ["evaluate-predictions", str(pred), "--ranking", str(out), "--json"])
    assert res.exit_code == 0, res.output
    nd = json.loads(res.output)["NDCG@K,IoU"]
    # one grade-4 moment found per query, out of its grade-2..4 moments: between 0 and 100, the same at every IoU
    assert 0 < nd["NDCG@10 IoU0.3"] == nd["NDCG@10 IoU0.7"] < 100 and nd["n_queries"] == len(test)
    res = runner.invoke(app, ["evaluate-predictions", str(pred)])
    assert res.exit_code == 2 and "--ground-truth" in res.output
