"""Relevance proxies (BoW IoU, [cos]+) and the blockwise sparse relevance matrices."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from momentsearch.data.corpus import Corpus, Moment, Video
from momentsearch.data.synthetic import SyntheticBenchmark
from momentsearch.relevance.matrix import query_moment, query_video, sparse_query_relevance
from momentsearch.relevance.proxies import BowIndex, PosIndex, bow_iou, content_words, embedding_cosine, pos_iou
from momentsearch.text.encoders import QueryFeatureCache, sentence_embeddings


def test_bow_iou_by_hand() -> None:
    assert content_words("A man opens the fridge.") == {"man", "opens", "fridge"}
    assert bow_iou("a man opens the fridge", "the man closes the fridge") == pytest.approx(2 / 4)
    assert bow_iou("the a of", "and the") == 0.0  # only stop words: empty sets
    texts = ["a man opens the fridge", "the man closes the fridge", "a dog barks", "fridge"]
    block = BowIndex(texts).iou(np.arange(4))
    for i in range(4):
        for j in range(4):
            assert block[i, j] == pytest.approx(bow_iou(texts[i], texts[j]))


def test_embedding_cosine_is_clipped_at_zero() -> None:
    e = np.array([[1.0, 0.0], [0.6, 0.8], [-1.0, 0.0]], np.float32)
    got = embedding_cosine(e, e)
    assert got[0, 1] == pytest.approx(0.6) and got[0, 2] == 0.0 and got[1, 1] == pytest.approx(1.0)


def test_blockwise_sparse_matches_dense_top_k() -> None:
    rng = np.random.default_rng(0)
    dense = rng.random((50, 50)).astype(np.float32)
    sp = sparse_query_relevance(50, lambda rows: dense[rows].copy(), top_k=5, threshold=0.3, block_rows=7,
                                progress=False)
    for i in range(50):
        row = dense[i].copy()
        row[i] = 1.0
        top = np.argsort(-row)[:5]
        expected = {int(j): float(row[j]) for j in top if row[j] >= 0.3}
        got = dict(zip(sp[i].indices.tolist(), sp[i].data.tolist(), strict=True))
        assert got == pytest.approx(expected)
        assert got[i] == 1.0


def test_query_moment_and_video_tables() -> None:
    ms = [Moment("a", "x", "v0", ((0.0, 5.0),)), Moment("b", "y", "v1", ((2.0, 4.0),)),
          Moment("c", "z", "v1", ((6.0, 9.0),))]
    c = Corpus.from_parts([Video("v0", 10.0), Video("v1", 10.0)], ms)
    dense = np.array([[1.0, 0.2, 0.7], [0.2, 1.0, 0.0], [0.7, 0.0, 1.0]], np.float32)
    qq = sparse_query_relevance(3, lambda rows: dense[rows].copy(), top_k=3, progress=False)
    rel = query_moment(c, qq)
    v, st, ed, val = rel.row(0)
    assert v.tolist() == [0, 1, 1] and st.tolist() == [0.0, 2.0, 6.0] and ed.tolist() == [5.0, 4.0, 9.0]
    assert val.tolist() == pytest.approx([1.0, 0.2, 0.7])
    assert query_video(rel).toarray()[0].tolist() == pytest.approx([1.0, 0.7])  # max over v1's two moments


def test_proxies_track_the_synthetic_oracle(tiny_benchmark: Path) -> None:
    bench = SyntheticBenchmark.load(tiny_benchmark)
    oracle = bench.oracle()
    texts = [m.text for m in bench.corpus.moments]
    ev = {e: k for k, e in enumerate(oracle.events.event_ids)}
    cols = np.array([ev[m.meta["event"]] for m in bench.corpus.moments])
    truth = np.stack([oracle.relevance_to_events(oracle._q[i])[cols] for i in range(len(texts))]) >= 1.0
    emb = sentence_embeddings(QueryFeatureCache(tiny_benchmark / "features" / "queries_minilm.h5"), texts, progress=False)
    iu = np.triu_indices(len(texts), 1)
    cos = embedding_cosine(emb, emb)[iu]
    bow = BowIndex(texts).iou(np.arange(len(texts)))[iu]
    t = truth[iu]
    base = t.mean()  # chance that a random pair of captions describes the same kind of event (~0.2%)
    prec_cos = (t & (cos >= 0.8)).sum() / max((cos >= 0.8).sum(), 1)
    prec_bow = (t & (bow >= 0.5)).sum() / max((bow >= 0.5).sum(), 1)
    # measured when written: cos >= 0.8 precision 0.78, BoW >= 0.5 precision 0.50, base rate ~0.002
    assert prec_cos > 100 * base and prec_bow > 50 * base
    assert (t & (cos >= 0.5)).sum() / t.sum() > 0.6  # embeddings find most paraphrases at 0.5 ...
    assert (t & (bow >= 0.5)).sum() / t.sum() < 0.3  # ... word overlap does not: synonyms defeat it


def test_pos_iou_by_hand() -> None:
    # verbs {open} vs {close}: IoU 0; nouns {man, fridge} vs {man, fridge}: IoU 1 -> 0.5 * 0 + 0.5 * 1
    assert pos_iou("a man opens the fridge", "the man closes the fridge") == pytest.approx(0.5)
    # lemmas: "opens" and "opened" are one verb; nouns {woman, door} vs {man, door}: 1/3
    assert pos_iou("a woman opens the door", "the man opened the door") == pytest.approx(0.5 + 0.5 / 3)
    texts = ["a man opens the fridge", "the man closes the fridge", "a dog sleeps"]
    block = PosIndex.lemmas(texts).iou(np.arange(3))
    assert block[0, 1] == pytest.approx(0.5) and block[0, 2] == 0.0 and block[2, 2] == pytest.approx(1.0)


def _need_wordnet() -> None:
    if not Path("/usr/share/wordnet/data.noun").is_file():
        from conftest import missing_dependency

        missing_dependency("WordNet 3.0 (Debian wordnet-base) is not installed; `make` installs it where apt-get works")


def test_synset_iou_relates_synonyms_pos_iou_does_not() -> None:
    _need_wordnet()
    from momentsearch.relevance.proxies import synset_iou

    a, b = "a man washes the car", "the man washes the automobile"
    # car and automobile are one synset, car.n.01: verbs 1, nouns 1 (WordNet 3.0, first senses)
    assert synset_iou(a, b, wsd="first") == pytest.approx(1.0)
    assert pos_iou(a, b) == pytest.approx(0.5 + 0.5 / 3)  # nouns {man, car} vs {man, automobile}
    block = PosIndex.synsets([a, b, "a dog sleeps"], wsd="first").iou(np.arange(3))
    assert block[0, 2] == 0.0 and block[2, 2] == pytest.approx(1.0)
    assert 0.0 <= synset_iou(a, b) <= 1.0  # Lesk may pick other senses; still a proper IoU


def test_meteor_by_hand() -> None:
    _need_wordnet()
    from momentsearch.relevance.proxies import meteor, meteor_matrix

    # identical 5-word captions: one chunk of 5 matches, penalty 0.5 * (1/5)^3 = 0.004
    assert meteor("a man opens the fridge", "a man opens the fridge") == pytest.approx(0.996)
    assert meteor("a dog sleeps", "someone opens the fridge") == 0.0
    m = meteor_matrix(["a man opens the fridge", "a dog sleeps"], ["a man opens the fridge"])
    assert m.shape == (2, 1) and float(m[0, 0]) == pytest.approx(0.996)
    # "a" alone matches: P = 1/3, R = 1/5, Fmean = PR / (0.9 P + 0.1 R) = 0.2083; one chunk of one
    # match: penalty 0.5 * (1/1)^3 = 0.5 -> 0.1042
    p, r = 1 / 3, 1 / 5
    assert float(m[1, 0]) == pytest.approx(p * r / (0.9 * p + 0.1 * r) * 0.5, rel=1e-5)


def test_relevance_select_rows_and_videos() -> None:
    from momentsearch.data.relevance import MomentRelevance

    rel = MomentRelevance.from_rows(["a", "b", "c"], ["v0", "v1", "v2"], [
        [(0, 0.0, 1.0, 1.0), (2, 3.0, 4.0, 0.5)], [], [(1, 1.0, 2.0, 0.7)]])
    sub = rel.select(["c", "a"], ["v2", "v1"])
    assert sub.query_ids == ["c", "a"] and sub.video_ids == ["v2", "v1"]
    assert sub.indptr.tolist() == [0, 1, 2]
    assert sub.video_idx.tolist() == [1, 0] and sub.value.tolist() == [np.float32(0.7), np.float32(0.5)]
    assert sub.start.tolist() == [1.0, 3.0]
    with pytest.raises(KeyError, match="'zz'"):
        rel.select(["a", "zz"])


def test_memoised_meteor_equals_nltk_on_real_captions() -> None:
    _need_wordnet()
    from nltk.translate.meteor_score import meteor_score
    from tests.conftest import shared

    from momentsearch.data.loaders import load_corpus
    from momentsearch.relevance.meteor import meteor_matrix, tokenize
    from momentsearch.text.wordnet import wordnet

    texts = [m.text for m in load_corpus(shared("charades_sta/charades_sta_test.txt")).moments][:25]
    fast = meteor_matrix(texts, texts)
    plain = np.array([[meteor_score([tokenize(b)], tokenize(a), wordnet=wordnet()) for b in texts] for a in texts])
    assert np.allclose(fast, plain, atol=1e-6)
    assert (fast > 0).mean() > 0.5 and np.allclose(np.diag(fast), np.diag(plain))


def test_top_k_zero_keeps_every_positive_value() -> None:
    """Wray et al.'s S over every item: no cut, only zeros (and values under the threshold) dropped."""
    rng = np.random.default_rng(1)
    dense = rng.random((30, 30)).astype(np.float32) * (rng.random((30, 30)) < 0.6)
    sp = sparse_query_relevance(30, lambda rows: dense[rows].copy(), top_k=0, threshold=0.1, block_rows=4,
                                progress=False).toarray()
    expected = np.where(dense >= 0.1, dense, 0.0)
    np.fill_diagonal(expected, 1.0)
    assert np.array_equal(sp, expected) and (expected > 0).sum(axis=1).max() > 10
    with pytest.raises(ValueError, match="top_k must be >= 0"):
        sparse_query_relevance(30, lambda rows: dense[rows].copy(), top_k=-1, progress=False)
