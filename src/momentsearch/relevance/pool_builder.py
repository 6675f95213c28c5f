"""Building MVMR retrieval pools from any annotation split (Yang et al., Secs. 4 and 6.2-6.3).

* s_te(q, v) (Eq. 1): the text similarity of q to video v is the max over v's queries of the cosine
  of their sentence embeddings (all-MiniLM-L6-v2 here; the paper uses SimCSE).
* s_tv(q, v): a query-video score from a pluggable scorer, e.g. a trained model's video score
  (the paper uses EMScore); without one only the text filter applies.
* Positive candidates (Eq. 2): s_te >= t+ and s_tv >= the mean s_tv over the gold pairs.
* Negative candidates (Eq. 3): s_te <= t- and s_tv <= the mean s_tv over the pairs that passed
  s_te <= t- (over all queries; the paper estimates it from one sampled negative per query).
* A pool: the gold video, then min(k - 1, #candidates) positives drawn at random, then negatives
  drawn at random up to n videos. A query with fewer than n candidates in all is left out (Sec. 6.3).
  Each extra positive's moment is the span of that video's query most similar to q.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm import tqdm

from momentsearch.data.corpus import Corpus
from momentsearch.data.mvmr import MVMRPools, Positive

VideoScorer = Callable[[np.ndarray], np.ndarray]  # query indices (B,) -> (B, V) s_tv in the corpus' video order


@dataclass(frozen=True)
class PoolConfig:
    n: int = 50  # videos per pool (TACoS: 5)
    k: int = 5  # at most this many positive videos, the gold one included
    t_pos: float = 0.9  # t+_te
    t_neg: float = 0.5  # t-_te
    seed: int = 0

    def __post_init__(self) -> None:
        if not (self.n >= 2 and 1 <= self.k <= self.n):
            raise ValueError(f"need n >= 2 and 1 <= k <= n, got n={self.n}, k={self.k}")
        if not (0 <= self.t_neg <= self.t_pos <= 1):
            raise ValueError(f"need 0 <= t_neg <= t_pos <= 1, got t_neg={self.t_neg}, t_pos={self.t_pos}")


def text_similarity(corpus: Corpus, emb: np.ndarray, block: int = 1024,
                    progress: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """(Q, V) s_te in the corpus' video order, and (Q, V) the index of the video's query that gives it
    (-1 for a video without queries, whose s_te is 0)."""
    vids = list(corpus.videos)
    vindex = {v: i for i, v in enumerate(vids)}
    owner = np.array([vindex[m.video_id] for m in corpus.moments])  # type: ignore[index]
    order = np.argsort(owner, kind="stable")
    bounds = np.searchsorted(owner[order], np.arange(len(vids) + 1))
    s_te = np.zeros((len(corpus.moments), len(vids)), np.float32)
    arg = np.full(s_te.shape, -1, np.int32)
    e_sorted = emb[order]
    for s in tqdm(range(0, len(order), block), desc="s_te", unit="block", disable=not progress):
        sim = emb[s: s + block] @ e_sorted.T  # (B, Q), columns grouped by video
        r = np.arange(len(sim))
        for v in range(len(vids)):
            a, b = bounds[v], bounds[v + 1]
            if a == b:
                continue
            j = sim[:, a:b].argmax(axis=1)
            s_te[s: s + block, v] = sim[r, a + j]
            arg[s: s + block, v] = order[a + j]
    return s_te, arg


@dataclass
class Candidates:
    """The filters of Eqs. 2-3 over a (Q, V) s_te: ``pos`` / ``neg`` masks, the gold video of each query."""

    pos: np.ndarray
    neg: np.ndarray
    gold: np.ndarray
    mu_gold: float | None
    mu_neg: float | None


def candidate_masks(corpus: Corpus, s_te: np.ndarray, cfg: PoolConfig, s_tv: np.ndarray | None = None) -> Candidates:
    """Positive and negative candidates of every query (its own video excluded from both)."""
    vindex = {v: i for i, v in enumerate(corpus.videos)}
    gold = np.array([vindex[m.video_id] for m in corpus.moments])  # type: ignore[index]
    rows = np.arange(len(gold))
    pos = s_te >= np.float32(cfg.t_pos)
    neg = s_te <= np.float32(cfg.t_neg)
    pos[rows, gold] = neg[rows, gold] = False
    mu_gold = mu_neg = None
    if s_tv is not None:
        mu_gold = float(s_tv[rows, gold].mean())
        mu_neg = float(s_tv[neg].mean()) if neg.any() else float("nan")
        pos &= s_tv >= mu_gold
        neg &= s_tv <= mu_neg
    neg &= ~pos  # t- = t+ must not put one video on both sides
    return Candidates(pos, neg, gold, mu_gold, mu_neg)


def build_pools(corpus: Corpus, s_te: np.ndarray, arg: np.ndarray, cfg: PoolConfig,
                s_tv: np.ndarray | None = None) -> tuple[MVMRPools, dict[str, Any]]:
    """Pools for every annotated query of ``corpus`` (one split) and the statistics of the candidates."""
    vids = list(corpus.videos)
    ms = corpus.moments
    c = candidate_masks(corpus, s_te, cfg, s_tv)
    pos, neg, gold, mu_gold, mu_neg = c.pos, c.neg, c.gold, c.mu_gold, c.mu_neg
    rng = np.random.default_rng(cfg.seed)
    pools: dict[str, list[str]] = {}
    positives: dict[str, list[Positive]] = {}
    n_pos, n_neg = pos.sum(1), neg.sum(1)
    for i, m in enumerate(ms):
        pc, nc = np.flatnonzero(pos[i]), np.flatnonzero(neg[i])
        n_extra = min(cfg.k - 1, len(pc))  # at most k - 1 positives; negatives fill the rest of the pool
        if len(nc) < cfg.n - 1 - n_extra:
            continue  # too few negatives to fill it (however many positives): left out, counted
        extra = rng.choice(pc, size=n_extra, replace=False) if len(pc) else pc
        negs = rng.choice(nc, size=cfg.n - 1 - len(extra), replace=False)
        pools[m.query_id] = [vids[gold[i]], *(vids[v] for v in extra), *(vids[v] for v in negs)]
        plist = [Positive(m.video_id, m.span, m.text)]  # type: ignore[arg-type]
        for v in extra:
            other = ms[int(arg[i, v])]
            plist.append(Positive(vids[v], other.span, other.text))
        positives[m.query_id] = plist
    stats = {"n": cfg.n, "k": cfg.k, "t_pos": cfg.t_pos, "t_neg": cfg.t_neg, "seed": cfg.seed,
             "scorer": s_tv is not None, "mu_s_tv_gold": mu_gold, "mu_s_tv_negatives": mu_neg,
             "n_queries": len(ms), "n_pooled": len(pools), "n_left_out": len(ms) - len(pools),
             "positive_candidates_per_query": float(n_pos.mean()),
             "queries_with_positive_candidates": int((n_pos > 0).sum()),
             "negative_candidates_per_query": float(n_neg.mean())}
    return MVMRPools(f"{corpus.name}-mvmr", corpus, pools, positives), stats


def positive_candidates(corpus: Corpus, s_te: np.ndarray, cfg: PoolConfig, s_tv: np.ndarray | None = None
                        ) -> dict[str, set[str]]:
    """Per query, every video that passes the positive filter (before drawing k - 1 of them)."""
    vids = list(corpus.videos)
    pos = candidate_masks(corpus, s_te, cfg, s_tv).pos
    return {m.query_id: {vids[v] for v in np.flatnonzero(pos[i])} for i, m in enumerate(corpus.moments)}


def compare_pools(ours: MVMRPools, theirs: MVMRPools, candidates: dict[str, set[str]]) -> dict[str, Any]:
    """Where two pool sets over the same queries agree: their extra positives against ours (drawn) and
    against all our positive candidates, and their negatives that our filter would call positive."""
    common = [q for q in theirs.pools if q in candidates]
    their_extra = {q: {p.video_id for p in theirs.positives[q][1:]} for q in common}
    n_theirs = sum(len(s) for s in their_extra.values())
    in_ours = sum(len(their_extra[q] & {p.video_id for p in ours.positives.get(q, [])[1:]}) for q in common)
    in_cands = sum(len(their_extra[q] & candidates[q]) for q in common)
    n_cands = sum(len(candidates[q]) for q in common)
    their_neg = {q: set(theirs.pools[q]) - their_extra[q] - {theirs.pools[q][0]} for q in common}
    neg_called_pos = sum(len(their_neg[q] & candidates[q]) for q in common)
    return {
        "queries_compared": len(common),
        "their_extra_positives": n_theirs,
        "our_positive_candidates": n_cands,
        "their_extras_among_our_candidates": in_cands / n_theirs if n_theirs else float("nan"),
        "our_candidates_among_their_extras": in_cands / n_cands if n_cands else float("nan"),
        "their_extras_in_our_pools_as_positives": in_ours / n_theirs if n_theirs else float("nan"),
        "their_negatives_we_call_positive": neg_called_pos,
        "queries_with_extras_theirs": sum(1 for q in common if their_extra[q]),
        "queries_with_candidates_ours": sum(1 for q in common if candidates[q]),
    }


def oracle_errors(pools: MVMRPools, video_relevance: np.ndarray, video_ids: list[str]) -> dict[str, Any]:
    """Against a (Q, V) oracle of video relevance in ``pools.corpus``' query order: extra positives
    that are not (fully) relevant, and negatives that are."""
    vindex = {v: i for i, v in enumerate(video_ids)}
    qindex = {m.query_id: i for i, m in enumerate(pools.corpus.moments)}
    pos_vals, neg_vals = [], []
    for q, pool in pools.pools.items():
        extra = {p.video_id for p in pools.positives[q][1:]}
        row = video_relevance[qindex[q]]
        pos_vals += [row[vindex[v]] for v in extra]
        neg_vals += [row[vindex[v]] for v in pool[1:] if v not in extra]
    p, n = np.asarray(pos_vals, np.float64), np.asarray(neg_vals, np.float64)
    share = (lambda x: float(x.mean()) if len(x) else float("nan"))
    return {"extra_positives": len(p), "negatives": len(n),
            "false_positive_rate_below_1": share(p < 1.0), "false_positive_rate_below_0.5": share(p < 0.5),
            "false_negative_rate_at_0.5": share(n >= 0.5), "false_negative_rate_at_1": share(n >= 1.0),
            "false_negatives_per_pool": float((n >= 0.5).sum() / max(len(pools.pools), 1))}
