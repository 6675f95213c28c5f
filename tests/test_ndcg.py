"""nDCG (Wray et al. Eqs. 2-3, and the authors' code's variant) on hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from momentsearch.evaluation.ndcg import moment_ndcg, ndcg, ndcg_per_query

L3 = math.log2(3)  # discount of position 2


def test_exp2_gain_no_cutoff_by_hand() -> None:
    rel = np.array([[1.0, 0.5, 0.0]])
    scores = np.array([[0.5, 0.9, 0.1]])  # ranking: item 1 (0.5), item 0 (1.0), item 2
    g1, g05 = 1.0, math.sqrt(2) - 1  # 2^S - 1
    dcg = g05 / 1 + g1 / L3
    idcg = g1 / 1 + g05 / L3
    assert ndcg_per_query(scores, rel)[0] == pytest.approx(dcg / idcg)
    assert ndcg_per_query(scores, rel)[0] == pytest.approx(0.82860, abs=1e-5)


def test_linear_gain_with_cutoff_by_hand() -> None:
    rel = np.array([[1.0, 0.5, 0.0]])
    scores = np.array([[0.5, 0.9, 0.1]])
    got = ndcg_per_query(scores, rel, gain="linear", cutoff="n_relevant")[0]
    assert got == pytest.approx((0.5 + 1 / L3) / (1 + 0.5 / L3))
    # the cut-off matters: one relevant item ranked second scores 0 with it, 1/log2(3) without
    rel1, sc1 = np.array([[1.0, 0.0, 0.0]]), np.array([[0.5, 0.9, 0.1]])
    assert ndcg_per_query(sc1, rel1, gain="linear", cutoff="n_relevant")[0] == 0.0
    assert ndcg_per_query(sc1, rel1)[0] == pytest.approx(1 / L3)


def test_ties_in_scores_do_not_change_ndcg() -> None:
    rel = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])  # the relevant item first or second among a tie
    scores = np.array([[0.5, 0.5, 0.1], [0.5, 0.5, 0.1]])
    got = ndcg_per_query(scores, rel)
    assert got[0] == got[1] == pytest.approx((1 + 1 / L3) / 2)  # the mean discount of positions 1 and 2
    perm = np.array([2, 0, 1])
    assert ndcg_per_query(scores[:, perm], rel[:, perm]) == pytest.approx(got)
    # ties in relevance leave the ideal unchanged: either order of two equally relevant items is perfect
    assert ndcg_per_query(np.array([[0.9, 0.8]]), np.array([[0.7, 0.7]]))[0] == pytest.approx(1.0)
    assert ndcg_per_query(np.array([[0.8, 0.9]]), np.array([[0.7, 0.7]]))[0] == pytest.approx(1.0)


def test_perfect_worst_and_empty() -> None:
    rel = np.array([[0.2, 0.9, 0.0, 0.5], [0.0, 0.0, 0.0, 0.0]])
    assert ndcg_per_query(rel, rel)[0] == pytest.approx(1.0)
    assert math.isnan(ndcg_per_query(rel, rel)[1])  # no relevant item: undefined, left out of means
    assert ndcg(rel, rel, both_directions=False) == pytest.approx(1.0)
    with pytest.raises(ValueError, match=r"relevance must lie in \[0, 1\]"):
        ndcg_per_query(rel, rel * 2)
    with pytest.raises(ValueError, match="same"):
        ndcg_per_query(rel[:, :3], rel)


def test_both_directions_eq3() -> None:
    rel = np.array([[1.0, 0.0], [1.0, 1.0]])
    scores = np.array([[0.1, 0.9], [0.9, 0.1]])
    rows = ndcg_per_query(scores, rel)  # q0: its item ranked second -> 1/log2(3); q1: perfect
    cols = ndcg_per_query(scores.T, rel.T)  # item0: q1 then q0, both relevant -> 1; item1: only q1 relevant, ranked 2nd
    assert rows == pytest.approx([1 / L3, 1.0])
    assert cols == pytest.approx([1.0, 1 / L3])
    assert ndcg(scores, rel) == pytest.approx(0.5 * rows.mean() + 0.5 * cols.mean())


def test_moment_ndcg_credits_each_relevant_moment_once() -> None:
    rel_v, rel_s, rel_e = [np.array([0, 1])], [np.array([0.0, 10.0])], [np.array([10.0, 20.0])]
    rel_val = [np.array([1.0, 0.5])]
    # rank 1 duplicates rank 2's hit on video 0; rank 3 finds the 0.5 moment on video 1
    pv = np.array([[0, 0, 1]])
    ps = np.array([[0.0, 1.0, 10.0]])
    pe = np.array([[10.0, 10.0, 20.0]])
    got = moment_ndcg(pv, ps, pe, rel_v, rel_s, rel_e, rel_val, iou_threshold=0.5)[0]
    g05 = math.sqrt(2) - 1
    assert got == pytest.approx((1.0 + g05 / 2) / (1.0 + g05 / L3))  # position 3 discount = log2(4) = 2


def test_moment_ndcg_is_at_a_fixed_depth() -> None:
    # two equally relevant moments; a list holding only the first must not score a perfect 1
    rel_v, rel_s, rel_e, rel_val = [np.array([0, 1])], [np.array([0.0, 0.0])], [np.array([10.0, 10.0])], [np.ones(2)]
    one = moment_ndcg(np.array([[0]]), np.array([[0.0]]), np.array([[10.0]]), rel_v, rel_s, rel_e, rel_val)[0]
    assert one == pytest.approx(1 / (1 + 1 / L3))
    both = moment_ndcg(np.array([[0, 1]]), np.zeros((1, 2)), np.full((1, 2), 10.0), rel_v, rel_s, rel_e, rel_val)[0]
    assert both == pytest.approx(1.0)


def test_two_way_video_ndcg_ranks_each_videos_queries_by_the_scores() -> None:
    """Eq. 3 on a VR ranking: the text -> video half is the one-way "nDCG VR"; the video -> text half
    ranks each video's queries by the raw scores, so shifting one query's scores changes only it."""
    from momentsearch.data.relevance import MomentRelevance
    from momentsearch.evaluation.ndcg import ranked_ndcg, two_way_video_ndcg
    from momentsearch.search.ranked import RankedMoments

    # video-level S: q0-v0 1.0; q1-v0 0.5, q1-v1 1.0
    rel = MomentRelevance.from_rows(["q0", "q1"], ["v0", "v1"], [[(0, 0.0, 5.0, 1.0)],
                                                                [(0, 0.0, 5.0, 0.5), (1, 0.0, 5.0, 1.0)]])
    g05 = math.sqrt(2) - 1
    q0 = 1 / L3  # its relevant v0 ranked second
    q1 = (g05 + 1 / L3) / (1 + g05 / L3)  # v0 (0.5) above v1 (1.0)

    def vr(q1_scores: list[float]) -> RankedMoments:
        return RankedMoments(["q0", "q1"], ["v0", "v1"], np.array([[1, 0], [0, 1]]), np.zeros((2, 2)),
                             np.full((2, 2), 5.0), np.array([[0.9, 0.1], q1_scores]))

    for scores, v0 in (([0.8, 0.2], q1),  # v0's queries: q1 (0.8, S 0.5) above q0 (0.1, S 1.0)
                       ([0.08, 0.02], 1.0)):  # q1's scores shifted below q0's 0.1: v0 ranks q0 first
        ranking = vr(scores)
        v1 = 1 / L3  # v1's queries: q0 (0.9, S 0) above q1 (S 1.0) either way
        assert ranked_ndcg(ranking, ranking, rel)["nDCG VR"] == pytest.approx(100 * (q0 + q1) / 2, abs=0.01)
        assert two_way_video_ndcg(ranking, rel) == pytest.approx(100 * ((q0 + q1) / 4 + (v0 + v1) / 4), abs=0.01)


def test_eq2_as_written_cuts_at_the_number_of_relevant_items() -> None:
    """Two relevant items (S = 1, 0.5) of four, ranked at positions 1 and 4. Eq. 2 as written stops at |R_q| = 2:
    DCG = 1/log2(2) = 1; IDCG = 1 + 0.4142/log2(3) = 1.2613 -> 0.7928. Without the cut-off position 4 counts too:
    DCG = 1 + 0.4142/log2(5) = 1.1784 -> 0.9343 (the nDCG columns' default)."""
    import numpy as np

    from momentsearch.evaluation.ndcg import EQ2, PAPER, ndcg_per_query

    scores = np.array([[4.0, 3.0, 2.0, 1.0]])
    rel = np.array([[1.0, 0.0, 0.0, 0.5]])
    idcg = 1 + (2 ** 0.5 - 1) / np.log2(3)
    assert ndcg_per_query(scores, rel, *EQ2)[0] == pytest.approx(1 / idcg, abs=1e-4)
    assert ndcg_per_query(scores, rel, *PAPER)[0] == pytest.approx((1 + (2 ** 0.5 - 1) / np.log2(5)) / idcg, abs=1e-4)
