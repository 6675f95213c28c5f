"""What RMMN's true-negative filter (Yang et al. Eq. 4) removes from the training negatives, judged by
the synthetic oracle.

    python benchmarks/mvmr_true_negatives.py [--benchmark runs/experiments/benchmarks/experiment]
                                             [--oracle-table runs/experiments/benchmarks/experiment/relevance/oracle_train]

Over the training split, every (query, other video) pair is a candidate negative. The oracle grades
it (the best grade of the video's annotated moments for the query). For s_te from the sentence
embeddings at t_tr in {0.9, 0.8, 0.7, 0.6}, and from the oracle's own table (``true_negatives_table``)
at 0.5 and 1.0, it prints how many pairs the filter marks unreliable per query, and their precision
and recall against the pairs the oracle grades >= 0.5 and = 1 (the false negatives). The s_te pairs
are exactly MMNBatches'.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import report  # noqa: E402
from momentsearch.data.synthetic import SyntheticBenchmark  # noqa: E402
from momentsearch.models.mmn.negatives import unreliable_from_table, unreliable_pairs  # noqa: E402
from momentsearch.relevance.training_pairs import training_pairs  # noqa: E402
from momentsearch.text.encoders import QueryFeatureCache, sentence_embeddings  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--benchmark", type=Path, default=Path("runs/experiments/benchmarks/experiment"))
    ap.add_argument("--oracle-table", type=Path, default=None,
                    help="the experiment runner's oracle table (default: BENCHMARK/relevance/oracle_train)")
    a = ap.parse_args()
    table = a.oracle_table or a.benchmark / "relevance" / "oracle_train"
    bench = SyntheticBenchmark.load(a.benchmark)
    moments = bench.corpus.split("train").moments
    videos = list(bench.corpus.split("train").videos)
    col = {v: i for i, v in enumerate(videos)}
    query_video = np.array([col[m.video_id] for m in moments])
    rel = bench.oracle("train").moment_relevance(min_relevance=0.5, query_ids=[m.query_id for m in moments])
    grade = rel.select(rel.query_ids, videos).dense_video_relevance()  # (Q, V) the oracle's grade
    cross = np.ones_like(grade, bool)
    cross[np.arange(len(moments)), query_video] = False  # the candidate negatives: other videos
    truth = {g: (grade >= g) & cross for g in (0.5, 1.0)}
    emb = sentence_embeddings(QueryFeatureCache(a.benchmark / "features" / "queries_minilm.h5"),
                              [m.text for m in moments])
    filters = [(f"MiniLM s_te >= {t}", unreliable_pairs(emb, query_video, len(videos), t)) for t in (0.9, 0.8, 0.7, 0.6)]
    if table.with_suffix(".qq.npz").exists():
        ids = [m.query_id for m in moments]
        for t in (0.5, 1.0):
            related = training_pairs(SimpleNamespace(method="threshold", table=str(table), theta=t), ids)
            filters.append((f"oracle grade >= {t}", unreliable_from_table(related, query_video, len(videos))))
    else:
        print(f"{table}.qq.npz not found: oracle rows skipped (the experiment runner writes it)", file=sys.stderr)
    rows = []
    for name, m in filters:
        marked = m.toarray() & cross
        row = {"s_te": name, "unreliable_per_query": float(marked.sum() / len(moments))}
        for g, t in truth.items():
            hit = float((marked & t).sum())
            row[f"recall_grade>={g:g}"] = hit / max(int(t.sum()), 1)
            row[f"precision_grade>={g:g}"] = hit / max(int(marked.sum()), 1)
        rows.append(row)
    print(f"train split: {len(moments)} queries, {len(videos)} videos; other videos at grade >= 0.5 per query "
          f"{truth[0.5].sum() / len(moments):.2f}, at grade 1 {truth[1.0].sum() / len(moments):.2f}\n")
    report("mvmr_true_negatives", rows, "python benchmarks/mvmr_true_negatives.py")


if __name__ == "__main__":
    main()
