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
