"""Potentially relevant pairs (``potentially-relevant-pairs-vcmr.txt`` Sec. 4.1, Eqs. 5-8).

Each query has a set of phrases that always includes the whole sentence (n = 0):

* Phi_sent: the sentence only;
* Phi_vp: the sentence and its verb phrases;
* Phi_np-vp: the sentence and its NP+VP recombinations ("man start dancing").

Phi(q_i, q_j) = 1 when the largest SBERT cosine over all pairs of their phrases is >= theta (Eq. 7);
the confidence of a detected pair is Psi = [cos]_+ of the two whole sentences (Eq. 8). The table
keeps, for every pair whose largest phrase cosine reaches ``min_theta``, that cosine (so any
theta >= min_theta can be applied later) and Psi.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import sparse
from tqdm import tqdm

from momentsearch.text.encoders import QueryFeatureCache, sentence_embeddings
from momentsearch.text.phrases import Phrases

Detector = Literal["sent", "vp", "np-vp"]
DETECTORS: tuple[Detector, ...] = ("sent", "vp", "np-vp")


def phrase_sets(phrases: Sequence[Phrases], detector: Detector) -> list[tuple[str, ...]]:
    if detector == "sent":
        return [(p.sentence,) for p in phrases]
    if detector == "vp":
        return [(p.sentence, *p.vps) for p in phrases]
    if detector == "np-vp":
        return [(p.sentence, *p.np_vps) for p in phrases]
    raise ValueError(f"detector must be one of {DETECTORS}, got {detector!r}")


@dataclass
class PairTable:
    """Sparse (Q, Q): ``phi_score`` = max phrase cosine (>= min_theta), ``psi`` = sentence [cos]_+."""

    phi_score: sparse.csr_matrix
    psi: sparse.csr_matrix
    min_theta: float

    def detected(self, theta: float) -> sparse.csr_matrix:
        """Phi at ``theta`` (1 where detected), the diagonal excluded."""
        if theta < self.min_theta:
            raise ValueError(f"theta {theta} is below the table's min_theta {self.min_theta}")
        m = (self.phi_score >= np.float32(theta)).astype(np.float32).tocsr()
        m.setdiag(0)
        m.eliminate_zeros()
        return m

    def confidence(self, theta: float) -> sparse.csr_matrix:
        """C = Psi on the pairs Phi detects at ``theta`` (Eq. 6)."""
        return self.detected(theta).multiply(self.psi).tocsr()


def detect_pairs(
    phrases: Sequence[Phrases], detector: Detector, cache: QueryFeatureCache, min_theta: float = 0.5,
    block_queries: int = 256, progress: bool = True,
) -> PairTable:
    sets = phrase_sets(phrases, detector)
    flat = [p for s in sets for p in s]
    owner_ptr = np.zeros(len(sets) + 1, np.int64)
    owner_ptr[1:] = np.cumsum([len(s) for s in sets])
    emb = sentence_embeddings(cache, flat, progress=progress)
    sent = emb[owner_ptr[:-1]]  # each set starts with the whole sentence
    n = len(sets)
    rows, cols, vals, psis = [], [], [], []
    for s in tqdm(range(0, n, block_queries), desc=f"Phi_{detector}", unit="block", disable=not progress):
        qs = np.arange(s, min(s + block_queries, n))
        a, b = owner_ptr[qs[0]], owner_ptr[qs[-1] + 1]
        cos = emb[a:b] @ emb.T  # (phrases of the block, all phrases)
        per_col = np.maximum.reduceat(cos, owner_ptr[:-1], axis=1)  # (block phrases, Q)
        per_q = np.maximum.reduceat(per_col, owner_ptr[qs] - a, axis=0)  # (block, Q)
        r, c = np.nonzero(per_q >= np.float32(min_theta) - np.float32(1e-6))
        rows.append(qs[r])
        cols.append(c)
        vals.append(np.minimum(per_q[r, c], 1.0))
        psis.append(np.clip(np.einsum("kd,kd->k", sent[qs[r]], sent[c]), 0.0, 1.0))
    r, c = np.concatenate(rows), np.concatenate(cols)
    phi = sparse.csr_matrix((np.concatenate(vals).astype(np.float32), (r, c)), shape=(n, n))
    psi = sparse.csr_matrix((np.concatenate(psis).astype(np.float32), (r, c)), shape=(n, n))
    return PairTable(phi, psi, min_theta)
