"""``momentsearch relevance``: a sparse graded relevance table from annotation text alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from momentsearch.console import say
from momentsearch.data.loaders import load_corpus
from momentsearch.errors import ConfigError
from momentsearch.evaluation.report import figure, save_png
from momentsearch.fileio import output_file, write_json
from momentsearch.relevance.matrix import query_moment, save_sparse, sparse_query_relevance
from momentsearch.relevance.proxies import BowIndex, PosIndex, embedding_cosine
from momentsearch.text.encoders import QueryFeatureCache, sentence_embeddings

PROXIES = ("bow", "pos", "synset", "meteor", "cosine")
THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.9)


def run_relevance(dataset: Path, proxy: str, out: Path, format: str | None = None, top_k: int = 100,
                  threshold: float = 0.0, cache: Path | None = None) -> dict[str, object]:
    if proxy not in PROXIES:
        raise ConfigError(f"unknown proxy {proxy!r}; choose one of {PROXIES}")
    output_file(out)  # before minutes of work, not after
    corpus = load_corpus(dataset, format)
    texts = [m.text for m in corpus.moments]
    if proxy == "meteor":
        from momentsearch.relevance.meteor import meteor_matrix

        def block(rows: np.ndarray) -> np.ndarray:  # O(n^2) Python: minutes for a few thousand captions
            return meteor_matrix([texts[i] for i in rows], texts)
    elif proxy in ("bow", "pos", "synset"):
        index = {"bow": BowIndex, "pos": PosIndex.lemmas, "synset": PosIndex.synsets}[proxy](texts)

        def block(rows: np.ndarray) -> np.ndarray:
            return index.iou(rows)
    else:
        qcache = QueryFeatureCache(cache or out.with_suffix(".minilm.h5"))
        emb = sentence_embeddings(qcache, texts)

        def block(rows: np.ndarray) -> np.ndarray:
            return embedding_cosine(emb[rows], emb)

    qq = sparse_query_relevance(len(texts), block, top_k=top_k, threshold=threshold)
    rel = query_moment(corpus, qq)
    rel.save(out)
    save_sparse(out.with_suffix(".qq.npz"), qq)  # query x query, for training
    write_json(out.with_suffix(".queries.json"), [m.query_id for m in corpus.moments])
    off = qq.copy()
    off.setdiag(0)
    off.eliminate_zeros()
    per_query = {f">= {t}": float(np.mean(np.asarray((off >= t).sum(axis=1)).ravel())) for t in THRESHOLDS}
    stats = {
        "dataset": str(dataset), "proxy": proxy, "n_queries": len(texts), "top_k": top_k, "threshold": threshold,
        "stored_pairs_besides_self": int(off.nnz),
        "other_queries_per_query_at_or_above": per_query,
        "value_percentiles": {str(p): float(np.percentile(off.data, p)) if off.nnz else 0.0 for p in (10, 50, 90, 99)},
    }
    write_json(out.with_suffix(".stats.json"), stats)
    _histogram(off.data, out.with_suffix(".hist.png"), f"{proxy} relevance, {dataset.name}")
    say(f"{len(texts)} queries; other queries per query at or above " +
               ", ".join(f"{k}: {v:.2f}" for k, v in per_query.items()))
    say(f"wrote {out}, {out.with_suffix('.stats.json')} and {out.with_suffix('.hist.png')}")
    return stats


def _histogram(values: np.ndarray, path: Path, title: str) -> None:
    fig, ax = figure(figsize=(5, 3.4))
    ax.hist(values, bins=50, range=(0, 1), color="tab:blue")
    ax.set_yscale("log")
    ax.set_xlabel("relevance of a stored (query, other query) pair")
    ax.set_ylabel("pairs")
    ax.set_title(title)
    save_png(fig, path)


def run_pairs(dataset: Path, detector: str, out: Path, format: str | None = None, min_theta: float = 0.5,
              n_examples: int = 10, seed: int = 0) -> dict[str, object]:
    """Potentially relevant pairs from the text: pairs per query at each theta, and examples."""
    from momentsearch.relevance.pairs import DETECTORS, detect_pairs
    from momentsearch.text.phrases import extract_phrases

    if detector not in DETECTORS:
        raise ConfigError(f"unknown detector {detector!r}; choose one of {DETECTORS}")
    corpus = load_corpus(dataset, format)
    texts = [m.text for m in corpus.moments]
    phrases = extract_phrases(texts)
    table = detect_pairs(phrases, detector, QueryFeatureCache(out.with_suffix(".minilm.h5")), min_theta)  # type: ignore[arg-type]
    per_query = {}
    for theta in (t for t in (0.5, 0.6, 0.7, 0.8) if t >= min_theta):
        per_query[str(theta)] = float(table.detected(theta).nnz / len(texts))
    d = table.detected(max(0.7, min_theta)).tocoo()
    rng = np.random.default_rng(seed)
    picks = rng.choice(d.nnz, size=min(n_examples, d.nnz), replace=False) if d.nnz else []
    examples = [{"query": texts[d.row[k]], "other": texts[d.col[k]], "phi_score": float(table.phi_score[d.row[k], d.col[k]]),
                 "psi": float(table.psi[d.row[k], d.col[k]])} for k in picks]
    for name, m in (("phi", table.phi_score), ("psi", table.psi)):  # rows/cols follow the corpus' query order
        save_sparse(out.with_suffix(f".{name}.npz"), m)
    write_json(out.with_suffix(".queries.json"), [m.query_id for m in corpus.moments])
    stats = {"dataset": str(dataset), "detector": detector, "n_queries": len(texts), "min_theta": min_theta,
             "pairs_per_query": per_query, "examples_theta_0.7": examples}
    write_json(out.with_suffix(".stats.json"), stats)
    say(f"{len(texts)} queries; Phi_{detector} pairs per query: " +
               ", ".join(f"theta {k}: {v:.2f}" for k, v in per_query.items()))
    for e in examples:
        say(f"  [{e['phi_score']:.2f} / Psi {e['psi']:.2f}] {e['query']}  <->  {e['other']}")
    return stats


def run_oracle_pairs(benchmark: Path, out: Path, split: str = "train", min_relevance: float = 0.5) -> dict[str, object]:
    """Pairs from the synthetic oracle instead of the text: Phi = Psi = the true relevance of query i
    to query j's event (>= ``min_relevance``), over one split, in the format ``momentsearch pairs``
    writes. With theta 1.0 the pairs are exactly the equally relevant ones; lower theta adds graded
    ones, whose confidence is their grade. For experiments: what the losses gain with perfect pairs."""
    from momentsearch.data.synthetic import SyntheticBenchmark

    bench = SyntheticBenchmark.load(benchmark)
    corpus = bench.corpus.split(split)
    m = bench.oracle(split).query_relevance(corpus, min_relevance)
    for name in ("phi", "psi", "qq"):  # qq: the same truth as a graded table for threshold training
        save_sparse(out.with_suffix(f".{name}.npz"), m)
    write_json(out.with_suffix(".queries.json"), [q.query_id for q in corpus.moments])
    per_query = {str(t): float(((m >= t).sum() - (m.diagonal() >= t).sum()) / len(corpus)) for t in (0.5, 0.65, 1.0)}
    stats = {"benchmark": str(benchmark), "split": split, "n_queries": len(corpus), "pairs_per_query": per_query}
    write_json(out.with_suffix(".stats.json"), stats)
    say(f"{len(corpus)} {split} queries; oracle pairs per query: " +
               ", ".join(f">= {k}: {v:.2f}" for k, v in per_query.items()))
    return stats
