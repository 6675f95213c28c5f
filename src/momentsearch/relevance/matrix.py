"""Query x query relevance at corpus scale, stored sparse, and the query x video / moment tables.

The full (Q x Q) matrix is never held: rows are computed in blocks, and each row keeps its top-k
values that reach ``threshold`` (the query itself always included, at 1.0). For ActivityNet
Captions train (37k queries) a block of 1,024 rows is a 1,024 x 37k float32 array (150 MB).
``query_video`` is the max over each video's queries (MVMR Eq. 1); ``query_moment`` gives each
query's relevance to every other query's annotated moment, as a :class:`MomentRelevance`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from scipy import sparse
from tqdm import tqdm

from momentsearch.data.corpus import Corpus
from momentsearch.data.relevance import MomentRelevance
from momentsearch.fileio import atomic_path

BlockFn = Callable[[np.ndarray], np.ndarray]  # row indices -> (len(rows), Q) relevance in [0, 1]


def sparse_query_relevance(
    n: int, block: BlockFn, top_k: int = 100, threshold: float = 0.0, block_rows: int = 1024,
    progress: bool = True,
) -> sparse.csr_matrix:
    """(n, n) CSR: per row the top_k values >= threshold (and > 0), the diagonal forced to 1; ``top_k``
    0 keeps every such value (no cut: Wray et al.'s S over every item)."""
    if top_k < 0:
        raise ValueError(f"top_k must be >= 0 (0: no cut), got {top_k}")
    indptr = [0]
    indices: list[np.ndarray] = []
    data: list[np.ndarray] = []
    for s in tqdm(range(0, n, block_rows), desc="relevance blocks", unit="block", disable=not progress):
        rows = np.arange(s, min(s + block_rows, n))
        vals = block(rows)
        vals[np.arange(len(rows)), rows] = 1.0
        k = n if top_k == 0 else min(top_k, n)
        top = np.argpartition(-vals, k - 1, axis=1)[:, :k] if k < n else np.tile(np.arange(n), (len(rows), 1))
        for r in range(len(rows)):
            cols = top[r]
            v = vals[r, cols]
            keep = (v >= threshold) & (v > 0)
            cols, v = cols[keep], v[keep]
            order = np.argsort(cols)
            indices.append(cols[order])
            data.append(v[order])
            indptr.append(indptr[-1] + len(cols))
    return sparse.csr_matrix(
        (np.concatenate(data).astype(np.float32), np.concatenate(indices), np.array(indptr)), shape=(n, n))


def query_moment(corpus: Corpus, qq: sparse.csr_matrix, video_ids: Sequence[str] | None = None) -> MomentRelevance:
    """Query i's relevance to query j's annotated moment(s) = qq[i, j] (the first span of each)."""
    ms = corpus.moments
    vids = list(video_ids or corpus.videos)
    vindex = {v: i for i, v in enumerate(vids)}
    qq = qq.tocsr()
    rows = []
    for i in range(len(ms)):
        a, b = qq.indptr[i], qq.indptr[i + 1]
        rows.append([(vindex[ms[j].video_id], *ms[j].span, float(v))  # type: ignore[index]
                     for j, v in zip(qq.indices[a:b], qq.data[a:b], strict=True) if ms[j].has_ground_truth])
    return MomentRelevance.from_rows([m.query_id for m in ms], vids, rows)


def query_video(rel: MomentRelevance) -> sparse.csr_matrix:
    """(Q, V) CSR of video-level relevance: the max over the video's moments (MVMR Eq. 1)."""
    q, v, val = rel.video_relevance()
    return sparse.csr_matrix((val, (q, v)), shape=(len(rel.query_ids), len(rel.video_ids)))


def save_sparse(path: Path, m: sparse.spmatrix) -> None:
    """A scipy sparse matrix as .npz, written to a temp file and renamed into place."""
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        sparse.save_npz(fh, sparse.csr_matrix(m))
