"""Semantic relevance proxies between captions (Wray et al. Sec. 4.4; Eq. 8 of the pairs paper).

* ``bow_iou``: intersection over union of the two captions' word sets, stop words removed
  (scikit-learn's English list; words are lower-cased alphabetic tokens, not lemmatised).
* ``embedding_cosine``: [cos]_+ of the L2-normalised sentence embeddings — the confidence Psi of
  the potentially-relevant-pairs paper (Eq. 8).

Each has a pairwise form and a vectorised (rows x cols) form over a corpus.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from scipy import sparse

_WORD = re.compile(r"[a-z]+")


def content_words(text: str) -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(w for w in _WORD.findall(text.lower()) if w not in ENGLISH_STOP_WORDS)


def bow_iou(a: str, b: str) -> float:
    wa, wb = content_words(a), content_words(b)
    union = len(wa | wb)
    return len(wa & wb) / union if union else 0.0


class BowIndex:
    """Binary word-incidence matrix of a caption list, for blockwise IoU."""

    def __init__(self, texts: Sequence[str]):
        vocab: dict[str, int] = {}
        rows, cols = [], []
        for i, t in enumerate(texts):
            for w in content_words(t):
                rows.append(i)
                cols.append(vocab.setdefault(w, len(vocab)))
        self.matrix = sparse.csr_matrix(
            (np.ones(len(rows), np.float32), (rows, cols)), shape=(len(texts), max(len(vocab), 1)))
        self.sizes = np.asarray(self.matrix.sum(axis=1)).ravel()

    def iou(self, rows: slice | np.ndarray, cols: slice | np.ndarray | None = None) -> np.ndarray:
        """Dense (len(rows), len(cols)) IoU block."""
        a = self.matrix[rows]
        b = self.matrix if cols is None else self.matrix[cols]
        inter = (a @ b.T).toarray()
        sa = self.sizes[rows][:, None]
        sb = (self.sizes if cols is None else self.sizes[cols])[None, :]
        union = sa + sb - inter
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(union > 0, inter / union, 0.0).astype(np.float32)


def embedding_cosine(e_rows: np.ndarray, e_cols: np.ndarray) -> np.ndarray:
    """[cos]_+ between L2-normalised embeddings: (R, d) x (C, d) -> (R, C) in [0, 1]."""
    return np.clip(e_rows @ e_cols.T, 0.0, 1.0).astype(np.float32)
