"""The many-to-many losses (pairs paper Eqs. 11, 12, 14, 17; Wray et al. Eq. 4 thresholded) against
hand-computed values, gradient checks, the pair table loader, and a training run that uses them."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import sparse

from momentsearch.errors import ConfigError
from momentsearch.losses import hinge_ranking_loss
from momentsearch.losses.multilevel import (
    floor_logits,
    pair_nll_loss,
    pos_rel_loss,
    rel_neg_loss,
    segment_scores,
    threshold_triplet_loss,
)
from momentsearch.models.xml.config import RelevanceTrainConfig
from momentsearch.relevance.training_pairs import training_pairs

S = torch.tensor([[0.9, 0.5, 0.1], [0.4, 0.8, 0.2], [0.3, 0.6, 0.7]])
PAIRS = torch.tensor([[False, True, False], [True, False, False], [False, False, False]])
CONF = torch.tensor([[0.0, 0.5, 0.0], [0.5, 0.0, 0.0], [0.0, 0.0, 0.0]])
NEG_V = torch.tensor([2, 2, 0])  # R^(i, i-): 0.1, 0.2, 0.3
NEG_Q = torch.tensor([2, 2, 1])  # R^(j-, j): 0.3, 0.6, 0.2


def test_rel_neg_by_hand() -> None:
    # pair (0,1): row [0.1 + 0.1 - 0.5*0.5]+ = 0,    column [0.1 + 0.6 - 0.25]+ = 0.45
    # pair (1,0): row [0.1 + 0.2 - 0.5*0.4]+ = 0.1,  column [0.1 + 0.3 - 0.2]+  = 0.2      / N_pairs = 2
    assert rel_neg_loss(S, PAIRS, CONF, NEG_V, NEG_Q, 0.1).item() == pytest.approx(0.75 / 2)
    # C == 1: (0,1) row [0.2 - 0.5]+ = 0, column [0.7 - 0.5]+ = 0.2; (1,0) row [0.3 - 0.4]+ = 0, column [0.4 - 0.4]+ = 0
    assert rel_neg_loss(S, PAIRS, PAIRS.float(), NEG_V, NEG_Q, 0.1).item() == pytest.approx(0.2 / 2)


def test_pos_rel_by_hand() -> None:
    # (0,1): row [0.5 - 0.5*0.9]+ = 0.05, column [0.5 - 0.5*0.8]+ = 0.1
    # (1,0): row [0.4 - 0.5*0.8]+ = 0,    column [0.4 - 0.5*0.9]+ = 0
    assert pos_rel_loss(S, PAIRS, CONF).item() == pytest.approx(0.15 / 2)
    # C == 1: the pair may not outscore the positive: (0,1) column [0.5 - 0.8]+ = 0 ... all zero here
    assert pos_rel_loss(S, PAIRS, PAIRS.float()).item() == pytest.approx(0.0)


def test_no_pairs_gives_zero_with_a_graph() -> None:
    s = S.clone().requires_grad_(True)
    none = torch.zeros(3, 3, dtype=torch.bool)
    for loss in (rel_neg_loss(s, none, CONF, NEG_V, NEG_Q), pos_rel_loss(s, none, CONF)):
        assert loss.item() == 0.0
        loss.backward()
    assert s.grad is not None and float(s.grad.abs().sum()) == 0.0


def test_threshold_triplet_reduces_to_xml_and_by_hand() -> None:
    eye = torch.eye(3, dtype=torch.bool)
    assert threshold_triplet_loss(S, eye, NEG_V, NEG_Q, 0.1).item() == pytest.approx(
        hinge_ranking_loss(S, NEG_V, NEG_Q, 0.1).item())
    # diagonal: rows [0.1+0.1-0.9, 0.1+0.2-0.8, 0.1+0.3-0.7]+ = 0; columns [0.1+0.3-0.9, 0.1+0.6-0.8, 0.1+0.2-0.7]+ = 0
    # extra positive (0,1) with S >= T: row [0.1 + 0.1 - 0.5]+ = 0, column [0.1 + 0.6 - 0.5]+ = 0.2; |P| = 4
    pos = eye.clone()
    pos[0, 1] = True
    assert threshold_triplet_loss(S, pos, NEG_V, NEG_Q, 0.1).item() == pytest.approx(0.2 / 4)


def test_floor_logits_shift_and_clamp() -> None:
    o = torch.tensor([[-2.0, 0.0, 3.0, -1e10]])
    mask = torch.tensor([[True, True, True, False]])
    assert floor_logits(o, mask, 1e-6, "shift").tolist()[0] == pytest.approx([1e-6, 2 + 1e-6, 5 + 1e-6, 1e-6])
    assert floor_logits(o, mask, 1e-6, "clamp").tolist()[0][:3] == pytest.approx([1e-6, 1e-6, 3.0])
    with pytest.raises(ValueError, match="shift or 'clamp'|'shift' or 'clamp'"):
        floor_logits(o, mask, 1e-6, "relu")  # type: ignore[arg-type]


def _toy_logits() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    o_st = torch.randn(2, 2, 3, generator=g, dtype=torch.float64)
    o_ed = torch.randn(2, 2, 3, generator=g, dtype=torch.float64)
    mask = torch.tensor([[True, True, True], [True, True, False]])  # video 1 has 2 clips
    o_st = o_st.masked_fill(~mask[None], -1e10)
    o_ed = o_ed.masked_fill(~mask[None], -1e10)
    return o_st, o_ed, mask


def test_segment_scores_by_loop() -> None:
    o_st, o_ed, mask = _toy_logits()
    col, st, ed = torch.tensor([0, 1]), torch.tensor([0, 1]), torch.tensor([2, 1])
    s_vr = torch.tensor([[0.5, 0.1], [0.2, 0.7]], dtype=torch.float64)
    got = segment_scores(o_st, o_ed, mask, col, st, ed, s_vr, alpha=20.0)
    for i in range(2):
        for j in range(2):
            v = int(col[j])
            n = int(mask[v].sum())
            ost = o_st[i, v, :n].tolist()
            oed = o_ed[i, v, :n].tolist()
            want = (math.log(ost[int(st[j])] - min(ost) + 1e-6) + math.log(oed[int(ed[j])] - min(oed) + 1e-6)
                    + 20.0 * float(s_vr[i, j]))
            assert float(got[i, j]) == pytest.approx(want, rel=1e-9)


def test_pair_nll_by_loop() -> None:
    o_st, o_ed, mask = _toy_logits()
    col, st, ed = torch.tensor([0, 1]), torch.tensor([0, 1]), torch.tensor([2, 0])
    pairs = torch.tensor([[False, True], [True, False]])
    conf = torch.tensor([[0.0, 0.8], [0.3, 0.0]], dtype=torch.float64)
    got = pair_nll_loss(o_st, o_ed, col, st, ed, pairs, conf)
    total = 0.0
    for i, j in ((0, 1), (1, 0)):
        v = int(col[j])
        n = int(mask[v].sum())
        lst = torch.log_softmax(o_st[i, v, :n], 0)[int(st[j])]
        led = torch.log_softmax(o_ed[i, v, :n], 0)[int(ed[j])]
        total += -float(conf[i, j]) * float(lst + led)
    assert float(got) == pytest.approx(total / 2, rel=1e-9)


def test_gradients_match_finite_differences() -> None:
    o_st, o_ed, mask = _toy_logits()
    o_st = o_st.clone().requires_grad_(True)
    col, st, ed = torch.tensor([0, 1]), torch.tensor([1, 0]), torch.tensor([2, 1])
    pairs = torch.tensor([[False, True], [True, False]])
    conf = torch.tensor([[0.0, 0.6], [0.9, 0.0]], dtype=torch.float64)
    s_vr = torch.tensor([[0.5, 0.1], [0.2, 0.7]], dtype=torch.float64, requires_grad=True)
    nv, nq = torch.tensor([1, 0]), torch.tensor([1, 0])

    def f(a: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        r = segment_scores(a, o_ed, mask, col, st, ed, s, alpha=2.0)
        return (rel_neg_loss(r, pairs, conf, nv, nq, 0.1) + pos_rel_loss(r, pairs, conf)
                + pair_nll_loss(a, o_ed, col, st, ed, pairs, conf))

    assert torch.autograd.gradcheck(f, (o_st, s_vr), eps=1e-6, atol=1e-5)


def _write_table(prefix: Path, ids: list[str], phi: np.ndarray, psi: np.ndarray) -> None:
    sparse.save_npz(prefix.with_suffix(".phi.npz"), sparse.csr_matrix(phi))
    sparse.save_npz(prefix.with_suffix(".psi.npz"), sparse.csr_matrix(psi))
    prefix.with_suffix(".queries.json").write_text(json.dumps(ids))


def test_training_pairs_threshold_confidence_and_errors(tmp_path: Path) -> None:
    ids = ["a", "b", "c", "d"]
    phi = np.array([[1.0, 0.8, 0.6, 0.0], [0.8, 1.0, 0.0, 0.75], [0.6, 0.0, 1.0, 0.0], [0.0, 0.75, 0.0, 1.0]])
    psi = np.array([[1.0, 0.4, 0.9, 0.1], [0.4, 1.0, 0.2, 0.0], [0.9, 0.2, 1.0, 0.3], [0.1, 0.0, 0.3, 1.0]])
    _write_table(tmp_path / "vp", ids, phi, psi)
    cfg = RelevanceTrainConfig(method="pairs", table=str(tmp_path / "vp"), theta=0.7)
    m = training_pairs(cfg, ["d", "b", "a"]).toarray()
    # order d, b, a: pairs (d,b) 0.75 and (b,a) 0.8 pass theta 0.7; (a,c) 0.6 does not; the diagonal never
    # (d,b) has Psi 0: kept as a pair with the smallest confidence
    assert m[1, 2] == pytest.approx(0.4) and m[2, 1] == pytest.approx(0.4)
    assert m[0, 1] == pytest.approx(1e-6) and m[1, 0] == pytest.approx(1e-6)
    assert np.count_nonzero(m) == 4
    with pytest.raises(ValueError, match="not in the table"):
        training_pairs(cfg, ["a", "zz"])
    with pytest.raises(ConfigError, match="momentsearch pairs"):
        training_pairs(RelevanceTrainConfig(method="pairs", table=str(tmp_path / "nope")), ["a"])
    with pytest.raises(ValueError, match="needs relevance.table"):
        RelevanceTrainConfig(method="threshold")


@pytest.mark.slow
def test_training_with_pairs_and_threshold_runs(tiny_benchmark: Path, tmp_path: Path) -> None:
    import dataclasses

    from momentsearch.api.relevance_tables import run_pairs, run_relevance
    from momentsearch.data.dataset import DatasetConfig
    from momentsearch.models.xml import XMLConfig
    from momentsearch.training.config import TrainConfig
    from momentsearch.training.trainer import Trainer

    run_pairs(tiny_benchmark, "sent", tmp_path / "sent", n_examples=0)
    run_relevance(tiny_benchmark, "bow", tmp_path / "bow.npz")
    base = TrainConfig(dataset=DatasetConfig(benchmark=str(tiny_benchmark)), out_dir=str(tmp_path / "base"), epochs=1,
                       batch_size=32, lr=1e-3, val_split="test", val_max_queries=50,
                       model=XMLConfig(hidden=32, hard_negative_start_epoch=1))
    runs = {
        "sl_pr": RelevanceTrainConfig(method="pairs", table=str(tmp_path / "sent"), theta=0.5, lambda_vcmr=1.0),
        "threshold": RelevanceTrainConfig(method="threshold", table=str(tmp_path / "bow.npz"), theta=0.3),
    }
    for name, rc in runs.items():
        cfg = dataclasses.replace(base, out_dir=str(tmp_path / name), model=dataclasses.replace(base.model, relevance=rc))
        h = Trainer(cfg, progress=False).fit()[-1]
        assert math.isfinite(h["loss"]) and h["pairs_per_batch"] > 0, (name, h)
        if name == "sl_pr":
            assert h["loss_vcmr"] > 0 and h["nll2"] > 0 and "vr rel>neg" in h


def test_signed_scores_let_a_constant_model_zero_the_pair_terms() -> None:
    """Why +PR at lambda 1 collapses (docs/pairs_trained.md): with every score equal to -0.5 and C = 0.5,
    Eqs. 11-12 on the raw cosine are already 0; mapped into [0, 1] ((1 + s) / 2 = 0.25) they are not."""
    s = torch.full((3, 3), -0.5)
    conf = PAIRS.float() * 0.5
    assert rel_neg_loss(s, PAIRS, conf, NEG_V, NEG_Q, 0.1).item() == 0.0  # [0.1 - 0.5 + 0.25]+ = 0
    assert pos_rel_loss(s, PAIRS, conf).item() == 0.0  # [-0.5 + 0.25]+ = 0
    u = (1 + s) / 2
    # each pair, each direction: [0.1 + 0.25 - 0.125]+ = 0.225 and [0.25 - 0.125]+ = 0.125; 2 pairs x 2 / 2
    assert rel_neg_loss(u, PAIRS, conf, NEG_V, NEG_Q, 0.1).item() == pytest.approx(0.45)
    assert pos_rel_loss(u, PAIRS, conf).item() == pytest.approx(0.25)
