"""MVMR: the released pools against the paper's Table 3, pool building by hand, the protocol's metric
by hand, and the protocol end to end (with the whole split as the pool it equals standard VCMR)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import shared
from momentsearch.cli.main import app
from momentsearch.data.corpus import Corpus, Moment, Video
from momentsearch.data.mvmr import PAPER_TABLE3, MVMRPools, Positive, load_mvmr_pools, write_mvmr_pools
from momentsearch.errors import AnnotationError
from momentsearch.evaluation.mvmr import ks_for, mvmr_metrics, mvmr_per_query, restrict_ranking
from momentsearch.relevance.pool_builder import PoolConfig, build_pools, compare_pools, oracle_errors, text_similarity
from momentsearch.search.ranked import RankedMoments


@pytest.mark.parametrize("name,dataset", [("charades_test_mvmr.json", "charades"), ("tacos_test_mvmr.json", "tacos")])
def test_released_full_pools_reproduce_the_papers_table_3(name: str, dataset: str) -> None:
    pools = load_mvmr_pools(shared(f"mvmr/{name}"))
    full = pools.full().stats()
    paper = PAPER_TABLE3[dataset]
    for key in ("n_queries", "n_videos", "pool_size", "max_positives"):
        assert full[key] == paper[key], key
    for key in ("moment_len_s", "video_len_s", "positives_per_query", "query_words"):
        assert full[key] == pytest.approx(paper[key], abs=0.005), key
    assert pools.join["span_differs"] == 0  # TACoS frames / fps give the annotation's seconds
    assert pools.join["text_differs"] == {"charades": 12, "tacos": 0}[dataset]  # typos corrected in the release
    # every extra positive lies in its query's pool, after the gold video
    for q, ps in pools.positives.items():
        assert pools.pools[q][0] == ps[0].video_id
        assert {p.video_id for p in ps[1:]} <= set(pools.pools[q][1:])


def tiny_corpus() -> Corpus:
    vids = [Video(f"v{i}", 10.0) for i in range(4)]
    ms = [Moment("a", "x", "v0", ((0, 1),)), Moment("b", "y", "v1", ((1, 2),)),
          Moment("c", "z", "v1", ((2, 3),)), Moment("d", "w", "v2", ((3, 4),))]
    return Corpus.from_parts(vids, ms)


EMB = np.array([[1, 0], [0.96, 0.28], [0, 1], [0.6, 0.8]], np.float32)  # unit rows: cos(a,b) .96, (a,d) .6, (b,d) .8


def test_text_similarity_is_the_max_over_each_videos_queries() -> None:
    s_te, arg = text_similarity(tiny_corpus(), EMB, block=3, progress=False)
    assert s_te[0].tolist() == pytest.approx([1.0, 0.96, 0.6, 0.0])  # v1: max(cos(a,b) .96, cos(a,c) 0)
    assert s_te[2].tolist() == pytest.approx([0.0, 1.0, 0.8, 0.0])  # c's own video, then d
    assert arg[0].tolist() == [0, 1, 3, -1] and arg[2, 1] == 2  # which query gave it; -1: no queries


def test_pools_by_hand() -> None:
    c = tiny_corpus()
    s_te, arg = text_similarity(c, EMB, progress=False)
    pools, stats = build_pools(c, s_te, arg, PoolConfig(n=3, k=2, t_pos=0.9, t_neg=0.5))
    # a: v1 is positive (.96 >= .9), v2 (.6) neither, v3 (0) negative -> [v0, v1, v3]
    assert pools.pools["a"] == ["v0", "v1", "v3"]
    assert pools.positives["a"][1] == Positive("v1", (1, 2), "y")  # the moment of b, v1's most similar query
    assert pools.pools["c"] == ["v1", "v0", "v3"] and len(pools.positives["c"]) == 1
    assert "d" not in pools.pools and stats["n_left_out"] == 1  # d: v0 .6 and v1 .8 are neither: 2 < 3 videos
    # a scorer that vetoes v1 for a (s_tv below the gold pairs' mean) removes the positive
    s_tv = np.ones_like(s_te)
    s_tv[0, 1] = 0.0
    vetoed, st = build_pools(c, s_te, arg, PoolConfig(n=3, k=2, t_pos=0.9, t_neg=0.5), s_tv)
    assert "a" not in vetoed.pools and st["mu_s_tv_gold"] == 1.0  # a: v1 neither positive nor negative now
    truth = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [0, 1, 0, 0.7], [0, 0, 1, 0]], np.float32)
    err = oracle_errors(pools, truth, ["v0", "v1", "v2", "v3"])
    assert err["extra_positives"] == 2 and err["false_positive_rate_below_1"] == 0.0  # a->v1, b->v0
    # negatives: a v3, b v3, c v0 and v3; only c's v3 is relevant (.7)
    assert err["false_negative_rate_at_0.5"] == 0.25 and err["negatives"] == 4
    cands = {"a": {"v1"}, "b": {"v0"}, "c": set()}
    assert compare_pools(pools, pools, cands)["their_extras_among_our_candidates"] == 1.0
    # more positives than k - 1 and fewer negatives than n - k: a, b and c lack the one negative an n = 4,
    # k = 2 pool needs beside its gold video and one positive; left out and counted (it raised a ValueError)
    s_te2 = np.full_like(s_te, 0.95)
    s_te2[:, 3] = 0.0  # v3: every query's only negative
    s_te2[3, :] = [0.95, 0.95, 0.0, 0.0]  # d (gold v2): v0, v1 positive; v2 its own; v3 negative
    few, st = build_pools(c, s_te2, arg, PoolConfig(n=3, k=2, t_pos=0.9, t_neg=0.5))
    assert set(few.pools) == {"a", "b", "c", "d"} and all(len(p) == 3 for p in few.pools.values())
    assert all(len(ps) == 2 and p[2] == "v3" for p, ps in zip(few.pools.values(), few.positives.values(), strict=True))
    none, st = build_pools(c, s_te2, arg, PoolConfig(n=4, k=2, t_pos=0.9, t_neg=0.5))
    assert not none.pools and st["n_left_out"] == 4


def test_pool_file_round_trip_and_errors(tmp_path: Path) -> None:
    c = tiny_corpus()
    s_te, arg = text_similarity(c, EMB, progress=False)
    pools, _ = build_pools(c, s_te, arg, PoolConfig(n=3, k=2, t_pos=0.9, t_neg=0.5))
    f = tmp_path / "pools.json"
    write_mvmr_pools(f, c, pools.pools, {q: ps[1:] for q, ps in pools.positives.items()})
    back = load_mvmr_pools(f, c)
    assert back.pools == pools.pools and back.positives == pools.positives
    assert back.join["queries_without_pool"] == 1  # d, written with an empty pool
    data = json.loads(f.read_text())
    data["v0"]["retrieval_pool"][0] = ["v1", "v0", "v3"]
    f.write_text(json.dumps(data))
    with pytest.raises(AnnotationError, match=r"pools\.json.*record v0.*must start with the gold video 'v0'"):
        load_mvmr_pools(f, c)
    data["v0"]["retrieval_pool"][0] = ["v0", "v9", "v3"]
    f.write_text(json.dumps(data))
    with pytest.raises(AnnotationError, match="pool video 'v9' is not in the annotations"):
        load_mvmr_pools(f, c)
    data["v0"]["sentences"].append("extra")
    data["v0"]["timestamps"].append([0, 1])
    f.write_text(json.dumps(data))
    with pytest.raises(AnnotationError, match="1 sentences, .*|2 sentences, 1 pos_moments"):
        load_mvmr_pools(f, c)
    with pytest.raises(AnnotationError, match="cannot tell which annotation file"):
        load_mvmr_pools(f)


def test_mvmr_recall_counts_any_positive_by_hand() -> None:
    c = tiny_corpus()
    pools = MVMRPools("t", c, {"a": ["v0", "v1", "v3"], "b": ["v1", "v0", "v3"]},
                      {"a": [Positive("v0", (0, 1), "x"), Positive("v1", (1, 2), "y")],
                       "b": [Positive("v1", (1, 2), "y")]})
    vids = ["v0", "v1", "v2", "v3"]
    # a: rank 1 hits the EXTRA positive exactly; b: rank 1 wrong video, rank 2 on v1 at tIoU 0.5 (1.5-2 vs 1-2)
    ranked = RankedMoments(["a", "b"], vids, np.array([[1, 0], [3, 1]]), np.array([[1.0, 0.0], [0.0, 1.5]]),
                           np.array([[2.0, 1.0], [1.0, 2.0]]), np.array([[2.0, 1.0], [2.0, 1.0]]))
    m = mvmr_metrics({"VCMR": ranked}, pools, vids, ks=(1, 5))
    assert m["MVMR"]["0.5-r1"] == 50.0 and m["MVMR"]["0.5-r5"] == 100.0 and m["MVMR"]["0.7-r5"] == 50.0
    assert m["positives_per_query"] == 1.5
    assert ks_for(50) == (1, 5, 10, 20, 50) and ks_for(5) == (1, 5, 10, 20)
    # each query's own hits (issue 75 part 4): a hits at rank 1; b first at rank 2, at tIoU 0.5 but not 0.7
    per = mvmr_per_query({"VCMR": ranked}, pools, vids)
    assert per["a"] == {"MVMR 0.5-r1": 100.0, "MVMR 0.5-r5": 100.0, "MVMR 0.5-r10": 100.0, "MVMR 0.7-r1": 100.0,
                        "MVMR 0.7-r5": 100.0, "MVMR 0.7-r10": 100.0}
    assert per["b"] == {"MVMR 0.5-r1": 0.0, "MVMR 0.5-r5": 100.0, "MVMR 0.5-r10": 100.0, "MVMR 0.7-r1": 0.0,
                        "MVMR 0.7-r5": 0.0, "MVMR 0.7-r10": 0.0}
    for key, mean in (("0.5-r1", 50.0), ("0.5-r5", 100.0), ("0.7-r5", 50.0)):  # their means are the recalls
        assert np.mean([per[q][f"MVMR {key}"] for q in per]) == mean == m["MVMR"][key]
    # a corpus-wide ranking cut to the pools: b's moment on v2 is dropped, the rest keep their order
    wide = RankedMoments(["a", "b"], vids, np.array([[2, 1], [2, 1]]), np.array([[0.0, 1.0], [0.0, 1.0]]),
                         np.array([[1.0, 2.0], [1.0, 2.0]]), np.array([[2.0, 1.0], [2.0, 1.0]]))
    cut = restrict_ranking(wide, pools)
    assert cut.video_idx.tolist() == [[1, -1], [1, -1]] and cut.start[0, 0] == 1.0


@pytest.mark.slow
def test_protocol_with_the_whole_split_as_pool_is_standard_vcmr(tiny_benchmark: Path, tmp_path: Path) -> None:
    import momentsearch
    from momentsearch.data.synthetic import SyntheticBenchmark
    from momentsearch.training.trainer import Trainer
    from test_xml_training import tiny_cfg

    Trainer(tiny_cfg(tiny_benchmark, tmp_path / "run", 1), progress=False).fit()
    ckpt = tmp_path / "run" / "checkpoints" / "best.pt"
    n_videos = len(SyntheticBenchmark.load(tiny_benchmark).corpus.split("test").videos)
    out = tmp_path / "all.json"
    r = CliRunner().invoke(app, ["build-mvmr", "-d", str(tiny_benchmark), "-o", str(out), "--n", str(n_videos),
                                 "--k", "1", "--t-pos", "1.0", "--t-neg", "1.0"])
    assert r.exit_code == 0, r.output
    stats = json.loads(out.with_suffix(".stats.json").read_text())
    assert stats["build"]["n_left_out"] == 0 and stats["pools"]["pool_size"] == n_videos
    assert stats["oracle"]["extra_positives"] == 0
    std = momentsearch.evaluate(ckpt, "test", progress=False).row
    # the standard path's NMS (the family's 0.7) and its 20 spans per video, in place of the protocol's
    ev_out = tmp_path / "eval_mvmr"
    mv = momentsearch.evaluate_mvmr(ckpt, out, out=ev_out, progress=False, nms_threshold=0.7,
                                    candidates_per_video=20).row
    per = json.loads((ev_out / "per_query.json").read_text())  # each query's hits, stored beside the metrics
    assert len(per) == stats["pools"]["n_queries"] and np.mean([h["MVMR 0.5-r1"] for h in per.values()]) == (
        pytest.approx(mv["MVMR 0.5-r1"], abs=0.005))
    for t in ("0.3", "0.5", "0.7"):
        assert mv[f"MVMR {t}-r1"] == pytest.approx(std[f"VCMR {t}-r1"]), t
        assert mv[f"MVMR {t}-r10"] == pytest.approx(std[f"VCMR {t}-r10"]), t
        assert mv[f"NLVL {t}-r1"] == pytest.approx(std[f"SVMR {t}-r1"]), t
    # the protocol's defaults: full pools only (one pool cut short is left out and counted), NMS 0.5
    # (0.4 on TACoS) whatever the family's, every proposal of each map ranked
    from dataclasses import replace

    from momentsearch.data.mvmr import load_mvmr_pools
    from momentsearch.evaluation.mvmr import protocol_nms

    pools = load_mvmr_pools(out, SyntheticBenchmark.load(tiny_benchmark).corpus.split("test"))
    short = next(iter(pools.pools))
    cut = replace(pools, pools={**pools.pools, short: pools.pools[short][:3]})
    ev = momentsearch.evaluate_mvmr(ckpt, cut, progress=False)
    m = ev.metrics
    assert (m["n_queries"], m["pools_left_out"], m["pools_in_file"]) == (len(pools.pools) - 1, 1, len(pools.pools))
    assert (m["nms_threshold"], m["candidates_per_video"]) == (0.5, "all") and "1 smaller pools" in ev.markdown
    every = momentsearch.evaluate_mvmr(ckpt, cut, progress=False, all_pools=True).metrics
    assert every["n_queries"] == len(pools.pools) and every["pools_left_out"] == 0
    assert protocol_nms(replace(pools, name="tacos_test_mvmr")) == 0.4
    assert protocol_nms(replace(pools, name="charades_test_mvmr")) == protocol_nms(pools) == 0.5
    assert mv["MVMR-VR r1"] == pytest.approx(std["VR r1"])
    # the model as s_tv scorer: negatives must score at most the mean over s_te-negatives, which a model
    # that ranks gold videos high puts below the gold pairs' mean
    r = CliRunner().invoke(app, ["build-mvmr", "-d", str(tiny_benchmark), "-o", str(tmp_path / "scored.json"),
                                 "--n", "4", "--k", "2", "--scorer", str(ckpt)])
    assert r.exit_code == 0, r.output
    build = json.loads((tmp_path / "scored.stats.json").read_text())["build"]
    assert build["scorer"] and build["mu_s_tv_gold"] > build["mu_s_tv_negatives"]
    assert build["negative_candidates_per_query"] < stats["build"]["negative_candidates_per_query"]
