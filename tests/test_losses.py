"""XML's losses against hand-computed values, and a gradient check through a tiny model."""

from __future__ import annotations

import math

import torch

from momentsearch.losses import hinge_ranking_loss, sample_negatives, span_to_clip_indices, start_end_nll
from momentsearch.models.xml import XML, XMLConfig


def test_hinge_ranking_loss_by_hand() -> None:
    s = torch.tensor([[0.9, 0.5, 0.1], [0.2, 0.3, 0.4], [0.0, 0.6, 0.8]])
    neg_v = torch.tensor([1, 2, 1])  # query i's negative video
    neg_q = torch.tensor([2, 0, 1])  # video j's negative query
    # queries: [0.1 + 0.5 - 0.9]+ = 0, [0.1 + 0.4 - 0.3]+ = 0.2, [0.1 + 0.6 - 0.8]+ = 0
    # videos:  [0.1 + 0.0 - 0.9]+ = 0, [0.1 + 0.5 - 0.3]+ = 0.3, [0.1 + 0.4 - 0.8]+ = 0
    got = hinge_ranking_loss(s, neg_v, neg_q, margin=0.1)
    assert math.isclose(got.item(), 0.2 / 3 + 0.3 / 3, rel_tol=1e-6)


def test_negative_sampling_respects_positives_and_pool() -> None:
    s = torch.tensor([[0.9, 0.8, 0.1, 0.5], [0.2, 0.3, 0.4, 0.1], [0.0, 0.6, 0.8, 0.7], [0.3, 0.2, 0.1, 0.9]])
    same = torch.eye(4, dtype=torch.bool)
    same[0, 1] = same[1, 0] = True  # items 0 and 1 share a video: never negatives of each other
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        nv, nq = sample_negatives(s, same, pool=1, generator=g)
        # pool 1 = the hardest negative: row 0 -> col 3 (0.5); row 2 -> col 3 (0.7); col 2 -> row 1 (0.4)
        assert nv.tolist() == [3, 2, 3, 0] and nq[2].item() == 1
        nv, _ = sample_negatives(s, same, pool=None, generator=g)
        assert nv[0].item() in (2, 3) and nv[1].item() in (2, 3)
    all_same = torch.ones(2, 2, dtype=torch.bool)
    nv, nq = sample_negatives(s[:2, :2], all_same, pool=None, generator=g)
    assert nv.tolist() == [0, 1]  # no negative at all: the term becomes the margin


def test_start_end_nll_by_hand() -> None:
    o_st = torch.tensor([[0.0, math.log(3.0), -1e10]])  # softmax over 2 real clips: [1/4, 3/4]
    o_ed = torch.tensor([[0.0, 0.0, -1e10]])  # [1/2, 1/2]
    got = start_end_nll(o_st, o_ed, torch.tensor([1]), torch.tensor([0]))
    assert math.isclose(got.item(), -math.log(0.75) - math.log(0.5), rel_tol=1e-6)


def test_span_to_clip_indices() -> None:
    assert span_to_clip_indices(0.0, 2.0, 2.0, 10) == (0, 0)
    assert span_to_clip_indices(3.0, 7.5, 2.0, 10) == (1, 3)
    assert span_to_clip_indices(15.0, 99.0, 2.0, 10) == (7, 9)  # clamped to the last clip


def test_moment_scores_follow_eqs_2_to_4() -> None:
    m = XML(XMLConfig(visual_dim=4, hidden=8, n_heads=2, n_min=2, n_max=3))
    o_st = torch.log(torch.tensor([[0.5, 0.25, 0.25, 1e-9]]))
    o_ed = torch.log(torch.tensor([[0.1, 0.2, 0.3, 0.4]]))
    s = m.moment_scores(o_st, o_ed)[0]
    assert math.isclose(s[0, 1].item(), 0.5 * 0.2, rel_tol=1e-5)  # 2 clips: allowed
    assert s[0, 0].item() == 0.0 and s[0, 3].item() == 0.0  # 1 clip and 4 clips: outside [n_min, n_max]
    assert s[1, 0].item() == 0.0  # end before start
    v = m.vcmr_scores(s[None], torch.tensor([0.1]))[0]
    assert math.isclose(v[0, 1].item(), 0.1 * math.exp(20 * 0.1), rel_tol=1e-5)


def test_gradient_check_through_a_tiny_model() -> None:
    torch.manual_seed(0)
    cfg = XMLConfig(visual_dim=3, subtitle_dim=2, query_dim=4, hidden=4, n_heads=1, dropout=0.0, max_clips=6,
                    max_tokens=4, conv_kernel=3)
    model = XML(cfg).double().eval()
    tokens = torch.randn(3, 4, 4, dtype=torch.float64)
    tmask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)
    vis = torch.randn(3, 5, 3, dtype=torch.float64, requires_grad=True)
    sub = torch.randn(3, 5, 2, dtype=torch.float64)
    cmask = torch.tensor([[1] * 5, [1, 1, 1, 0, 0], [1, 1, 1, 1, 0]], dtype=torch.bool)
    neg_v, neg_q = torch.tensor([1, 2, 0]), torch.tensor([2, 0, 1])
    st, ed = torch.tensor([0, 1, 2]), torch.tensor([2, 2, 3])

    def loss(v: torch.Tensor) -> torch.Tensor:
        q = model.encode_queries(tokens, tmask)
        h1, h2 = model.encode_videos([v, sub], cmask)
        s = model.video_scores(q, h1, cmask)
        o_st, o_ed = model.st_ed_logits(q, h2, cmask)
        return hinge_ranking_loss(s, neg_v, neg_q, margin=1.0) + 0.1 * start_end_nll(o_st, o_ed, st, ed)

    assert torch.autograd.gradcheck(loss, (vis,), eps=1e-6, atol=1e-5)
    vis.grad = None
    loss(vis).backward()
    assert vis.grad is not None and vis.grad[1, 3:].abs().max() == 0  # padding gets no gradient
