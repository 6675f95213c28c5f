"""Time and peak memory of the relevance computation on real annotations, stage by stage.

    python benchmarks/relevance_speed.py --dataset ../shared/data/charades_sta/charades_sta_train.txt \
        --dataset ../shared/data/activitynet_captions/train.json

For each file: spaCy parsing (phrases), MiniLM encoding of every phrase of Phi_vp (sentence + VPs;
the cache is emptied first), the blockwise similarity and detection (Phi_vp, theta >= 0.5), and the
BoW proxy's sparse top-100 table. Peak RSS is the process's, so it grows across files.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, peak_rss_mib, report  # noqa: E402
from momentsearch.data.loaders import load_corpus  # noqa: E402
from momentsearch.relevance.matrix import sparse_query_relevance  # noqa: E402
from momentsearch.relevance.pairs import detect_pairs, phrase_sets  # noqa: E402
from momentsearch.relevance.proxies import BowIndex  # noqa: E402
from momentsearch.text.encoders import QueryFeatureCache, sentence_embeddings  # noqa: E402
from momentsearch.text.phrases import extract_phrases  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", action="append", type=Path, required=True)
    args = ap.parse_args()
    rows = []
    for path in args.dataset:
        texts = [m.text for m in load_corpus(path).moments]
        t = time.perf_counter()
        phrases = extract_phrases(texts)
        parse_s = time.perf_counter() - t
        n_phr = sum(len(s) for s in phrase_sets(phrases, "vp"))
        with tempfile.TemporaryDirectory() as d:
            cache = QueryFeatureCache(Path(d) / "q.h5")
            t = time.perf_counter()
            sentence_embeddings(cache, [p for s in phrase_sets(phrases, "vp") for p in s], progress=True)
            embed_s = time.perf_counter() - t
            t = time.perf_counter()
            table = detect_pairs(phrases, "vp", cache, min_theta=0.5, progress=True)
            sim_s = time.perf_counter() - t
        t = time.perf_counter()
        index = BowIndex(texts)
        sparse_query_relevance(len(texts), lambda r: index.iou(r), top_k=100, progress=False)
        bow_s = time.perf_counter() - t
        rows.append({"dataset": path.name if path.parent.name == "" else f"{path.parent.name}/{path.name}",
                     "queries": len(texts), "phrases (Phi_vp)": n_phr, "parse_s": parse_s, "embed_s": embed_s,
                     "similarity_s": sim_s, "total_Phi_vp_s": parse_s + embed_s + sim_s, "bow_table_s": bow_s,
                     "Phi_vp pairs/query at 0.7": float(table.detected(0.7).nnz / len(texts)),
                     "peak_rss_MiB": peak_rss_mib()})
        print(rows[-1], flush=True)
        del table, phrases, texts
    report("relevance_speed", rows, command_line())


if __name__ == "__main__":
    main()
