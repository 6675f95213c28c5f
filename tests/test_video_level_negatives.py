"""Video-level bookkeeping of XML's L_vr (issue 42), by hand on a batch with siblings: a video holding a pair or a
positive of a query is never that query's negative through any of its columns; and (issue 75) that holds for a
partner outside the batch too, read from the whole pair table."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from momentsearch.losses import sample_negatives
from momentsearch.models.xml.config import RelevanceTrainConfig, XMLConfig
from momentsearch.models.xml.loss import _ranking, first_columns, per_video

# five moments (columns) of three videos: A holds columns 0 and 1, B column 2, C columns 3 and 4
VIDEO_COL = torch.tensor([0, 0, 1, 2, 2])
SAME = VIDEO_COL[:, None] == VIDEO_COL[None, :]
PAIRS = torch.zeros(5, 5, dtype=torch.bool)
PAIRS[2, 0] = True  # query 2 (video B) is potentially relevant to moment 0, in video A
PAIRS[3, 1] = True  # query 3 (video C) to moment 1, in video A


def _batch(partner_videos: torch.Tensor | None = None) -> SimpleNamespace:
    return SimpleNamespace(pairs=PAIRS, conf=PAIRS.float() * 0.8, same_video=SAME, video_col=VIDEO_COL,
                           partner_videos=partner_videos)


def test_per_video_masks_by_hand() -> None:
    held = per_video(PAIRS, VIDEO_COL)
    assert held[2].tolist() == [True, True, False, False, False]  # both columns of A
    assert held[3].tolist() == [True, True, False, False, False]
    assert not held[[0, 1, 4]].any()
    assert first_columns(VIDEO_COL).tolist() == [True, False, True, True, False]
    # the column-by-column mask this replaces left query 2's sibling column 1 (video A) as a negative
    assert not (SAME | PAIRS)[2, 1] and (SAME | held)[2, 1]


def test_no_column_of_a_pair_video_is_ever_drawn_as_a_negative() -> None:
    scores = torch.randn(5, 5, generator=torch.Generator().manual_seed(0))
    exclude = SAME | per_video(PAIRS, VIDEO_COL)
    gen = torch.Generator().manual_seed(1)
    neg_v_seen, neg_q_seen = set(), set()
    for _ in range(300):
        for pool in (None, 2):
            neg_v, neg_q = sample_negatives(scores, exclude, pool, gen)
            assert int(neg_v[2]) in (3, 4) and int(neg_v[3]) == 2  # B's query: only C; C's query: only B
            assert int(neg_q[0]) == 4 and int(neg_q[1]) == 4  # A's columns: only query 4 (C, no pair in A)
            neg_v_seen.add(int(neg_v[2]))
            neg_q_seen.add(int(neg_q[2]))
    assert neg_v_seen == {3, 4} and neg_q_seen == {0, 1, 3, 4}  # B's column: any query but its own


def test_the_losses_use_it_and_thresholds_count_a_video_once() -> None:
    """Through ``_ranking``: +PR and thresholds draw no negative from a pair's video; a threshold positive video
    with two columns is one positive (its first column), and the query's own video only its own column."""
    scores = torch.randn(5, 5, generator=torch.Generator().manual_seed(2), requires_grad=True)
    for method in ("pairs", "threshold"):
        cfg = XMLConfig(relevance=RelevanceTrainConfig(method=method, table="t.npz"))
        for seed in range(50):
            loss, _ = _ranking(scores, _batch(), cfg, None, torch.Generator().manual_seed(seed), 1.0, 1.0,
                               lambda s: (1 + s) / 2, video_level=True)
            assert torch.isfinite(loss)
    import momentsearch.models.xml.loss as xml_loss

    seen: list[torch.Tensor] = []
    real = xml_loss.threshold_triplet_loss
    xml_loss.threshold_triplet_loss = lambda s, positive, nv, nq, m: seen.append(positive) or real(s, positive, nv, nq, m)
    try:
        cfg = XMLConfig(relevance=RelevanceTrainConfig(method="threshold", table="t.npz"))
        _ranking(scores, _batch(), cfg, None, torch.Generator().manual_seed(0), 1.0, 1.0, torch.sigmoid, video_level=True)
    finally:
        xml_loss.threshold_triplet_loss = real
    positive = seen[0]
    assert positive[2].tolist() == [True, False, True, False, False]  # its own column and video A once
    assert positive[3].tolist() == [True, False, False, True, False]  # A once; C's other moment is not a positive
    assert positive[[0, 1, 4]].tolist() == torch.eye(5, dtype=torch.bool)[[0, 1, 4]].tolist()


def _moment_batches(tmp_path):  # four videos, two moments each; features and query tokens made up
    import numpy as np

    from momentsearch.data.corpus import Corpus, Moment, Video
    from momentsearch.data.feature_writers import write_npy_features
    from momentsearch.data.features import FeatureStore
    from momentsearch.models.xml.batches import MomentBatches

    videos = {v: Video(v, 8.0, "train", 2.0) for v in "ABCD"}
    moments = [Moment(f"{v}{i}", f"text {v}{i}", v, ((2.0 * i, 2.0 * i + 2),), "train") for v in "ABCD" for i in (0, 1)]
    write_npy_features(tmp_path / "f", {v: np.ones((4, 3), np.float32) for v in "ABCD"})

    class Tokens:
        def ensure(self, moments, progress=True):
            pass

        def get(self, query_id, text):
            return np.ones((3, 5), np.float32)

    return MomentBatches(Corpus(videos, moments), FeatureStore(tmp_path / "f"), Tokens(), {v: 2.0 for v in "ABCD"},
                         8, 4, False)


def test_a_partner_outside_the_batch_keeps_its_video_out_of_the_negatives(tmp_path) -> None:
    """Query A0's partner is B1 (in the table); the batch holds A0, B0 (B1's sibling, no pair of A0) and C0, D0,
    but not B1. By the batch alone B is a negative of A0; by the whole table it never is."""
    import numpy as np
    from scipy import sparse

    from momentsearch.models.xml.batches import partner_videos

    src = _moment_batches(tmp_path)
    q = {m.query_id: i for i, m in enumerate(src.moments)}
    table = sparse.lil_matrix((8, 8), dtype=np.float32)
    table[q["A0"], q["B1"]] = table[q["B1"], q["A0"]] = 0.9
    src.attach_pairs(table.tocsr())
    held = partner_videos(src.pair_matrix, np.array([0, 0, 1, 1, 2, 2, 3, 3]), 4)
    assert held.toarray()[q["A0"]].tolist() == [False, True, False, False]  # B, by hand
    assert held.toarray()[q["B1"]].tolist() == [True, False, False, False] and held.nnz == 2
    batch = src.collate([q["A0"], q["B0"], q["C0"], q["D0"]])
    assert not batch.pairs.any()  # the batch holds no pair: B1 is not in it
    assert batch.partner_videos[0].tolist() == [False, True, False, False]  # A0: B0's column is B's video
    assert not batch.partner_videos[1:].any()
    import momentsearch.models.xml.loss as xml_loss

    scores, masks, real = torch.zeros(4, 4), {}, xml_loss.sample_negatives
    for exclusion in ("table", "batch"):
        cfg = XMLConfig(relevance=RelevanceTrainConfig(method="pairs", table="t", exclusion=exclusion))
        xml_loss.sample_negatives = lambda s, ex, pool, gen, e=exclusion: masks.setdefault(e, ex) is not None and real(
            s, ex, pool, gen)
        try:
            _ranking(scores, batch, cfg, None, torch.Generator().manual_seed(0), 1.0, 1.0, lambda s: (1 + s) / 2,
                     video_level=True)
        finally:
            xml_loss.sample_negatives = real
    assert masks["table"][0].tolist() == [True, True, False, False]  # A0: its own video and B, whose B1 is a partner
    assert masks["batch"][0].tolist() == [True, False, False, False]  # before: B0's column was a negative of A0
    assert (masks["table"][1:] == masks["batch"][1:]).all()
    gen = torch.Generator().manual_seed(1)
    assert all(int(real(scores, masks["table"], None, gen)[0][0]) in (2, 3) for _ in range(200))
