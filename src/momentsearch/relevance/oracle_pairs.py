"""Pair tables that mix a text detector with the synthetic oracle, to diagnose why +PR fails.

Both write the files ``momentsearch pairs`` writes (PREFIX.phi.npz, .psi.npz, .queries.json), over
the training queries of the oracle table (``momentsearch.api.relevance_tables.run_oracle_pairs``):

* :func:`oracle_confidence`: the detector's pairs, each with C = its true grade (grades below the
  oracle table's ``min_relevance`` count as 0). Detection unchanged, confidence perfect.
* :func:`oracle_at_count`: the true pairs (other videos only) of the highest grades, ties drawn at
  random, exactly as many as the detector finds at ``theta``, with C = their grade: what a perfect
  detector would give at the detector's count.

Each also reports the detector's precision and mean true grade at ``theta``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
from scipy import sparse

from momentsearch.fileio import write_json
from momentsearch.relevance.matrix import save_sparse
from momentsearch.relevance.training_pairs import table_query_ids


def _load(prefix: Path, name: str) -> sparse.csr_matrix:
    return sparse.load_npz(prefix.with_suffix(f".{name}.npz")).tocsr()


def _save(prefix: Path, ids: list[str], phi: sparse.csr_matrix, psi: sparse.csr_matrix, stats: dict) -> dict:
    save_sparse(prefix.with_suffix(".phi.npz"), phi)
    save_sparse(prefix.with_suffix(".psi.npz"), psi)
    write_json(prefix.with_suffix(".queries.json"), ids)
    write_json(prefix.with_suffix(".stats.json"), stats)
    return stats


def _detector_matrix(detector: Path, oracle: Path, ids: list[str], name: str) -> sparse.csr_matrix:
    """The detector's ``name`` matrix (phi or psi) over ``ids``, the oracle table's queries, in that order."""
    pos = {q: i for i, q in enumerate(table_query_ids(detector))}
    missing = [q for q in ids if q not in pos]
    if missing:
        raise ValueError(f"{detector}: {len(missing)} queries of {oracle} are not in the detector's table, "
                         f"e.g. {missing[:3]}")
    rows = np.array([pos[q] for q in ids], np.int64)
    return _load(detector, name)[rows][:, rows].tocsr()


def _aligned(detector: Path, oracle: Path) -> tuple[list[str], sparse.csr_matrix, sparse.csr_matrix]:
    """The detector's Phi and the oracle's grades, both over the oracle table's (training) queries."""
    ids = table_query_ids(oracle)
    return ids, _detector_matrix(detector, oracle, ids, "phi"), _load(oracle, "psi")


def _cross_video(m: sparse.csr_matrix, video_of: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    c = m.tocoo()
    vid = np.asarray(video_of)
    keep = vid[c.row] != vid[c.col]
    return c.row[keep], c.col[keep], c.data[keep]


def _quality(r: np.ndarray, c: np.ndarray, grade: sparse.csr_matrix) -> dict[str, float]:
    """Of detected pairs: the share that are true (grade >= the table's floor), that are exact
    (grade 1), and their mean grade (0 for false ones)."""
    g = np.asarray(grade[r, c]).ravel() if len(r) else np.zeros(0)
    nan = float("nan")
    return {"precision": float((g > 0).mean()) if len(g) else nan,
            "precision_grade_1": float((g >= np.float32(1.0)).mean()) if len(g) else nan,
            "mean_grade": float(g.mean()) if len(g) else nan}


def _detected_at(phi: sparse.csr_matrix, videos: list[str], theta: float,
                 grade: sparse.csr_matrix) -> tuple[int, dict[str, float]]:
    """How many other-video pairs the detector finds at ``theta``, and how true they are."""
    r, c, d = _cross_video(phi, videos)
    at = d >= np.float32(theta)
    return int(at.sum()), _quality(r[at], c[at], grade)


def oracle_confidence(detector: Path, oracle: Path, out: Path, theta: float,
                      video_of: Mapping[str, str]) -> dict:
    """The detector's pairs with C = the oracle's grade."""
    ids, phi, grade = _aligned(detector, oracle)
    c = phi.tocoo()
    value = np.asarray(grade[c.row, c.col]).ravel().astype(np.float32) if c.nnz else np.zeros(0, np.float32)
    psi = sparse.csr_matrix((np.maximum(value, 0.0), (c.row, c.col)), shape=phi.shape)
    count, quality = _detected_at(phi, [video_of[q] for q in ids], theta, grade)
    stats = {"detector": str(detector), "oracle": str(oracle), "theta": theta, "n_queries": len(ids),
             "pairs_at_theta": count, "detected_at_theta": quality}
    return _save(out, ids, phi, psi, stats)


def oracle_at_count(detector: Path, oracle: Path, out: Path, theta: float, video_of: Mapping[str, str],
                    seed: int = 0) -> dict:
    """The oracle's best pairs, as many as the detector's (other-video) pairs at ``theta``."""
    ids, phi, grade = _aligned(detector, oracle)
    videos = [video_of[q] for q in ids]
    count, quality = _detected_at(phi, videos, theta, grade)
    tr, tc, tv = _cross_video(grade, videos)
    tv = tv.astype(np.float32)
    # a perfect detector at this count: the highest grades first, ties in random order
    tie = np.random.default_rng(seed).permutation(len(tr))
    pick = np.lexsort((tie, -tv))[:count]
    shape = (len(ids), len(ids))
    new_phi = sparse.csr_matrix((np.ones(len(pick), np.float32), (tr[pick], tc[pick])), shape=shape)
    new_psi = sparse.csr_matrix((tv[pick], (tr[pick], tc[pick])), shape=shape)
    stats = {"detector": str(detector), "oracle": str(oracle), "theta": theta, "n_queries": len(ids),
             "detector_pairs_at_theta": count, "detected_at_theta": quality,
             "true_pairs_available": int(len(tr)), "pairs_drawn": int(len(pick)),
             "mean_grade_of_drawn": float(tv[pick].mean()) if len(pick) else float("nan")}
    return _save(out, ids, new_phi, new_psi, stats)


def shuffled_partners(detector: Path, oracle: Path, out: Path, theta: float, video_of: Mapping[str, str],
                      seed: int = 0) -> dict:
    """The detector's pairs at ``theta`` with each partner replaced by a random query of another video that
    holds nothing the oracle relates to the query; Phi and C (Psi) of each pair are kept, so the pair terms
    weigh what they weighed, and only what the pairs say is lost."""
    ids, phi, grade = _aligned(detector, oracle)
    psi = _detector_matrix(detector, oracle, ids, "psi")
    videos = np.asarray([video_of[q] for q in ids])
    _, video_idx = np.unique(videos, return_inverse=True)
    members = sparse.csr_matrix((np.ones(len(ids), np.float32), (video_idx, np.arange(len(ids)))),
                                shape=(video_idx.max() + 1, len(ids)))
    related_videos = ((grade > 0).astype(np.float32) @ members.T).tocsr()  # (query, video): any moment graded > 0
    rng = np.random.default_rng(seed)
    r, c, d = _cross_video(phi, videos.tolist())
    at = d >= np.float32(theta)
    r, c, d = r[at], c[at], d[at]
    conf = np.asarray(psi[r, c]).ravel().astype(np.float32) if len(r) else np.zeros(0, np.float32)
    new_c = np.empty_like(c)
    for i in np.unique(r):
        sel = np.flatnonzero(r == i)
        banned = set(related_videos[i].indices.tolist()) | {int(video_idx[i])}
        free = np.flatnonzero(~np.isin(video_idx, list(banned)))
        if len(free) < len(sel):
            raise ValueError(f"query {ids[i]}: {len(sel)} pairs but only {len(free)} unrelated queries to draw from")
        new_c[sel] = rng.choice(free, size=len(sel), replace=False)
    shape = (len(ids), len(ids))
    new_phi = sparse.csr_matrix((d, (r, new_c)), shape=shape)
    new_psi = sparse.csr_matrix((conf, (r, new_c)), shape=shape)
    drawn = np.asarray(grade[r, new_c]).ravel() if len(r) else np.zeros(0)
    stats = {"detector": str(detector), "oracle": str(oracle), "theta": theta, "n_queries": len(ids),
             "pairs_at_theta": int(len(r)), "detected_at_theta": _quality(r, c, grade),
             "mean_grade_of_drawn": float(drawn.mean()) if len(drawn) else float("nan"),
             "mean_confidence": float(conf.mean()) if len(conf) else float("nan"), "seed": seed}
    return _save(out, ids, new_phi, new_psi, stats)
