"""Reference rankers that bound what a model can score: oracles and a random ranker.

* ``annotation_oracle``: knows each query's annotated moment and ranks it first. Scores 100 on
  the standard (single-positive) metrics by construction; it checks the evaluation pipeline.
* ``relevance_oracle``: ranks every moment by graded relevance (from the synthetic oracle or any
  :class:`MomentRelevance`), the annotated pair not privileged, ties broken at random. It scores
  100 on multi-positive recall, and below 100 on the standard metrics whenever another moment
  is as relevant as the annotated one: the many-to-many gap the papers describe.
* ``random_ranker``: distinct random videos, a random span in each; chance level.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from momentsearch.data.corpus import Corpus, Moment
from momentsearch.data.relevance import MomentRelevance
from momentsearch.search.ranked import DEFAULT_MAX_PREDICTIONS, RankedMoments


def consensus_span(m: Moment) -> tuple[float, float]:
    """The most often annotated span (DiDeMo's annotators often agree); the first on ties."""
    return Counter(m.spans).most_common(1)[0][0]


def annotation_oracle(corpus: Corpus, video_ids: Sequence[str] | None = None) -> dict[str, RankedMoments]:
    vids = list(video_ids or corpus.videos)
    index = {v: i for i, v in enumerate(vids)}
    ms = [m for m in corpus.moments if m.has_ground_truth]
    qids = [m.query_id for m in ms]
    texts = [m.text for m in ms]
    moments = [[(index[m.video_id], *consensus_span(m), 1.0)] for m in ms]  # type: ignore[index]
    videos = [[(index[m.video_id], 0.0, 0.0, 1.0)] for m in ms]  # type: ignore[index]
    return {
        "VCMR": RankedMoments.from_lists(qids, vids, moments, query_texts=texts),
        "SVMR": RankedMoments.from_lists(qids, vids, moments, query_texts=texts),
        "VR": RankedMoments.from_lists(qids, vids, videos, query_texts=texts),
    }


def relevance_oracle(
    rel: MomentRelevance, k: int = DEFAULT_MAX_PREDICTIONS, seed: int = 0
) -> dict[str, RankedMoments]:
    """Rank each query's relevant moments (and videos) by relevance, random among ties."""
    rng = np.random.default_rng(seed)
    moments, videos = [], []
    vq, vv, vval = rel.video_relevance()
    vptr = np.searchsorted(vq, np.arange(len(rel) + 1))
    for i in range(len(rel)):
        v, st, ed, val = rel.row(i)
        order = np.lexsort((rng.random(len(val)), -val))[:k]
        moments.append(list(zip(v[order], st[order], ed[order], val[order], strict=True)))
        a, b = vptr[i], vptr[i + 1]
        order = np.lexsort((rng.random(b - a), -vval[a:b]))[:k]
        videos.append([(vv[a + j], 0.0, 0.0, vval[a + j]) for j in order])
    return {
        "VCMR": RankedMoments.from_lists(rel.query_ids, rel.video_ids, moments),
        "VR": RankedMoments.from_lists(rel.query_ids, rel.video_ids, videos),
    }


def random_ranker(
    corpus: Corpus, k: int = DEFAULT_MAX_PREDICTIONS, seed: int = 0, video_ids: Sequence[str] | None = None
) -> dict[str, RankedMoments]:
    """Chance level: per query, k distinct random videos with a uniformly random span in each
    (VCMR, VR), and k random spans in the ground-truth video (SVMR)."""
    rng = np.random.default_rng(seed)
    vids = list(video_ids or corpus.videos)
    index = {v: i for i, v in enumerate(vids)}
    dur = np.array([corpus.videos[v].duration for v in vids])
    ms = [m for m in corpus.moments if m.has_ground_truth]
    kk = min(k, len(vids))
    picks = np.argsort(rng.random((len(ms), len(vids))), axis=1)[:, :kk] if len(vids) <= 5000 else np.stack(
        [rng.choice(len(vids), kk, replace=False) for _ in ms])
    u = np.sort(rng.random((len(ms), kk, 2)), axis=-1) * dur[picks][..., None]
    qids = [m.query_id for m in ms]
    vcmr = RankedMoments(qids, vids, picks.astype(np.int64), u[..., 0], u[..., 1], np.zeros(picks.shape))
    vr = RankedMoments(qids, vids, picks.astype(np.int64), np.zeros(picks.shape), np.zeros(picks.shape),
                       np.zeros(picks.shape))
    gt = np.array([index[m.video_id] for m in ms], np.int64)  # type: ignore[index]
    s = np.sort(rng.random((len(ms), k, 2)), axis=-1) * dur[gt][:, None, None]
    svmr = RankedMoments(qids, vids, np.repeat(gt[:, None], k, axis=1), s[..., 0], s[..., 1], np.zeros((len(ms), k)))
    return {"VCMR": vcmr, "SVMR": svmr, "VR": vr}
