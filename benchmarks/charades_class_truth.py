"""Text proxies scored against Charades-STA's action-class truth (issue 43, item 2, in part): no training.

    python benchmarks/charades_class_truth.py [--split test] [--out docs/figures/charades_class_truth.png]

Truth: two queries of different videos are relevant to each other when their action classes
(``relevance.action_classes``: the class of the Charades interval that best overlaps each query's span)
are equal. Every pair of queries of different videos is scored by each proxy:

* BoW: IoU of content-word sets (``relevance.proxies.BowIndex``);
* PoS: IoU of verb and noun lemma sets (spaCy ``en_core_web_sm``; ``PosIndex.lemmas``);
* synset: IoU of verb and noun WordNet synsets chosen by Lesk (Debian's wordnet-base; ``PosIndex.synsets``);
* MiniLM: cosine of all-MiniLM-L6-v2 sentence embeddings, clipped at 0 (offline);
* the pairs paper's detectors Phi_sent, Phi_vp and Phi_np-vp (``relevance.pairs``): the largest MiniLM cosine
  over the two queries' phrase sets, at theta 0.5, 0.7 and 0.9 (the score 0 below 0.5).

For each proxy: ROC AUC, and precision, recall, positives per query and per random batch of 128 at
thresholds 0.2, 0.5, 0.7, 0.8 (and 0.9, the MVMR paper's false-negative filter for MiniLM; its recall is the share of same-class pairs the
filter would remove from a batch's negatives). Writes ``results/charades_class_truth.json`` and a
precision-recall plot.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, report  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
THRESHOLDS = (0.2, 0.5, 0.7, 0.8, 0.9)
BATCH = 128  # a training batch of random queries: its other 127 hold pos/query x 127 / (other-video queries)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "charades_sta")
    ap.add_argument("--split", default="test")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "figures" / "charades_class_truth.png")
    args = ap.parse_args()
    from sklearn.metrics import roc_auc_score

    from momentsearch.data.loaders.charades_actions import load_charades_actions
    from momentsearch.data.loaders.charades_sta import load_charades_sta
    from momentsearch.relevance.action_classes import query_classes
    from momentsearch.relevance.pairs import DETECTORS, detect_pairs
    from momentsearch.relevance.proxies import BowIndex, PosIndex
    from momentsearch.text.encoders import QueryFeatureCache, sentence_embeddings
    from momentsearch.text.phrases import extract_phrases

    table = load_charades_actions(args.data / "Charades_v1_train.csv", args.data / "Charades_v1_test.csv")
    corpus = load_charades_sta(args.data / f"charades_sta_{args.split}.txt")
    classes = query_classes(corpus, table)
    keep = [i for i, m in enumerate(corpus.moments) if classes[m.query_id] is not None]
    texts = [corpus.moments[i].text for i in keep]
    cls = np.array([classes[corpus.moments[i].query_id] for i in keep])
    vid = np.array([corpus.moments[i].video_id for i in keep])
    n = len(texts)
    iu = np.triu_indices(n, 1)
    other_video = vid[iu[0]] != vid[iu[1]]
    pairs = (iu[0][other_video], iu[1][other_video])
    truth = cls[pairs[0]] == cls[pairs[1]]
    others = 2 * len(truth) / n  # queries of other videos, per query
    print(f"{args.split}: {n:,} queries with a class, {len(truth):,} pairs of different videos, "
          f"{int(truth.sum()):,} of one class ({100 * truth.mean():.2f} %)", flush=True)
    phrases = extract_phrases(texts)
    with tempfile.TemporaryDirectory() as tmp:
        cache = QueryFeatureCache(Path(tmp) / "q.h5")
        emb = sentence_embeddings(cache, texts, progress=False)
        detectors = {f"Phi_{d}": detect_pairs(phrases, d, cache, min_theta=0.5, progress=False).phi_score.toarray()
                     for d in DETECTORS}
    proxies = {
        "BoW": BowIndex(texts).iou(slice(None)),
        "PoS (verb+noun lemmas)": PosIndex.lemmas(texts).iou(slice(None)),
        "MiniLM cosine": np.clip(emb @ emb.T, 0.0, 1.0),
        "synset (verb+noun, Lesk)": PosIndex.synsets(texts).iou(slice(None)),
        **detectors,
    }
    rows, curves = [], {}
    for name, m in proxies.items():
        s = m[pairs]
        row = {"proxy": name, "AUC": float(roc_auc_score(truth, s))}
        for t in THRESHOLDS:
            pos = s >= t
            row[f"P@{t:g}"] = float(truth[pos].mean()) if pos.any() else float("nan")
            row[f"R@{t:g}"] = float(pos[truth].mean())
            row[f"pos/query@{t:g}"] = float(2 * pos.sum() / n)
            row[f"pos/batch@{t:g}"] = float(2 * pos.sum() / n * (BATCH - 1) / others)  # in a random batch
        rows.append(row)
        order = np.argsort(-s, kind="stable")
        hits = np.cumsum(truth[order])
        at = np.unique(np.r_[np.arange(max(1, len(order) // 400) - 1, len(order), max(1, len(order) // 400)),
                             len(order) - 1])  # every 1/400th of the ranking (past the first pair's tie order)
        curves[name] = (hits[at] / truth.sum(), hits[at] / (at + 1))
    report("charades_class_truth", rows, command_line(),
           extra={"split": args.split, "queries": n, "pairs": int(len(truth)), "same_class_pairs": int(truth.sum()),
                  "same_class_per_batch": float(2 * truth.sum() / n * (BATCH - 1) / others)})
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.2))
    for name, (r, p) in curves.items():
        ax.plot(r, p, label=f"{name} (AUC {next(x['AUC'] for x in rows if x['proxy'] == name):.3f})")
    ax.axhline(truth.mean(), color="grey", lw=0.8, ls="--", label=f"chance ({100 * truth.mean():.1f} %)")
    ax.set_xlabel("recall of same-class pairs")
    ax.set_ylabel("precision")
    ax.set_title(f"Charades-STA {args.split}: text proxies against the action-class truth", fontsize=10)
    ax.legend(fontsize=8)
    ax.set_ylim(0, 1)
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
