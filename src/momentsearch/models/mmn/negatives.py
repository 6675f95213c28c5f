"""Reliable negatives for RMMN (Yang et al. Secs. 5.1-5.2).

* True negatives (Eq. 4): v is a reliable negative of q when s_te(q, v) < t_tr, with s_te the max over
  v's queries of the cosine of the sentence embeddings (Eq. 1, as the pool builder computes it). Only
  the pairs at or above t_tr are kept, as a sparse set: that is all the filter needs at any corpus size.
  s_te may instead come from a relevance table over the training queries (a proxy's S, or the
  synthetic oracle's true grades), with the same max over v's queries.
* CM-ANS (Eqs. 5-7): with the first stage's model, r(q, v) = max over v's moments of the score;
  each query's negative videos are sampled from its top candidates with
      p'(v|q) ∝ exp(-a (r(q, v) - mean r(q, v+) - b)^2),
  and each video's negative queries from its top candidates with
      p'(q|v) ∝ exp(-a (r(q, v) - mean r(q+, v) - b)^2).
  Draws are without replacement (Gumbel top-k on log p').
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from scipy import sparse


def unreliable_pairs(emb: np.ndarray, query_video: np.ndarray, n_videos: int, t_tr: float,
                     block: int = 1024) -> sparse.csr_matrix:
    """(Q, V) bool: s_te(q, v) >= t_tr, i.e. v is NOT a reliable negative of q (Eq. 4). ``emb`` (Q, D)
    unit sentence embeddings, ``query_video`` (Q,) each query's video. Every query's own video is in it."""
    rows, cols = [], []
    for s in range(0, len(emb), block):
        r, c = np.nonzero(emb[s: s + block] @ emb.T >= np.float32(t_tr))  # (q, q') pairs
        rows.append(r + s)
        cols.append(c)
    return pairs_to_videos(np.concatenate(rows), np.concatenate(cols), query_video, n_videos)


def unreliable_from_table(related: sparse.spmatrix, query_video: np.ndarray, n_videos: int) -> sparse.csr_matrix:
    """Eq. 4 with s_te from a relevance table: ``related`` (Q, Q) holds the query pairs whose relevance
    is at or above t_tr (e.g. :func:`~momentsearch.relevance.training_pairs.training_pairs` of a
    proxy's S or the synthetic oracle's grades); v is unreliable for q when one of v's queries is related
    to q. Every query's own video is in it, as in :func:`unreliable_pairs`."""
    coo = sparse.coo_matrix(related)
    if coo.shape != (len(query_video), len(query_video)):
        raise ValueError(f"relevance table of shape {coo.shape} for {len(query_video)} training queries")
    diag = np.arange(len(query_video))
    return pairs_to_videos(np.concatenate([coo.row, diag]), np.concatenate([coo.col, diag]), query_video, n_videos)


def pairs_to_videos(q: np.ndarray, q2: np.ndarray, query_video: np.ndarray, n_videos: int) -> sparse.csr_matrix:
    """(Q, V) bool with (q, video of q2) set for every related query pair (q, q2)."""
    m = sparse.csr_matrix((np.ones(len(q), bool), (q, query_video[q2])), shape=(len(query_video), n_videos))
    m.sum_duplicates()
    return m


def ans_weights(r: np.ndarray, r_pos: np.ndarray, a: float, b: float) -> np.ndarray:
    """log p' (unnormalised) of Eqs. 5-7: r (..., K) candidate relevances, r_pos (...,) the positives' mean."""
    return -a * (r - r_pos[..., None] - b) ** 2


def draw(candidates: np.ndarray, log_p: np.ndarray, valid: np.ndarray, k: int, generator: torch.Generator
         ) -> np.ndarray:
    """k of each row's valid candidates without replacement, with probabilities ∝ exp(log_p)
    (Gumbel top-k); rows with fewer valid candidates repeat their draws, -1 where a row has none."""
    u = torch.rand(candidates.shape, generator=generator, dtype=torch.float64).numpy()
    keys = np.where(valid, log_p - np.log(-np.log(np.clip(u, 1e-300, 1.0))), -np.inf)
    order = np.argsort(-keys, axis=1, kind="stable")
    n_valid = valid.sum(1)
    out = np.full((len(candidates), k), -1, np.int64)
    for i in range(len(candidates)):
        if n_valid[i]:
            pick = order[i, np.arange(k) % n_valid[i]]
            out[i] = candidates[i, pick]
    return out


def top_candidates(score_block: Callable[[int, int], np.ndarray], n_rows: int, n_cols: int, k_rows: int,
                   k_cols: int, excluded: sparse.csr_matrix, block: int = 256
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Over a (Q, V) relevance r computed block by block (``score_block(s, e)`` -> rows s:e), with the
    ``excluded`` pairs left out: each row's top ``k_rows`` columns and each column's top ``k_cols``
    rows, with their r. Returns (row_top (Q, k_rows), row_r, col_top (V, k_cols), col_r); -1 / -inf
    pad where fewer remain."""
    k_rows, k_cols = min(k_rows, n_cols), min(k_cols, n_rows)
    row_top = np.empty((n_rows, k_rows), np.int64)
    row_r = np.empty((n_rows, k_rows))
    col_top = np.full((n_cols, k_cols), -1, np.int64)
    col_r = np.full((n_cols, k_cols), -np.inf)
    for s in range(0, n_rows, block):
        r = score_block(s, min(s + block, n_rows)).astype(np.float64)
        r[excluded[s: s + len(r)].toarray()] = -np.inf
        top = np.argsort(-r, axis=1, kind="stable")[:, :k_rows]
        row_top[s: s + len(r)], row_r[s: s + len(r)] = top, np.take_along_axis(r, top, 1)
        both_r = np.concatenate([col_r, r.T], axis=1)  # (V, k_cols + block)
        both_i = np.concatenate([col_top, np.arange(s, s + len(r))[None].repeat(n_cols, 0)], axis=1)
        keep = np.argsort(-both_r, axis=1, kind="stable")[:, :k_cols]
        col_r, col_top = np.take_along_axis(both_r, keep, 1), np.take_along_axis(both_i, keep, 1)
    row_top[~np.isfinite(row_r)] = -1
    col_top[~np.isfinite(col_r)] = -1
    return row_top, row_r, col_top, col_r
