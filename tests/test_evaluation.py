"""VR / SVMR / VCMR recall with TVR's conventions, on hand-computed cases."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from momentsearch.data.corpus import Corpus, Moment, Video
from momentsearch.errors import PredictionError
from momentsearch.evaluation import RankedMoments, Submission, evaluate_submission, temporal_iou
from momentsearch.evaluation.recall import GroundTruth, evaluate_task


def corpus(moments: list[Moment], durations: dict[str, float] | None = None) -> Corpus:
    vids = durations or {"v0": 30.0, "v1": 30.0, "v2": 30.0, "v3": 30.0}
    return Corpus.from_parts([Video(v, d) for v, d in vids.items()], moments)


VIDS = ["v0", "v1", "v2", "v3"]


def ranked(lists: list[list[tuple[int, float, float]]], qids: list[str] | None = None) -> RankedMoments:
    qids = qids or [str(i) for i in range(len(lists))]
    return RankedMoments.from_lists(qids, VIDS, [[(*p, 0.0) for p in row] for row in lists])


def run(task: str, c: Corpus, lists, ks=(1, 5), thr=(0.5, 0.7), **kw) -> dict[str, float]:
    gt = GroundTruth.from_corpus(c, VIDS)
    return evaluate_task(task, ranked(lists, [m.query_id for m in c.moments]), gt, thr, ks, **kw)[0]


def test_temporal_iou_hand_values() -> None:
    assert temporal_iou(0, 10, 5, 15) == pytest.approx(5 / 15)
    assert temporal_iou(2, 4, 0, 10) == pytest.approx(0.2)
    assert temporal_iou(0, 5, 5, 10) == 0.0  # touching
    assert temporal_iou(5, 5, 5, 5) == 0.0  # zero-length: hull 0 -> 0, as in TVR
    assert temporal_iou(3, 3, 0, 10) == 0.0  # zero-length prediction inside the span
    assert temporal_iou(200, 210, 0, 10) == 0.0  # outside the video
    assert temporal_iou(5, 3, 0, 10) == 0.0  # start > end never overlaps
    assert temporal_iou(np.array([0.0, 1.0]), np.array([10.0, 2.0]), 0, 10).tolist() == [1.0, 0.10000000149011612]


def test_iou_threshold_is_compared_in_float32() -> None:
    # 0.7 as float32 is 0.699999988; 7/10 in float32 meets it, as TVR's evaluation (float32) has it
    m = [Moment("0", "q", "v0", ((0.0, 10.0),))]
    assert run("VCMR", corpus(m), [[(0, 0.0, 7.0)]], thr=(0.7,))["0.7-r1"] == 100.0
    assert run("VCMR", corpus(m), [[(0, 0.0, 6.99)]], thr=(0.7,))["0.7-r1"] == 0.0


def test_vcmr_hand_computed() -> None:
    ms = [Moment(str(i), "q", "v0", ((0.0, 10.0),)) for i in range(3)]
    lists = [
        [(0, 0.0, 10.0)],  # hit at rank 1
        [(1, 0.0, 10.0), (0, 20.0, 30.0), (0, 1.0, 9.0)],  # wrong video, miss, hit (iou 0.8) at rank 3
        [(0, 0.0, 6.0), (0, 0.0, 4.0)],  # iou 0.6: hit at 0.5, miss at 0.7
    ]
    got = run("VCMR", corpus(ms), lists)
    assert got == {"0.5-r1": 66.67, "0.5-r5": 100.0, "0.7-r1": 33.33, "0.7-r5": 66.67}


def test_list_order_is_the_ranking_and_scores_are_ignored() -> None:
    ms = [Moment("0", "q", "v0", ((0.0, 10.0),))]
    rm = RankedMoments.from_lists(["0"], VIDS, [[(1, 0.0, 10.0, 0.1), (0, 0.0, 10.0, 0.9)]])
    gt = GroundTruth.from_corpus(corpus(ms), VIDS)
    assert evaluate_task("VCMR", rm, gt, (0.5,), (1, 2))[0] == {"0.5-r1": 0.0, "0.5-r2": 100.0}


def test_ties_in_score_do_not_matter() -> None:
    ms = [Moment("0", "q", "v0", ((0.0, 10.0),))]
    rm = RankedMoments.from_lists(["0"], VIDS, [[(1, 0.0, 10.0, 0.5), (0, 0.0, 10.0, 0.5)]])
    gt = GroundTruth.from_corpus(corpus(ms), VIDS)
    assert evaluate_task("VCMR", rm, gt, (0.5,), (1, 2))[0] == {"0.5-r1": 0.0, "0.5-r2": 100.0}


def test_only_the_first_100_predictions_count() -> None:
    ms = [Moment("0", "q", "v0", ((0.0, 10.0),))]
    lists = [[(1, 0.0, 10.0)] * 100 + [(0, 0.0, 10.0)]]
    assert run("VCMR", corpus(ms), lists, ks=(100,), thr=(0.5,)) == {"0.5-r100": 0.0}
    assert run("VCMR", corpus(ms), lists, ks=(101,), thr=(0.5,)) == {"0.5-r101": 0.0}  # cut at 100 first
    assert run("VCMR", corpus(ms), lists, ks=(101,), thr=(0.5,), max_predictions=101) == {"0.5-r101": 100.0}


def test_svmr_keeps_only_predictions_on_the_ground_truth_video() -> None:
    ms = [Moment("0", "q", "v0", ((0.0, 10.0),))]
    lists = [[(1, 0.0, 10.0), (2, 0.0, 10.0), (0, 0.0, 10.0)]]
    assert run("SVMR", corpus(ms), lists, thr=(0.5,)) == {"0.5-r1": 100.0, "0.5-r5": 100.0}
    assert run("VCMR", corpus(ms), lists, thr=(0.5,)) == {"0.5-r1": 0.0, "0.5-r5": 100.0}
    lists = [[(0, 20.0, 30.0), (1, 0.0, 10.0), (0, 0.0, 10.0)]]  # second on the right video
    assert run("SVMR", corpus(ms), lists, ks=(1, 2), thr=(0.5,)) == {"0.5-r1": 0.0, "0.5-r2": 100.0}


def test_vr_counts_repeated_videos_as_they_come() -> None:
    ms = [Moment("0", "q", "v0", ((0.0, 10.0),))]
    lists = [[(1, 0, 0), (1, 0, 0), (1, 0, 0), (0, 0, 0)]]
    assert run("VR", corpus(ms), lists, ks=(1, 3, 4)) == {"r1": 0.0, "r3": 0.0, "r4": 100.0}


def test_didemo_needs_two_of_four_annotators() -> None:
    spans = ((0.0, 5.0), (0.0, 5.0), (5.0, 10.0), (10.0, 15.0))
    ms = [Moment("0", "q", "v0", spans), Moment("1", "q", "v0", spans)]
    lists = [[(0, 0.0, 5.0)], [(0, 5.0, 10.0)]]  # 2 annotators agree vs only 1
    assert run("VCMR", corpus(ms), lists, ks=(1,), thr=(0.5,)) == {"0.5-r1": 50.0}
    three = (spans[0], spans[2], spans[3])  # fewer than 4 spans: any one suffices
    ms = [Moment("0", "q", "v0", three)]
    assert run("VCMR", corpus(ms), [[(0, 10.0, 15.0)]], ks=(1,), thr=(0.5,)) == {"0.5-r1": 100.0}


def test_empty_predictions_and_zero_length_spans_are_misses() -> None:
    ms = [Moment("0", "q", "v0", ((0.0, 10.0),)), Moment("1", "q", "v1", ((4.0, 4.0),))]
    lists = [[], [(1, 4.0, 4.0)]]
    assert run("VCMR", corpus(ms), lists, ks=(1,), thr=(0.3,)) == {"0.3-r1": 0.0}
    assert run("VR", corpus(ms), lists, ks=(1,)) == {"r1": 50.0}


def test_every_ground_truth_query_needs_a_prediction_entry() -> None:
    ms = [Moment("0", "q", "v0", ((0.0, 10.0),)), Moment("1", "q", "v0", ((0.0, 10.0),))]
    gt = GroundTruth.from_corpus(corpus(ms), VIDS)
    with pytest.raises(PredictionError, match=r"1 ground-truth queries have no prediction entry, e.g. desc_id \['1'\]"):
        evaluate_task("VCMR", ranked([[(0, 0, 10)]], ["0"]), gt)
    with pytest.raises(PredictionError, match=r"name queries that the ground truth lacks, e.g. desc_id \['7'\]"):
        evaluate_task("VCMR", ranked([[(0, 0, 10)]] * 3, ["0", "1", "7"]), gt)


def test_errors_while_evaluating_a_file_name_the_file_the_task_and_the_query(tmp_path: Path) -> None:
    ms = [Moment("0", "q", "v0", ((0.0, 10.0),)), Moment("1", "q", "v0", ((0.0, 10.0),))]
    p = tmp_path / "pred.json"
    Submission.from_ranked({"VCMR": ranked([[(0, 0, 10)]], ["0"])}).write(p)
    with pytest.raises(PredictionError, match=r"pred.json: VCMR: 1 ground-truth queries have no prediction entry, "
                                              r"e.g. desc_id \['1'\]"):
        evaluate_submission(Submission.read(p), corpus(ms))


def _tvr_reference(sub: dict, gt: list[dict], thr: float, k: int, task: str) -> float:
    """TVR's rules written as a plain loop, independently of the vectorised code."""
    v2i = sub["video2idx"]
    by_id = {e["desc_id"]: e["predictions"][:100] for e in sub[task]}
    hits = 0
    for g in gt:
        preds = by_id[g["desc_id"]]
        if task == "SVMR":
            preds = [p for p in preds if p[0] == v2i[g["vid_name"]]]
        found = False
        for p in preds[:k]:
            same = p[0] == v2i[g["vid_name"]]
            if task == "VR":
                found |= same
                continue
            spans = g["ts"] if isinstance(g["ts"][0], list) else [g["ts"]]
            n_ok = 0
            for s in spans:
                a = np.float32([p[1], p[2], s[0], s[1]])
                inter = max(np.float32(0), min(a[1], a[3]) - max(a[0], a[2]))
                hull = max(a[1], a[3]) - min(a[0], a[2])
                iou = inter / hull if hull != 0 else np.float32(0)
                n_ok += bool(same and iou >= np.float32(thr))
            found |= n_ok >= (2 if len(spans) >= 4 else 1)
        hits += found
    return round(hits / len(gt) * 100, 2)


def test_matches_a_plain_reference_on_random_submissions(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    nv, nq = 12, 300
    vids = [f"vid{i}" for i in range(nv)]
    dur = {v: float(rng.uniform(10, 60)) for v in vids}
    gt, moments = [], []
    for q in range(nq):
        v = vids[rng.integers(nv)]
        n = 4 if q % 3 == 0 else 1
        spans = []
        for _ in range(n):
            a, b = np.sort(rng.uniform(0, dur[v], 2)).round(1)
            spans.append([float(a), float(b)])
        gt.append({"desc_id": q, "vid_name": v, "ts": spans if n > 1 else spans[0]})
        moments.append(Moment(str(q), "q", v, tuple(map(tuple, spans))))
    c = Corpus.from_parts([Video(v, d) for v, d in dur.items()], moments)
    sub = {"video2idx": {v: i + 10 for i, v in enumerate(vids)}}  # indices need not start at 0
    for task in ("VCMR", "SVMR", "VR"):
        entries = []
        for q in range(nq):
            n = int(rng.integers(0, 130))
            preds = []
            for _ in range(n):
                v = vids[rng.integers(nv)] if rng.random() < 0.7 else gt[q]["vid_name"]
                a, b = np.sort(rng.uniform(0, dur[v], 2)).round(1)
                preds.append([sub["video2idx"][v], float(a), float(b), float(rng.random())])
            if q % 5 == 0 and task != "VR":  # plant near-exact answers
                g = gt[q]["ts"] if not isinstance(gt[q]["ts"][0], list) else gt[q]["ts"][0]
                preds.insert(int(rng.integers(0, 20)), [sub["video2idx"][gt[q]["vid_name"]], g[0], g[1] + 0.3, 1.0])
            entries.append({"desc_id": q, "desc": "q", "predictions": preds})
        sub[task] = entries
    path = tmp_path / "sub.json"
    path.write_text(json.dumps(sub))
    ks, thr = (1, 5, 10, 100), (0.3, 0.5, 0.7)
    got = evaluate_submission(Submission.read(path), c, thr, ks)
    for task in ("VCMR", "SVMR", "VR"):
        for k in ks:
            if task == "VR":
                assert got[task][f"r{k}"] == _tvr_reference(sub, gt, 0, k, task)
                continue
            for t in thr:
                assert got[task][f"{t}-r{k}"] == _tvr_reference(sub, gt, t, k, task), (task, t, k)
    assert 0 < got["VCMR"]["0.5-r100"] < 100  # the case is not degenerate


def test_submission_round_trip_and_top_100(tmp_path: Path) -> None:
    rm = RankedMoments.from_lists(["5", "abc"], VIDS, [[(0, 1.0, 2.0, 0.9)] * 150, []], query_texts=["x", "y"])
    sub = Submission.from_ranked({"VCMR": rm})
    sub.write(tmp_path / "s.json")
    raw = json.loads((tmp_path / "s.json").read_text())
    assert raw["video2idx"] == {"v0": 0, "v1": 1, "v2": 2, "v3": 3}
    assert raw["VCMR"][0]["desc_id"] == 5 and len(raw["VCMR"][0]["predictions"]) == 100
    assert raw["VCMR"][0]["predictions"][0] == [0, 1.0, 2.0, 0.9]
    assert raw["VCMR"][1] == {"desc_id": "abc", "desc": "y", "predictions": []}
    back = Submission.read(tmp_path / "s.json")
    assert back.tasks["VCMR"].query_ids == ["5", "abc"] and back.tasks["VCMR"].k == 100


def test_submission_errors(tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    p.write_text('{"video2idx": {"a": 0}, "VCMR": [{"desc_id": 1, "predictions": [[0, 1.0]]}]}')
    with pytest.raises(PredictionError, match=r"s.json: VCMR\[0\].predictions\[0\]: expected \[video_idx, st, ed, score\]"):
        Submission.read(p)
    p.write_text('{"VCMR": []}')
    with pytest.raises(PredictionError, match="expected an object with 'video2idx'"):
        Submission.read(p)
    p.write_text('{"video2idx": {"a": 0, "b": 0}, "VR": []}')
    with pytest.raises(PredictionError, match="gives index 0 to both 'a' and 'b'"):
        Submission.read(p)
    p.write_text('{"video2idx": {"a": 0}, "VR": [{"desc_id": 1, "predictions": []}, {"desc_id": 1, "predictions": []}]}')
    with pytest.raises(PredictionError, match="desc_id 1 appears twice"):
        Submission.read(p)
    p.write_text("{oops")
    with pytest.raises(PredictionError, match=r"s.json:1: invalid JSON"):
        Submission.read(p)
    # indices too large for int64 (2^63 overflowed the reader) or not integers are refused, not cast
    p.write_text('{"video2idx": {"a": 9223372036854775808}, "VR": []}')
    with pytest.raises(PredictionError, match="integer indices"):
        Submission.read(p)
    for idx in ("1e300", "1.5", "9223372036854775808"):
        p.write_text('{"video2idx": {"a": 0}, "VCMR": [{"desc_id": 1, "predictions": [[%s, 1.0, 2.0, 0.5]]}]}' % idx)
        with pytest.raises(PredictionError, match=r"VCMR\[0\].predictions\[0\]: the video index must be an integer"):
            Submission.read(p)


def test_per_type_metrics_when_the_ground_truth_has_tvr_types(tmp_path: Path) -> None:
    ms = [Moment("0", "q", "v0", ((0.0, 10.0),), query_type="v"), Moment("1", "q", "v1", ((0.0, 10.0),), query_type="t")]
    rm = RankedMoments.from_lists(["0", "1"], VIDS, [[(0, 0.0, 10.0, 1.0)], [(0, 0.0, 10.0, 1.0)]])
    got = evaluate_submission(Submission.from_ranked({"VCMR": rm, "VR": rm}), corpus(ms), (0.5,), (1,))
    assert got["VCMR"] == {"0.5-r1": 50.0}
    assert got["VCMR_by_type"]["v-0.5-r1"] == 100.0 and got["VCMR_by_type"]["t-0.5-r1"] == 0.0
    assert got["VR_by_type"]["desc_type_ratio"] == "v 50.0 t 50.0 vt 0.0"


def test_unknown_video_index_is_a_miss_that_keeps_its_rank(tmp_path: Path) -> None:
    p = tmp_path / "s.json"
    p.write_text(json.dumps({"video2idx": {"v0": 7, "v1": 3}, "VCMR": [
        {"desc_id": 0, "predictions": [[99, 0.0, 10.0, 1.0], [7, 0.0, 10.0, 0.5]]}]}))
    sub = Submission.read(p)
    assert sub.tasks["VCMR"].video_idx.tolist() == [[-2, 0]]
    c = Corpus.from_parts([Video("v0", 30.0), Video("v1", 30.0)], [Moment("0", "q", "v0", ((0.0, 10.0),))])
    got = evaluate_submission(sub, c, (0.5,), (1, 2))
    assert got["VCMR"] == {"0.5-r1": 0.0, "0.5-r2": 100.0}
