from __future__ import annotations

import numpy as np

from momentsearch.data.corpus import Corpus, Moment, Video
from momentsearch.data.relevance import MomentRelevance
from momentsearch.evaluation import RankedMoments, evaluate_ranked, multi_positive_recall

VIDS = ["v0", "v1", "v2"]


def test_hand_case_with_two_relevant_moments() -> None:
    rel = MomentRelevance.from_rows(["q"], VIDS, [[(0, 0.0, 10.0, 1.0), (2, 20.0, 30.0, 1.0), (1, 0.0, 10.0, 0.6)]])
    pred = RankedMoments.from_lists(["q"], VIDS, [[(1, 0.0, 10.0, 0), (2, 20.0, 26.0, 0), (0, 0.0, 10.0, 0)]])
    got = multi_positive_recall(pred, rel, (0.5, 0.7), (1, 2, 3), min_relevance=1.0)
    # rank 1 is only 0.6 relevant; rank 2 overlaps the v2 moment with tIoU 0.6; rank 3 is exact
    assert got["VCMR"] == {"0.5-r1": 0.0, "0.5-r2": 100.0, "0.5-r3": 100.0, "0.7-r1": 0.0, "0.7-r2": 0.0, "0.7-r3": 100.0}
    assert got["VR"] == {"r1": 0.0, "r2": 100.0, "r3": 100.0}
    low = multi_positive_recall(pred, rel, (0.5,), (1,), min_relevance=0.5)
    assert low["VCMR"] == {"0.5-r1": 100.0} and low["VR"] == {"r1": 100.0}


def test_queries_without_relevant_moments_are_left_out() -> None:
    rel = MomentRelevance.from_rows(["a", "b"], VIDS, [[(0, 0.0, 10.0, 1.0)], [(0, 0.0, 10.0, 0.3)]])
    pred = RankedMoments.from_lists(["a", "b"], VIDS, [[(0, 0.0, 10.0, 0)], [(0, 0.0, 10.0, 0)]])
    got = multi_positive_recall(pred, rel, (0.5,), (1,), min_relevance=1.0)
    assert got["n_queries"] == 1 and got["VCMR"] == {"0.5-r1": 100.0}


def test_annotated_relevance_reduces_to_the_standard_metric() -> None:
    rng = np.random.default_rng(3)
    moments = []
    for i in range(200):
        v = VIDS[rng.integers(3)]
        a, b = np.sort(rng.uniform(0, 60, 2))
        moments.append(Moment(str(i), "q", v, ((float(a), float(b)),)))
    c = Corpus.from_parts([Video(v, 60.0) for v in VIDS], moments)
    lists = []
    for m in moments:
        row = []
        for _ in range(30):
            a, b = np.sort(rng.uniform(0, 60, 2))
            row.append((int(rng.integers(3)), float(a), float(b), 0.0))
        if rng.random() < 0.3:
            row.insert(int(rng.integers(10)), (VIDS.index(m.video_id), m.span[0], m.span[1] + 1.0, 0.0))
        lists.append(row)
    pred = RankedMoments.from_lists([m.query_id for m in moments], VIDS, lists)
    std = evaluate_ranked(pred, c, ("VCMR", "VR"), (0.3, 0.5, 0.7), (1, 5, 10))
    mp = multi_positive_recall(pred, MomentRelevance.annotated(c, VIDS), (0.3, 0.5, 0.7), (1, 5, 10))
    assert mp["VCMR"] == std["VCMR"]
    assert mp["VR"] == std["VR"]
    assert std["VCMR"]["0.5-r10"] > 10
    # each query's own hits (issue 75 part 4, what evaluate writes as per_query.json): their means are the recalls
    from momentsearch.evaluation.recall import per_query_hits

    per = per_query_hits({"VCMR": pred, "VR": pred}, c)
    assert sorted(per, key=int) == [m.query_id for m in moments]
    for name, want in (("VCMR 0.5-r1", std["VCMR"]["0.5-r1"]), ("VCMR 0.7-r10", std["VCMR"]["0.7-r10"]),
                       ("VR r1", std["VR"]["r1"]), ("VR r10", std["VR"]["r10"])):
        assert round(float(np.mean([per[q][name] for q in per])), 2) == want, name
    assert set(per["0"].values()) <= {0.0, 100.0}


def test_instance_bounds_hand_case() -> None:
    from momentsearch.evaluation import instance_bounds

    # equivalent at 0.8: v0 0-10 (the annotated one, 1.0) and v2 20-30 (0.9); v1 is only 0.5
    rel = MomentRelevance.from_rows(["q"], VIDS, [[(0, 0.0, 10.0, 1.0), (1, 0.0, 10.0, 0.5), (2, 20.0, 30.0, 0.9)]])
    pred = RankedMoments.from_lists(["q"], VIDS, [[(1, 0.0, 10.0, 0), (2, 20.0, 26.0, 0), (0, 0.0, 10.0, 0)]])
    got = instance_bounds(pred, rel, min_relevance=0.8, iou_threshold=0.5, ks=(1, 2, 3))
    # best equivalent found at rank 2 (tIoU 0.6 with the v2 moment), worst at rank 3 (v0)
    assert got["VCMR@0.5"] == {"upper-r1": 0.0, "upper-r2": 100.0, "upper-r3": 100.0,
                               "lower-r1": 0.0, "lower-r2": 0.0, "lower-r3": 100.0}
    assert got["VR"]["upper-r2"] == 100.0 and got["VR"]["lower-r2"] == 0.0 and got["VR"]["lower-r3"] == 100.0
    assert got["n_equivalent"] == 2.0
    # at tIoU 0.7 the v2 prediction no longer hits; the lower bound needs the v2 moment: a miss
    tight = instance_bounds(pred, rel, min_relevance=0.8, iou_threshold=0.7, ks=(1, 3))
    assert tight["VCMR@0.7"] == {"upper-r1": 0.0, "upper-r3": 100.0, "lower-r1": 0.0, "lower-r3": 0.0}
    # at 0.5 relevance the v1 moment joins, found at rank 1: upper r1 = 100
    loose = instance_bounds(pred, rel, min_relevance=0.5, iou_threshold=0.5, ks=(1, 3))
    assert loose["VCMR@0.5"]["upper-r1"] == 100.0 and loose["VCMR@0.5"]["lower-r3"] == 100.0


def test_instance_bounds_geometric_mean_and_single_positive() -> None:
    from momentsearch.evaluation.bounds import geometric_mean, instance_bounds

    assert geometric_mean([10.0, 40.0, 100.0]) == round((10 * 40 * 100) ** (1 / 3), 2)
    assert geometric_mean([0.0, 50.0]) == 0.0
    rng = np.random.default_rng(5)
    moments, lists = [], []
    for i in range(60):
        v = int(rng.integers(3))
        moments.append(Moment(str(i), "q", VIDS[v], ((10.0, 20.0),)))
        row = [(int(rng.integers(3)), 10.0, 20.0, 0.0) for _ in range(12)]
        lists.append(row)
    c = Corpus.from_parts([Video(v, 60.0) for v in VIDS], moments)
    pred = RankedMoments.from_lists([m.query_id for m in moments], VIDS, lists)
    std = evaluate_ranked(pred, c, ("VCMR", "VR"), (0.5,), (1, 5, 10))
    b = instance_bounds(pred, MomentRelevance.annotated(c, VIDS), ks=(1, 5, 10))
    for k in (1, 5, 10):  # one equivalent item per query: both bounds are the standard number
        assert b["VCMR@0.5"][f"upper-r{k}"] == b["VCMR@0.5"][f"lower-r{k}"] == std["VCMR"][f"0.5-r{k}"]
        assert b["VR"][f"upper-r{k}"] == b["VR"][f"lower-r{k}"] == std["VR"][f"r{k}"]
    assert 0 < std["VR"]["r1"] < 100
