"""How well text-only relevance finds the truly relevant pairs, on the synthetic benchmark.

    python benchmarks/pair_quality.py --benchmark runs/demo/benchmark [--split test]

Truth: the oracle's relevance between query i and query j's event; a pair is relevant when it is
1.0 (the same kind of event). For each detector Phi_sent / Phi_vp / Phi_np-vp (pairs paper Eq. 7)
at theta in {0.5, 0.6, 0.7, 0.8}: precision and recall of the detected pairs and the pairs per
query; for each graded proxy (BoW IoU, PoS IoU, synset IoU, METEOR, [cos]+): Spearman's rank
correlation with the oracle's graded relevance over all pairs (METEOR, one Python call per pair:
over the pairs of ``--meteor-rows`` random queries with all others). Times each stage.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, peak_rss_mib, report  # noqa: E402
from momentsearch.data.synthetic import SyntheticBenchmark  # noqa: E402
from momentsearch.relevance.meteor import meteor_matrix  # noqa: E402
from momentsearch.relevance.pairs import DETECTORS, detect_pairs  # noqa: E402
from momentsearch.relevance.proxies import BowIndex, PosIndex, embedding_cosine  # noqa: E402
from momentsearch.text.encoders import QueryFeatureCache, sentence_embeddings  # noqa: E402
from momentsearch.text.phrases import extract_phrases  # noqa: E402

THETAS = (0.5, 0.6, 0.7, 0.8)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--benchmark", type=Path, required=True)
    ap.add_argument("--split", default="test")
    ap.add_argument("--meteor-rows", type=int, default=300)
    args = ap.parse_args()
    bench = SyntheticBenchmark.load(args.benchmark)
    corpus = bench.corpus.split(args.split)
    oracle = bench.oracle(args.split)
    texts = [m.text for m in corpus.moments]
    n = len(texts)
    ev = {e: k for k, e in enumerate(oracle.events.event_ids)}
    cols = np.array([ev[m.meta["event"]] for m in corpus.moments])
    graded = np.stack([oracle.relevance_to_events(oracle._q[i])[cols] for i in range(n)])
    off = ~np.eye(n, dtype=bool)
    truth = (graded >= 1.0) & off
    cache = QueryFeatureCache(args.benchmark / "features" / "queries_minilm.h5")
    t = time.perf_counter()
    phrases = extract_phrases(texts)
    parse_s = time.perf_counter() - t
    rows = []
    for det in DETECTORS:
        t = time.perf_counter()
        table = detect_pairs(phrases, det, cache, min_theta=min(THETAS), progress=False)
        secs = time.perf_counter() - t
        for theta in THETAS:
            d = table.detected(theta).toarray() > 0
            tp = (d & truth).sum()
            rows.append({"relevance": f"Phi_{det}", "theta": theta,
                         "precision": float(tp / max(d.sum(), 1)), "recall": float(tp / truth.sum()),
                         "pairs/query": float(d.sum() / n), "spearman": float("nan"), "seconds": secs})
    iu = np.triu_indices(n, 1)

    def graded_row(name: str, fn) -> None:  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        table = fn()
        rows.append({"relevance": name, "theta": float("nan"), "precision": float("nan"), "recall": float("nan"),
                     "pairs/query": float("nan"), "spearman": float(spearmanr(table[iu], graded[iu]).statistic),
                     "seconds": time.perf_counter() - t})

    everyone = np.arange(n)
    graded_row("BoW IoU", lambda: BowIndex(texts).iou(everyone))
    graded_row("PoS IoU", lambda: PosIndex.lemmas(texts).iou(everyone))
    graded_row("synset IoU (Lesk)", lambda: PosIndex.synsets(texts, "lesk").iou(everyone))
    graded_row("[cos]+ (Psi)", lambda: embedding_cosine(*(2 * [sentence_embeddings(cache, texts, progress=False)])))
    t = time.perf_counter()
    pick = np.sort(np.random.default_rng(0).choice(n, size=min(args.meteor_rows, n), replace=False))
    met = meteor_matrix([texts[i] for i in pick], texts)
    mask = pick[:, None] != everyone[None, :]
    rows.append({"relevance": f"METEOR ({len(pick)} x {n} pairs)", "theta": float("nan"), "precision": float("nan"),
                 "recall": float("nan"), "pairs/query": float("nan"),
                 "spearman": float(spearmanr(met[mask], graded[pick][mask]).statistic),
                 "seconds": time.perf_counter() - t})
    print(f"{n} queries; truly relevant pairs per query {truth.sum() / n:.2f}; parsing {parse_s:.1f} s; "
          f"peak RSS {peak_rss_mib():.0f} MiB")
    report("pair_quality", rows, command_line())


if __name__ == "__main__":
    main()
