"""The training split's relevance between queries, read once from a precomputed table.

Both tables are query x query sparse matrices over some corpus, with the query ids beside them in
``*.queries.json``: ``momentsearch pairs`` writes Phi (detection score) and Psi (confidence), and
``momentsearch relevance`` writes a proxy's S. :func:`training_pairs` turns either into one CSR
matrix over the training queries whose stored entries are the pairs (diagonal excluded) and whose
values are their confidence (pairs) or relevance S (threshold), so that a batch's block is one
slice away.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
from scipy import sparse

from momentsearch.errors import ConfigError


class PairTableSpec(Protocol):
    """What a training config says about its table (e.g. XML's ``relevance`` section)."""

    method: str  # pairs | threshold
    table: str  # the table's prefix or file
    theta: float

PRESENT = np.float32(1e-6)  # a detected pair whose confidence is 0 is still a pair


def _read(path: Path) -> sparse.csr_matrix:
    if not path.is_file():
        raise ConfigError(f"{path}: relevance table not found (write it with `momentsearch pairs` or "
                                "`momentsearch relevance`)")
    return sparse.load_npz(path).tocsr()


def table_query_ids(prefix: Path) -> list[str]:
    path = prefix.with_suffix(".queries.json")
    if not path.is_file():
        raise ConfigError(f"{path}: not found; write the table with `momentsearch pairs --out {prefix}` or "
                                f"`momentsearch relevance --out {prefix}`")
    return list(json.loads(path.read_text()))


def training_pairs(cfg: PairTableSpec, query_ids: Sequence[str]) -> sparse.csr_matrix:
    """(Q, Q) CSR over ``query_ids``: entry (i, j) present iff j is potentially relevant to i."""
    prefix = Path(cfg.table)
    ids = table_query_ids(prefix)
    if cfg.method == "pairs":
        phi, psi = _read(prefix.with_suffix(".phi.npz")), _read(prefix.with_suffix(".psi.npz"))
    elif cfg.method == "threshold":
        phi = _read(prefix.with_suffix(".qq.npz"))
        psi = phi
    else:
        raise ConfigError(f"relevance.method {cfg.method!r} reads no table")
    if phi.shape != (len(ids), len(ids)) or psi.shape != phi.shape:
        raise ConfigError(f"{prefix}: tables of shape {phi.shape} / {psi.shape} but {len(ids)} query ids")
    row_of = {q: i for i, q in enumerate(ids)}
    missing = [q for q in query_ids if q not in row_of]
    if missing:
        raise ConfigError(f"{prefix}: {len(missing)} training queries are not in the table, e.g. {missing[:3]}; "
                         "compute it over the benchmark the model trains on")
    rows = np.array([row_of[q] for q in query_ids], np.int64)
    detected = phi[rows][:, rows].tocoo()
    keep = (detected.data >= np.float32(cfg.theta)) & (detected.row != detected.col)
    r, c = detected.row[keep], detected.col[keep]
    value = np.asarray(psi[rows][:, rows][r, c]).ravel().astype(np.float32)
    value = np.clip(value, PRESENT, 1.0)
    return sparse.csr_matrix((value, (r, c)), shape=(len(rows), len(rows)))
