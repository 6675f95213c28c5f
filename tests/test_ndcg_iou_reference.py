"""NDCG@K,IoU through the public path equals TVR-Ranking's reference computation on random rankings,
and both layouts of TVR-Ranking's files load to the same tables.

``reference_ndcg_iou`` transcribes the rules of the reference's ``calculate_ndcg_iou``
(Ranking-VMR/TVR-Ranking, ``modules/ndcg_iou.py``) on its own data shapes (dict records keyed by
query), independently of momentsearch's code: ground truth sorted by relevance (stable), grade-0
moments kept, each prediction takes the unmatched moment of its video with the highest tIoU (the
first of equal ones) when that tIoU is greater than T, DCG with 2^rel - 1 over log2(rank + 1), 0 when
the ideal DCG is 0, and the mean over every predicted query.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from momentsearch.cli.evaluate_cmd import run_evaluate_predictions
from momentsearch.data.loaders.tvr_ranking import load_tvr_ranking
from momentsearch.errors import AnnotationError

TS, KS = (0.3, 0.5, 0.7), (10, 20, 40)


def reference_ndcg_iou(all_gt: dict, all_pred: dict, ts=TS, ks=KS) -> dict:
    def iou(a, b):
        inter = max(0, min(a[1], b[1]) - max(a[0], b[0]))
        union = (a[1] - a[0]) + (b[1] - b[0]) - inter
        return inter / union if union > 0 else 0

    def dcg(scores):
        return sum((2 ** s - 1) / np.log2(i + 2) for i, s in enumerate(scores))

    per = {(k, t): [] for k in ks for t in ts}
    for qid, preds in all_pred.items():
        gt = sorted(all_gt[qid], key=lambda g: g["relevance"], reverse=True)
        for t in ts:
            left = list(gt)
            earned = []
            for p in preds:
                same = [g for g in left if g["video_name"] == p["video_name"]]
                if not same:
                    earned.append(0)
                    continue
                ious = [iou(p["timestamp"], g["timestamp"]) for g in same]
                best = int(np.argmax(ious))
                if ious[best] > t:
                    earned.append(same[best]["relevance"])
                    left.remove(same[best])
                else:
                    earned.append(0)
            for k in ks:
                ideal = dcg([g["relevance"] for g in gt][:k])
                per[(k, t)].append(dcg(earned[:k]) / ideal if ideal > 0 else 0)
    return {f"NDCG@{k} IoU{t:g}": float(np.mean(v)) for (k, t), v in per.items()}


def random_case(seed: int, n_queries: int = 40):
    """Ground truth and rankings built to hit the rules' edges: a 1.5 s grid (tIoU exactly 0.5 and
    other ties), grade-0 moments, fractional grades, queries with only grade-0 moments or none, spans
    past the video's end, duplicate predictions, videos without ground truth."""
    rng = random.Random(seed)
    videos = {f"v{i}": rng.choice([30.0, 45.0, 61.5]) for i in range(6)}
    grades = [0, 0, 1, 2, 3, 4, 2.5, 3.25, 0.75]
    gt, preds = {}, {}
    for q in range(n_queries):
        moments = []
        for _ in range(rng.choice([0, 1, 2, 3, 5, 8]) if q else 3):
            v = rng.choice(list(videos))
            if rng.random() < 0.6:
                a = 1.5 * rng.randrange(0, 30)
                span = [a, a + 1.5 * rng.randrange(1, 8)]
            else:
                a = rng.uniform(0, videos[v])
                span = [round(a, 2), round(a + rng.uniform(0.5, 20), 2)]  # may pass the video's end
            moments.append({"video_name": v, "timestamp": span, "duration": videos[v],
                            "relevance": 0 if q % 9 == 4 else rng.choice(grades)})
        gt[str(q)] = moments
        ranked = []
        for _ in range(rng.randrange(1, 45)):
            if moments and rng.random() < 0.5:  # near a ground-truth moment
                m = rng.choice(moments)
                st, ed = m["timestamp"]
                shift = rng.choice([0.0, 1.5, -1.5, 3.0, 0.5 * (ed - st), rng.uniform(-4, 4)])
                ranked.append((m["video_name"], st + shift, ed + shift * rng.choice([1, 0, 2])))
            else:
                a = 1.5 * rng.randrange(0, 30)
                ranked.append((rng.choice(list(videos)), a, a + 1.5 * rng.randrange(1, 10)))
        if rng.random() < 0.2:
            ranked = ranked[:3] * 3  # duplicates
        preds[str(q)] = ranked
    return videos, gt, preds


def write_case(tmp_path, videos, gt, preds, layout):
    pair = 0
    records = []
    for q, moments in gt.items():
        group = []
        for m in moments:
            group.append({"pair_id": pair, **m, "caption": "", "similarity": 0.5})
            pair += 1
        if layout == "grouped":
            records.append({"query_id": int(q), "query": f"query {q}", "relevant_moment": group})
        else:
            records += [{"query_id": int(q), "query": f"query {q}", **g} for g in group]
    ranking = tmp_path / f"ranking_{layout}.json"
    ranking.write_text(json.dumps(records))
    v2i = {v: i for i, v in enumerate(videos)}
    sub = {"video2idx": v2i, "VCMR": [{"desc_id": int(q), "desc": f"query {q}", "predictions": [
        [v2i[v], st, ed, 1.0 - j / 100] for j, (v, st, ed) in enumerate(ranked)]} for q, ranked in preds.items()]}
    predictions = tmp_path / "predictions.json"
    predictions.write_text(json.dumps(sub))
    return ranking, predictions


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("layout", ["grouped", "flat"])
def test_public_path_equals_the_reference_on_random_rankings(tmp_path, seed, layout):
    videos, gt, preds = random_case(seed)
    if layout == "flat":  # a flat file cannot hold a query without moments
        gt = {q: m for q, m in gt.items() if m}
        preds = {q: p for q, p in preds.items() if q in gt}
    ranking, predictions = write_case(tmp_path, videos, gt, preds, layout)
    got = run_evaluate_predictions(predictions, None, None, (0.5,), (1,), True, None, ranking)["NDCG@K,IoU"]
    ref_preds = {q: [{"video_name": v, "timestamp": [st, ed]} for v, st, ed in p] for q, p in preds.items()}
    want = reference_ndcg_iou(gt, ref_preds)
    assert got["n_queries"] == len(gt)
    for key, value in want.items():
        assert got[key] == round(value * 100, 2), key
    # the paper's reading differs on these cases (ties at the threshold, grade-0 matches, all-zero queries)
    paper = run_evaluate_predictions(predictions, None, None, (0.5,), (1,), True, None, ranking, "paper")["NDCG@K,IoU"]
    assert paper["n_queries"] < got["n_queries"] and paper["NDCG@10 IoU0.5"] > got["NDCG@10 IoU0.5"]


def test_both_layouts_and_json_lines_load_to_the_same_tables(tmp_path):
    videos, gt, preds = random_case(5, n_queries=12)
    gt = {q: m for q, m in gt.items() if m}
    grouped, _ = write_case(tmp_path, videos, gt, preds, "grouped")
    flat, _ = write_case(tmp_path, videos, gt, preds, "flat")
    lines = tmp_path / "val.jsonl"
    lines.write_text("\n".join(json.dumps(r) for r in json.loads(grouped.read_text())) + "\n")
    a, b, c = load_tvr_ranking(grouped), load_tvr_ranking(flat), load_tvr_ranking(lines)
    assert (a.layout, b.layout, c.layout) == ("grouped", "flat", "grouped")
    assert a.moments == b.moments == c.moments and a.queries == b.queries == c.queries
    assert a.stats == b.stats == c.stats and a.stats["n_grade_zero"] > 0 and a.stats["n_spans_clamped"] > 0
    for x in (b, c):
        assert x.relevance.query_ids == a.relevance.query_ids
        assert np.array_equal(x.relevance.value, a.relevance.value) and np.array_equal(x.relevance.end, a.relevance.end)
    # the moments are as written: grade 0 kept, spans not clamped
    q = next(q for q, ms in gt.items() if any(m["timestamp"][1] > m["duration"] for m in ms))
    assert a.moments[q] == [(m["video_name"], *map(float, m["timestamp"]), float(m["relevance"])) for m in gt[q]]


@pytest.mark.parametrize(("records", "message", "where"), [
    ([{"query_id": 1, "query": "a", "relevant_moment": [{"video_name": "v", "timestamp": [0, 1], "duration": 5}]}],
     r"relevant_moment\[0\]: missing field 'relevance'", "(record [0] query_id 1)"),
    ([{"query_id": 1, "query": "a", "relevant_moment": "v"}], "field 'relevant_moment' must be list", "[0]"),
    ([{"query_id": 1, "query": "a", "relevant_moment": []}, {"query_id": 1, "query": "b", "relevant_moment": []}],
     "query_id '1' appears twice", "[1]"),
    ([{"query_id": 1, "query": "a", "relevant_moment": []},
      {"pair_id": 0, "query_id": 2, "query": "b", "video_name": "v", "timestamp": [0, 1], "duration": 5, "relevance": 1}],
     "mixes the two layouts", "[1]"),
    ([{"query_id": 1, "query": "a", "relevant_moment": [
        {"pair_id": 3, "video_name": "v", "timestamp": [0, 1], "duration": 5, "relevance": 1},
        {"pair_id": 3, "video_name": "v", "timestamp": [1, 2], "duration": 5, "relevance": 1}]}],
     r"relevant_moment\[1\]: duplicate pair_id '3'", "[0]"),
    ([{"queries": []}], "the first record has the keys", "[0]"),
])
def test_grouped_layout_errors_name_the_query_and_the_moment(tmp_path, records, message, where):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(records))
    with pytest.raises(AnnotationError, match=message) as e:
        load_tvr_ranking(p)
    assert str(p) in str(e.value) and where in str(e.value)


def test_json_lines_errors_name_the_line(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"query_id": 1, "query": "a", "relevant_moment": []}\n\n{"query_id": 2, "query": "b", '
                 '"relevant_moment": [{"video_name": "v", "timestamp": [0], "duration": 5, "relevance": 1}]}\n')
    with pytest.raises(AnnotationError, match=r"bad.jsonl:3 \(record query_id 2\): relevant_moment\[0\]: timestamp"):
        load_tvr_ranking(p)
