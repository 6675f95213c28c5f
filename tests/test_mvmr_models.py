"""MMN / RMMN (reliable true negatives, CM-ANS) and the CET / BET baselines of the MVMR paper."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import sparse
from tests.conftest import TEST_SEED, TEST_THREADS

from momentsearch.models.family import Step
from momentsearch.models.mmn.batches import cell_iou, span_iou
from momentsearch.models.mmn.config import MMNConfig
from momentsearch.models.mmn.loss import margin_nll
from momentsearch.models.mmn.negatives import (
    ans_weights,
    draw,
    top_candidates,
    unreliable_from_table,
    unreliable_pairs,
)
from momentsearch.models.mmn.network import MMN, moment_map, segment_pool
from momentsearch.models.registry import create_family, family_names
from momentsearch.models.span.loss import interpolated_labels, span_bce
from momentsearch.models.span.search import moment_probs


def test_families_are_registered() -> None:
    assert {"mmn", "cet", "bet"} <= set(family_names())
    assert create_family({"name": "bet"}).cfg.cos_scale == 10.0
    with pytest.raises(ValueError, match="odd kernel_size"):
        MMNConfig(kernel_size=4)


def test_segment_pool_averages_equal_segments_of_the_real_clips() -> None:
    x = torch.tensor([[1.0, 2, 3, 4, 5]])[..., None]
    full = torch.ones(1, 5, dtype=torch.bool)
    assert segment_pool(x, full, 2).flatten().tolist() == [1.5, 4.0]  # clips [0, 2) and [2, 5)
    part = torch.tensor([[True, True, True, False, False]])
    assert segment_pool(x, part, 2).flatten().tolist() == [1.0, 2.5]  # padding never enters
    assert segment_pool(x, part, 6).flatten().tolist() == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]  # N > clips repeats


def test_moment_map_is_the_running_max_within_the_span() -> None:
    f = torch.tensor([[[1.0, 3.0, 2.0]]])
    assert moment_map(f, 3)[0, 0].tolist() == [[1, 3, 3], [0, 3, 3], [0, 0, 2]]
    assert moment_map(f, 2)[0, 0].tolist() == [[1, 3, 0], [0, 3, 3], [0, 0, 2]]


def test_mmn_released_network_options() -> None:
    """MMN's ProposalConv masking, BatchNorm and FeatAvgPool order (configs/mmn/default.yaml turns them on)."""
    cfg = MMNConfig(hidden=4, joint_dim=4, n_heads=2, num_clips=4, conv_layers=2, kernel_size=3, mask_renorm=True,
                    conv_norm="batch", pool_after_fc=True).with_inputs(3, 0, 5)
    net = MMN(cfg).eval()
    assert [c.padding for c in net.convs] == [(2, 2), (0, 0)]  # (k - 1) L / 2, then none: N x N again
    assert all(isinstance(n, torch.nn.BatchNorm2d) for n in net.conv_norms)
    # with every weight 1, no bias and BatchNorm at its initial statistics (x / sqrt(1 + eps)), each cell is
    # the channel sum of the mean over the valid cells under the kernel: 4 channels of ones give 4 after one
    # layer and 16 after two, wherever the grown mask reaches (all 16 cells here)
    for conv in net.convs:
        torch.nn.init.ones_(conv.weight)
        torch.nn.init.zeros_(conv.bias)
    valid = net.valid().float()
    out = net.map_convs(valid.expand(1, 4, 4, 4).clone(), valid)
    assert out.shape == (1, 4, 4, 4) and torch.allclose(out, torch.full_like(out, 16 / (1 + 1e-5)))
    plain = MMN(MMNConfig(hidden=4, joint_dim=4, n_heads=2, num_clips=4, conv_layers=2, kernel_size=3)
                .with_inputs(3, 0, 5)).eval()
    for conv in plain.convs:
        torch.nn.init.ones_(conv.weight)
        torch.nn.init.zeros_(conv.bias)
    summed = plain.map_convs(valid.expand(1, 4, 4, 4).clone(), valid)[0, 0]
    # 'same' padding sums instead: layer 1 gives 4 x 3, 4 x 5, 4 x 6 at (0, 0), (0, 1), (1, 1) (their valid
    # neighbours), layer 2 at (0, 0) the 4-channel sum of those three
    assert summed[0, 0].item() == 4 * (12 + 20 + 24) and summed[1, 0].item() == 0
    # FC + ReLU before the average: with a negative-going clip, averaging first would give another value
    x = torch.tensor([[[1.0, 0, 0], [-1.0, 0, 0]]])
    torch.nn.init.ones_(net.clip_fc.weight)
    torch.nn.init.zeros_(net.clip_fc.bias)
    f = segment_pool(torch.relu(net.clip_fc(x.transpose(1, 2))).transpose(1, 2), torch.ones(1, 2, dtype=torch.bool), 4)
    assert f[0, :, 0].tolist() == [1.0, 1.0, 0.0, 0.0]  # relu(1), relu(-1) = 0, not relu(mean) = 0 everywhere


def test_cell_iou_and_span_iou_by_hand() -> None:
    iou = cell_iou(0.0, 5.0, 10.0, 2)  # cells [0, 5), [0, 10), [5, 10)
    assert iou.tolist() == [[1.0, 0.5], [0.0, 0.0]]
    assert span_iou(np.array([0.0, 4.0]), np.array([2.0, 6.0])) == pytest.approx(2 / 6)


def test_scores_are_eq10_in_the_unit_interval() -> None:
    torch.manual_seed(0)
    cfg = MMNConfig(hidden=8, joint_dim=4, num_clips=4, conv_layers=1, kernel_size=3, n_heads=2, max_span=2,
                    max_tokens=5).with_inputs(6, 0, 5)
    model = MMN(cfg).eval()
    m = model.encode_videos([torch.randn(2, 7, 6)], torch.ones(2, 7, dtype=torch.bool)).detach()
    q = model.encode_queries(torch.randn(3, 5, 5), torch.ones(3, 5, dtype=torch.bool)).detach()
    s = model.scores(q, m)
    assert s.shape == (3, 2, 4, 4) and (s >= 0).all() and (s <= 1).all()
    assert (s[:, :, 0, 2:] == 0).all() and (s[:, :, 1, 0] == 0).all()  # longer than max_span / end before start
    cos_iou = float(q[1, 0] @ m[0, 1, 2, 0])
    cos_rmm = float(q[1, 1] @ m[0, 1, 2, 1])
    want = 1 / (1 + math.exp(-10 * cos_iou)) * ((1 + cos_rmm) / 2) ** 0.5
    assert float(s[1, 0, 1, 2]) == pytest.approx(want, rel=1e-5)


def test_map_search_reads_the_same_scores_with_and_without_the_float32_copy(monkeypatch) -> None:
    """A small index's maps are converted to float32 once; a large one per read: the scores are equal to the bit,
    and equal to Eq. 10 over the index's float16 maps."""
    from momentsearch.models.mmn import search
    from momentsearch.search.index import VideoIndex
    from momentsearch.search.stages import Queries

    torch.manual_seed(0)
    cfg = MMNConfig(hidden=8, joint_dim=4, num_clips=4, conv_layers=1, kernel_size=3, n_heads=2, max_span=3,
                    max_tokens=5).with_inputs(6, 0, 5)
    model = MMN(cfg).eval()
    with torch.no_grad():
        maps = model.encode_videos([torch.randn(5, 7, 6)], torch.ones(5, 7, dtype=torch.bool)).half().numpy()
        q = Queries(model.encode_queries(torch.randn(3, 5, 5), torch.ones(3, 5, dtype=torch.bool)),
                    torch.ones(3, 2, dtype=torch.bool))
    durations = np.full(5, 8.0)
    index = VideoIndex([f"v{i}" for i in range(5)], durations, durations / 4, np.arange(6) * 4,
                       {search.ARRAY: maps.reshape(-1, 4, 2, 4)})
    videos = np.array([[4, 0], [2, 2], [1, 3]])
    cached = search.MapStages(model, index)
    small = cached.score_videos(q), cached.localize(q, videos).score
    assert cached._f32 is not None
    monkeypatch.setattr(search, "F32_CACHE_BYTES", 0)
    per_read = search.MapStages(model, index)
    large = per_read.score_videos(q), per_read.localize(q, videos).score
    assert per_read._f32 is None
    assert torch.equal(small[0], large[0]) and torch.equal(small[1], large[1])
    with torch.no_grad():
        want = model.scores(q.tokens, torch.from_numpy(maps.astype(np.float32)))
    assert torch.allclose(small[0], want.flatten(2).max(-1).values)
    assert torch.allclose(small[1][2, 1], want[2, 3].double())


def test_mutual_matching_nll_by_hand() -> None:
    # logits [(0.5 - 0.4) / 0.1, 0.2 / 0.1] = [1, 2]; the masked 0.9 does not count
    got = margin_nll(torch.tensor([0.5]), torch.tensor([[0.2, 0.9]]), torch.tensor([[True, False]]), 0.4, 0.1)
    assert float(got) == pytest.approx(math.log(1 + math.e), rel=1e-6)
    # the margin pulls the positive to be above every negative by psi: equal cosines still cost
    eq = margin_nll(torch.tensor([0.5]), torch.tensor([[0.5]]), torch.tensor([[True]]), 0.4, 0.1)
    assert float(eq) == pytest.approx(math.log(1 + math.exp(4)), rel=1e-6)


def test_true_negatives_are_the_pairs_below_t_tr() -> None:
    emb = np.array([[1.0, 0, 0], [0.99, 0.141, 0], [0, 0, 1]], np.float32)  # q0 ~ q1 (cos 0.99), q2 apart
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    bad = unreliable_pairs(emb, np.array([0, 1, 2]), 3, t_tr=0.9).toarray()
    assert bad.tolist() == [[True, True, False], [True, True, False], [False, False, True]]


def test_true_negatives_from_a_relevance_table() -> None:
    # queries 0, 1 in video 0, query 2 in video 1, query 3 in video 2; related pairs (0, 2) and (3, 1)
    related = sparse.csr_matrix((np.ones(2), ([0, 3], [2, 1])), shape=(4, 4))
    bad = unreliable_from_table(related, np.array([0, 0, 1, 2]), 3).toarray()
    assert bad.tolist() == [[True, True, False], [True, False, False], [False, True, False], [True, False, True]]
    with pytest.raises(ValueError, match="relevance table of shape"):
        unreliable_from_table(related[:3, :3], np.array([0, 0, 1, 2]), 3)
    with pytest.raises(ValueError, match="set true_negatives: true"):
        MMNConfig(true_negatives_table="oracle_train")


def test_cm_ans_weights_peak_at_the_positives_mean_and_draws_follow_them() -> None:
    r = np.array([[0.5, 0.9, 0.1]])
    w = ans_weights(r, np.array([0.9]), a=10.0, b=0.0)
    assert np.allclose(w, [[-1.6, 0.0, -6.4]])  # hard (near the positive) > easy; b shifts the peak
    rows = 20000
    cands = np.repeat(np.array([[7, 8, 9]]), rows, 0)
    got = draw(cands, np.repeat(w, rows, 0), np.ones((rows, 3), bool), 1, torch.Generator().manual_seed(0))
    p = np.exp(w[0]) / np.exp(w[0]).sum()
    freq = np.array([(got == c).mean() for c in (7, 8, 9)])
    assert np.abs(freq - p).max() < 0.01, (freq, p)
    two = draw(cands[:50], np.repeat(w, 50, 0), np.ones((50, 3), bool), 2, torch.Generator().manual_seed(1))
    assert all(len(set(row)) == 2 for row in two)  # without replacement
    none = draw(cands[:1], w, np.zeros((1, 3), bool), 2, torch.Generator())
    assert none.tolist() == [[-1, -1]]


def test_configured_cm_ans_is_selective() -> None:
    from momentsearch.api import load_train_config

    c = load_train_config("mmn/rmmn").model
    assert (c.ans_a, c.ans_b) == (MMNConfig().ans_a, MMNConfig().ans_b) == (50.0, -0.1)
    r_pos = np.array([0.8])
    r = np.array([[0.7, 0.6, 0.4, 0.85, 0.2]])  # at the peak (mean - 0.1), 0.1 and 0.3 below it, above the positive
    p = np.exp(ans_weights(r, r_pos, c.ans_a, c.ans_b))[0]
    assert p[0] == 1.0 and p[0] / p[2] > 50 and p[0] / p[4] > 1e5  # easy negatives are almost never drawn
    assert p[1] > p[3]  # one scoring above the positive (a likely false negative) is drawn less than a hard one
    # a = 1 (the former default) is near uniform over the same candidates: within a factor of e
    flat = np.exp(ans_weights(r, r_pos, 1.0, 0.0))[0]
    assert flat.max() / flat.min() < np.e


def test_a_zero_draws_the_hard_candidates_uniformly_and_a_negative_a_is_refused() -> None:
    r = np.array([[0.5, 0.9, 0.1, 0.7]])
    w = ans_weights(r, np.array([0.9]), a=0.0, b=-0.1)
    assert np.array_equal(w, np.zeros((1, 4)))  # the sampling control: no candidate favoured
    rows = 20000
    cands = np.repeat(np.array([[7, 8, 9, 10]]), rows, 0)
    got = draw(cands, np.repeat(w, rows, 0), np.ones((rows, 4), bool), 1, torch.Generator().manual_seed(2))
    freq = np.array([(got == c).mean() for c in (7, 8, 9, 10)])
    assert np.abs(freq - 0.25).max() < 0.01, freq
    assert MMNConfig(ans_a=0.0).ans_a == 0.0
    with pytest.raises(ValueError, match="ans_a must be >= 0"):
        MMNConfig(ans_a=-1.0)


def test_top_candidates_leave_out_excluded_pairs_both_ways() -> None:
    r = np.array([[0.9, 0.1, 0.5], [0.2, 0.8, 0.7], [0.3, 0.6, 0.4]])
    excluded = sparse.csr_matrix(np.eye(3, dtype=bool))
    row_top, row_r, col_top, col_r = top_candidates(lambda s, e: r[s:e], 3, 3, 1, 1, excluded, block=2)
    assert row_top.ravel().tolist() == [2, 2, 1] and np.allclose(row_r.ravel(), [0.5, 0.7, 0.6])
    assert col_top.ravel().tolist() == [2, 2, 1] and np.allclose(col_r.ravel(), [0.3, 0.6, 0.7])


def test_interpolated_labels_eq14_and_bce() -> None:
    y_s, y_e = interpolated_labels(torch.tensor([1]), torch.tensor([3]), 5, k=1.0)
    assert torch.allclose(y_s, torch.tensor([[0, 1, 2 / 3, 1 / 3, 0]]))
    assert torch.allclose(y_e, torch.tensor([[0, 1 / 3, 2 / 3, 1, 0]]))
    y_s10, _ = interpolated_labels(torch.tensor([1]), torch.tensor([3]), 5, k=10.0)
    assert torch.allclose(y_s10, y_s**10)
    one, _ = interpolated_labels(torch.tensor([2]), torch.tensor([2]), 4, k=10.0)
    assert one.tolist() == [[0, 0, 1, 0]]  # a one-clip moment: 1 at its clip
    # BCE at logits 0 is log 2 for any label; a padded clip does not count
    zero = torch.zeros(1, 5)
    mask = torch.tensor([[True, True, True, True, False]])
    assert float(span_bce(zero, zero, torch.tensor([1]), torch.tensor([3]), mask, 10.0)) == pytest.approx(math.log(2))


def test_moment_probs_multiply_start_and_end_within_the_band() -> None:
    p = moment_probs(torch.tensor([[0.0, 10.0]]), torch.tensor([[0.0, 0.0]]), torch.tensor([[True, True]]),
                     torch.tensor([[True, True], [False, True]]))
    s = 1 / (1 + math.exp(-10))
    assert p[0].flatten().tolist() == pytest.approx([0.25, 0.25, 0.0, s * 0.5])


def _cfg(bench: Path, out: Path, epochs: int, **model: object):
    from momentsearch.data.dataset import DatasetConfig
    from momentsearch.training.config import TrainConfig

    return TrainConfig(dataset=DatasetConfig(benchmark=str(bench)), out_dir=str(out), epochs=epochs, batch_size=64,
                       lr=1e-3, val_split="test", k_videos=9, num_threads=TEST_THREADS, seed=TEST_SEED, model=model)


def test_reliable_negatives_in_batches_and_the_hard_stage(tiny_benchmark: Path, tmp_path: Path) -> None:
    from momentsearch.training.trainer import Trainer

    tr = Trainer(_cfg(tiny_benchmark, tmp_path, 3, name="mmn", hidden=16, joint_dim=8, num_clips=8, n_heads=2,
                      true_negatives=True, hard_negative_start_epoch=2, hard_videos=2, hard_queries=3,
                      hard_video_candidates=4, hard_query_candidates=6), progress=False)
    src = tr.train_data
    lr = tr.optimizer.param_groups[0]["lr"]
    tr.family.prepare_epoch(tr.model, src, Step(0, torch.Generator().manual_seed(0)), tr.device)
    batch = src.collate(list(range(40)))
    pos = src.positive[:40]
    videos = np.unique(pos)
    bad = src.unreliable[:40][:, videos].toarray()
    assert not (batch.neg_video.numpy() & bad).any()  # Eq. 4: no pair at s_te >= t_tr is a negative
    assert not batch.neg_video.numpy()[np.arange(40), batch.video_col.numpy()].any()
    assert not batch.neg_query.numpy()[np.arange(40), np.arange(40)].any()
    loss, parts = tr.family.loss(tr.model, batch, Step(0, torch.Generator()))
    loss.backward()
    assert math.isfinite(parts["loss_bce"]) and parts["loss_rmm"] > 0
    stats = tr.family.prepare_epoch(tr.model, src, Step(2, torch.Generator().manual_seed(0)), tr.device)
    assert "mining_seconds" in stats and tr.optimizer.param_groups[0]["lr"] == pytest.approx(lr * 0.1)
    hv, hq = src.hard_videos, src.hard_queries
    assert hv.shape == (len(src), 2) and not (hv == src.positive[:, None]).any()
    assert not src.unreliable[np.arange(len(src))[:, None].repeat(2, 1)[hv >= 0], hv[hv >= 0]].any()
    own_q = src.positive[np.where(hq >= 0, hq, 0)] == np.arange(len(src.videos))[:, None]
    assert not (own_q & (hq >= 0)).any()  # a video's negative queries are never its own
    hard = src.collate(list(range(8)))
    assert len(hard.tokens) >= 8 and hard.neg_video.sum(1).le(2).all() and hard.neg_video.sum(1).ge(1).all()
    for g in tr.optimizer.param_groups:  # the trainer sets each epoch's scheduled rate before prepare_epoch
        g["lr"] = lr
    tr.family.prepare_epoch(tr.model, src, Step(1, torch.Generator()), tr.device)
    assert tr.optimizer.param_groups[0]["lr"] == pytest.approx(lr) and not src.hard


def test_fine_tuning_starts_from_the_trained_model_in_the_hard_stage(tiny_benchmark: Path, tmp_path: Path) -> None:
    """RMMN's CM-ANS stage as the paper runs it: a trained model (init_from) trained further with hard
    negatives from its first epoch; a checkpoint of another network is refused with what differs."""
    import dataclasses

    from momentsearch.api import train
    from momentsearch.errors import CheckpointError
    from momentsearch.training.trainer import Trainer

    net = dict(name="mmn", hidden=16, joint_dim=8, num_clips=8, n_heads=2, true_negatives=True)
    first = train(_cfg(tiny_benchmark, tmp_path / "first", 1, **net), progress=False).ckpt_dir / "last.pt"
    cfg = _cfg(tiny_benchmark, tmp_path / "tune", 1, **net, fine_tune_hard=True, hard_videos=2, hard_queries=3,
               hard_video_candidates=4, hard_query_candidates=6)
    tr = Trainer(dataclasses.replace(cfg, init_from=str(first)), progress=False)
    trained = torch.load(first, weights_only=True)["model"]
    assert all(torch.equal(v, trained[k]) for k, v in tr.model.state_dict().items())
    lr = tr.optimizer.param_groups[0]["lr"]
    stats = tr.family.prepare_epoch(tr.model, tr.train_data, Step(0, torch.Generator().manual_seed(0)), tr.device)
    assert "mining_seconds" in stats and tr.train_data.hard  # CM-ANS from epoch 0, r mined with the trained model
    assert tr.optimizer.param_groups[0]["lr"] == pytest.approx(lr * 0.1)
    with pytest.raises(CheckpointError, match=r"init_from .*last.pt: its network differs .*'hidden': \(16, 32\)}; \d+ tensors of other shape"):
        Trainer(dataclasses.replace(_cfg(tiny_benchmark, tmp_path / "wide", 1, **{**net, "hidden": 32}),
                                    init_from=str(first)), progress=False)
    with pytest.raises(CheckpointError, match="a checkpoint of family 'mmn', this run trains 'bet'"):
        Trainer(dataclasses.replace(_cfg(tiny_benchmark, tmp_path / "bet", 1, name="bet", hidden=16, layers=1,
                                         n_heads=2), init_from=str(first)), progress=False)
    # Eq. 8 on the negatives: "pooled" is one mean over the gold video's and the negatives' cells, "balanced"
    # the sum of the two means (the gold video keeps its weight); from the three losses on one batch
    batch = tr.train_data.collate(list(range(16)))
    tr.model.eval()

    def bce(**opts: object) -> float:
        tr.model.cfg = dataclasses.replace(tr.model.cfg, **opts)
        with torch.no_grad():
            return tr.family.loss(tr.model, batch, Step(0, torch.Generator()))[1]["loss_bce"]

    own, n_b, n_neg = bce(bce_on_negatives=False), 16, float(batch.neg_video.sum())
    pooled = bce(bce_on_negatives=True, bce_negative_weighting="pooled")
    negatives = (pooled * (n_b + n_neg) - own * n_b) / n_neg
    assert n_neg > n_b and negatives > 0
    assert bce(bce_on_negatives=True, bce_negative_weighting="balanced") == pytest.approx(own + negatives, rel=1e-4)


def test_true_negatives_table_drives_the_batches(tiny_benchmark: Path, tmp_path: Path) -> None:
    import json

    from momentsearch.errors import ConfigError
    from momentsearch.training.trainer import Trainer

    def trainer(table: Path) -> Trainer:
        return Trainer(_cfg(tiny_benchmark, tmp_path / table.name, 1, name="mmn", hidden=16, joint_dim=8, num_clips=8,
                            n_heads=2, true_negatives=True, t_tr=0.5, true_negatives_table=str(table)), progress=False)

    from momentsearch.data.synthetic import SyntheticBenchmark

    train = SyntheticBenchmark.load(tiny_benchmark).corpus.split("train").moments
    ids = [m.query_id for m in train]
    other = next(i for i, m in enumerate(train) if m.video_id != train[0].video_id)
    # S(q0, q_other) = 0.7 passes t_tr 0.5, S(q0, q1) = 0.2 does not
    qq = sparse.csr_matrix((np.array([0.7, 0.2], np.float32), ([0, 0], [other, 1])), shape=(len(ids), len(ids)))
    sparse.save_npz(tmp_path / "s.qq.npz", qq)
    (tmp_path / "s.queries.json").write_text(json.dumps(ids))
    src = trainer(tmp_path / "s").train_data
    own = sparse.csr_matrix((np.ones(len(ids), bool), (np.arange(len(ids)), src.positive)), shape=src.unreliable.shape)
    extra = (src.unreliable.astype(int) - own.astype(int)).tocoo()
    assert list(zip(extra.row, extra.col)) == [(0, src.positive[other])]  # only the related pair, besides own videos
    batch = src.collate([0, other])
    assert not batch.neg_video[0, batch.video_col[1]] and batch.neg_video[1, batch.video_col[0]]
    with pytest.raises(ConfigError, match="missing.queries.json: not found; write the table"):
        trainer(tmp_path / "missing")


def _chance_svmr(bench: Path, split: str = "test") -> dict:
    from momentsearch.data.synthetic import SyntheticBenchmark
    from momentsearch.evaluation.recall import evaluate_ranked
    from momentsearch.search.baselines import random_ranker

    part = SyntheticBenchmark.load(bench).corpus.split(split)
    return evaluate_ranked(random_ranker(part, seed=0)["SVMR"], part, ("SVMR",))["SVMR"]


@pytest.mark.slow
def test_mmn_trains_and_localizes_above_chance(tiny_benchmark: Path, tmp_path: Path, margin) -> None:
    from momentsearch.api import evaluate, train

    cfg = _cfg(tiny_benchmark, tmp_path / "run", 30, name="mmn", hidden=32, joint_dim=32, num_clips=16,
               conv_layers=1, kernel_size=3, n_heads=4)
    tr = train(cfg.__class__(**{**cfg.__dict__, "lr": 2e-3, "val_max_queries": 40}), progress=False)
    assert tr.history[-1]["loss"] < 0.5 * tr.history[0]["loss"]
    # the last checkpoint, so that nothing is chosen on the test split; at 15 epochs the 85 test queries
    # gave 8.2 at seed 1. Measured at 30 epochs, seeds 0-3, 1 thread (SVMR 0.5-r5 - chance): train 59.6 /
    # 63.1 / 61.1 / 63.1, test 25.9 / 30.6 / 21.2 / 25.9 (chance: train 13.7, test 18.8)
    for split, bar in (("train", 40), ("test", 10)):
        ev = evaluate(tr.ckpt_dir / "last.pt", split, tmp_path / f"eval_{split}", progress=False)
        chance = _chance_svmr(tiny_benchmark, split)
        margin(f"{split} SVMR 0.5-r5 - chance", ev.row["SVMR 0.5-r5"] - chance["0.5-r5"], bar)


@pytest.mark.slow
@pytest.mark.parametrize("family", ["cet", "bet"])
def test_span_baselines_train_evaluate_and_search(family: str, tiny_benchmark: Path, tmp_path: Path, margin) -> None:
    import momentsearch
    from momentsearch.api import evaluate, train

    cfg = _cfg(tiny_benchmark, tmp_path / "run", 30, name=family, hidden=32, layers=1, n_heads=4, n_max=20,
               max_clips=100)
    tr = train(cfg.__class__(**{**cfg.__dict__, "val_max_queries": 20}), progress=False)
    # BCE at the initial logits is log 2 = 0.693 (CET) or about 0.4 (BET's r cos); 30 epochs end near 0.1
    assert tr.history[-1]["loss"] < 0.5 * tr.history[0]["loss"]
    # above chance where it can be measured: SVMR on the training split (372 queries; the test split's 9 videos
    # and 85 queries move by 1.2 points a query). At 12 epochs CET sat at chance (+4.3 at seed 0). Measured at
    # 30 epochs on last.pt, seeds 0-2, 1 thread (train SVMR 0.5-r5 - chance): CET 67.4 / 68.3 / 60.7,
    # BET 30.1 / 26.7 / 27.2; test: CET 15.3 / 15.3 / 12.9, BET 4.7 / 10.6 / 9.4
    chance = _chance_svmr(tiny_benchmark, "train")
    ev = evaluate(tr.ckpt_dir / "last.pt", "train", tmp_path / "eval_train", progress=False)
    margin("train SVMR 0.5-r5 - chance", ev.row["SVMR 0.5-r5"] - chance["0.5-r5"], {"cet": 40, "bet": 15}[family])
    ev = evaluate(tr.ckpt_dir / "best.pt", "test", tmp_path / "eval", progress=False)
    assert 0 <= ev.row["SVMR 0.5-r5"] <= 100 and ev.row["VR r100"] == 100.0  # 9 test videos: all retrieved
    hits = momentsearch.load(tr.ckpt_dir / "best.pt").search("a person opens the fridge", k=3)
    assert len(hits) == 3 and 1 >= hits[0].score >= hits[1].score >= hits[2].score > 0
    assert all(h.end - h.start <= 20 * 2.0 + 1e-6 for h in hits)  # at most n_max clips of 2 s
