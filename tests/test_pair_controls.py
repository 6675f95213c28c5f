"""The controls of issue 42 item 4, by hand: shuffled partners (each query keeps its count of pairs and their C,
partners drawn from videos the oracle does not relate to it) and the pair terms averaged over the batch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import sparse

from momentsearch.models.xml.config import RelevanceTrainConfig, XMLConfig
from momentsearch.models.xml.loss import _ranking
from momentsearch.relevance.oracle_pairs import _save, shuffled_partners

# six training queries: q0 and q1 in video A, q2 in B, q3 in C, q4 and q5 in D
VIDEO_OF = {"q0": "A", "q1": "A", "q2": "B", "q3": "C", "q4": "D", "q5": "D"}
IDS = list(VIDEO_OF)


def _matrix(entries: dict[tuple[str, str], float], ids: list[str]) -> sparse.csr_matrix:
    pos = {q: i for i, q in enumerate(ids)}
    r = [pos[a] for a, _ in entries]
    c = [pos[b] for _, b in entries]
    return sparse.csr_matrix((np.array(list(entries.values()), np.float32), (r, c)), shape=(len(ids), len(ids)))


def _tables(tmp_path: Path) -> tuple[Path, Path]:
    det_ids = IDS[::-1]  # the detector's table lists the queries in another order: rows are aligned by id
    phi = {("q0", "q2"): 0.8, ("q0", "q1"): 0.9, ("q0", "q3"): 0.5, ("q3", "q4"): 0.75, ("q3", "q5"): 0.95}
    psi = {("q0", "q2"): 0.6, ("q0", "q1"): 0.7, ("q0", "q3"): 0.2, ("q3", "q4"): 0.9, ("q3", "q5"): 0.3}
    detector, oracle = tmp_path / "pairs_np-vp", tmp_path / "oracle_train"
    _save(detector, det_ids, _matrix(phi, det_ids), _matrix(psi, det_ids), {})
    grade = {("q0", "q2"): 0.5, ("q0", "q5"): 1.0, ("q3", "q2"): 0.5}  # q0 relates to B and D; q3 to B
    _save(oracle, IDS, _matrix(grade, IDS), _matrix(grade, IDS), {})
    return detector, oracle


def _read(prefix: Path, name: str) -> dict[tuple[str, str], float]:
    c = sparse.load_npz(prefix.with_suffix(f".{name}.npz")).tocoo()
    return {(IDS[i], IDS[j]): round(float(v), 4) for i, j, v in zip(c.row, c.col, c.data)}


def test_shuffled_partners_by_hand(tmp_path: Path) -> None:
    detector, oracle = _tables(tmp_path)
    partners_of_q3: set[str] = set()
    for seed in range(20):
        out = tmp_path / f"shuffled_{seed}"
        stats = shuffled_partners(detector, oracle, out, 0.7, VIDEO_OF, seed=seed)
        phi, psi = _read(out, "phi"), _read(out, "psi")
        # q0: one pair at theta 0.7 in another video (q2; q1 is its own video, q3 below theta). B and D hold moments
        # the oracle relates to q0, A is its own: the only unrelated query is q3, which keeps Phi 0.8 and C 0.6
        assert {k: v for k, v in phi.items() if k[0] == "q0"} == {("q0", "q3"): 0.8}
        assert {k: v for k, v in psi.items() if k[0] == "q0"} == {("q0", "q3"): 0.6}
        # q3: two pairs (Phi 0.75 and 0.95, C 0.9 and 0.3) move to two queries of A or D (B is related, C its own)
        mine = {k[1]: (phi[k], psi[k]) for k in phi if k[0] == "q3"}
        assert len(mine) == 2 and {VIDEO_OF[q] for q in mine} <= {"A", "D"}
        assert sorted(mine.values()) == [(0.75, 0.9), (0.95, 0.3)]
        partners_of_q3 |= set(mine)
        assert set(phi) == set(psi) and {k[0] for k in phi} == {"q0", "q3"}
        assert stats["pairs_at_theta"] == 3 and stats["mean_grade_of_drawn"] == 0.0
        assert stats["detected_at_theta"]["precision"] == pytest.approx(1 / 3)  # only (q0, q2) is true
    assert partners_of_q3 == {"q0", "q1", "q4", "q5"}  # drawn at random, not picked


def test_shuffled_partners_says_when_too_few_unrelated_queries(tmp_path: Path) -> None:
    detector, oracle = _tables(tmp_path)
    video_of = dict(VIDEO_OF, q3="D")  # now q0's only unrelated video is gone
    with pytest.raises(ValueError, match=r"query q0: 1 pairs but only 0 unrelated queries"):
        shuffled_partners(detector, oracle, tmp_path / "s", 0.7, video_of)


def test_pair_terms_averaged_over_the_batch() -> None:
    """``pair_mean: batch`` divides the pair terms' sums by the batch size (5) instead of the pair count (2)."""
    video_col = torch.tensor([0, 0, 1, 2, 2])
    pairs = torch.zeros(5, 5, dtype=torch.bool)
    pairs[2, 0] = pairs[3, 1] = True
    batch = type("B", (), dict(pairs=pairs, conf=pairs.float() * 0.8, video_col=video_col,
                               same_video=video_col[:, None] == video_col[None, :], partner_videos=None))()
    scores = torch.randn(5, 5, generator=torch.Generator().manual_seed(3))
    parts = {}
    for mean in ("pairs", "batch"):
        cfg = XMLConfig(relevance=RelevanceTrainConfig(method="pairs", table="t", pair_mean=mean))
        loss, parts[mean] = _ranking(scores, batch, cfg, None, torch.Generator().manual_seed(0), 1.0, 1.0,
                                     lambda s: s, video_level=True)
    assert parts["pairs"]["pos>neg"] == parts["batch"]["pos>neg"]
    for term in ("rel>neg", "pos>=rel"):
        assert parts["pairs"][term] > 0
        assert parts["batch"][term] == pytest.approx(parts["pairs"][term] * 2 / 5)
    with pytest.raises(ValueError, match="pair_mean must be pairs or batch"):
        RelevanceTrainConfig(method="pairs", table="t", pair_mean="mean")
