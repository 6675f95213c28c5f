"""How long evaluation takes: 100 predictions for each of N queries (target: seconds at 100,000).

    python benchmarks/eval_speed.py [--queries 100000] [--videos 20000]

Times (best of 3) the standard VCMR/SVMR/VR evaluation in memory, the same with DiDeMo-style
4-annotator ground truth, multi-positive recall against 3 relevant moments per query, and the
round trip of a TVR submission file (write + read).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, peak_rss_mib, report, timed  # noqa: E402
from momentsearch.data.corpus import Corpus, Moment, Video  # noqa: E402
from momentsearch.data.relevance import MomentRelevance  # noqa: E402
from momentsearch.evaluation import RankedMoments, Submission, evaluate_submission, multi_positive_recall  # noqa: E402


def make(nq: int, nv: int, k: int, n_spans: int, seed: int = 0) -> tuple[Corpus, RankedMoments]:
    rng = np.random.default_rng(seed)
    vids = [f"v{i}" for i in range(nv)]
    dur = rng.uniform(20, 150, nv)
    gv = rng.integers(nv, size=nq)
    moments = []
    for i in range(nq):
        spans = tuple(tuple(sorted(rng.uniform(0, dur[gv[i]], 2).round(2).tolist())) for _ in range(n_spans))
        moments.append(Moment(str(i), "q", vids[gv[i]], spans))
    corpus = Corpus.from_parts([Video(v, float(d)) for v, d in zip(vids, dur)], moments)
    pv = rng.integers(nv, size=(nq, k))
    pv[:, 3] = gv  # one prediction on the right video
    st = np.sort(rng.uniform(0, 1, (nq, k, 2)), axis=-1) * dur[pv][..., None]
    ranked = RankedMoments([m.query_id for m in moments], vids, pv.astype(np.int64), st[..., 0], st[..., 1],
                           np.zeros((nq, k)))
    return corpus, ranked


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--queries", type=int, default=100_000)
    ap.add_argument("--videos", type=int, default=20_000)
    ap.add_argument("--k", type=int, default=100)
    args = ap.parse_args()
    rows = []
    for n_spans, label in ((1, "single span (TVR/Charades/ANet)"), (4, "4 annotators (DiDeMo rule)")):
        t = time.perf_counter()
        corpus, ranked = make(args.queries, args.videos, args.k, n_spans)
        build = time.perf_counter() - t
        sub = Submission.from_ranked({"VCMR": ranked, "SVMR": ranked, "VR": ranked})
        sec, metrics = timed(lambda: evaluate_submission(sub, corpus), repeat=3)
        rows.append({"what": f"VCMR+SVMR+VR, {label}", "queries": args.queries, "preds/query": args.k,
                     "seconds": sec, "VCMR 0.5-r100": metrics["VCMR"]["0.5-r100"], "setup_s": build})
        if n_spans == 1:
            rel = MomentRelevance.annotated(corpus, ranked.video_ids)
            rng = np.random.default_rng(1)
            extra_v = rng.integers(args.videos, size=(args.queries, 2))
            q = np.repeat(np.arange(args.queries), 3)
            vv = np.column_stack([rel.video_idx, extra_v]).ravel()
            ss = np.column_stack([rel.start, rng.uniform(0, 20, (args.queries, 2))]).ravel()
            ee = ss + np.column_stack([rel.end - rel.start, rng.uniform(2, 20, (args.queries, 2))]).ravel()
            multi = MomentRelevance(rel.query_ids, rel.video_ids, np.arange(0, 3 * args.queries + 1, 3),
                                    vv.astype(np.int64), ss, ee, np.ones(3 * args.queries, np.float32))
            assert (q == multi.row_ids()).all()
            sec, mp = timed(lambda: multi_positive_recall(ranked, multi), repeat=3)
            rows.append({"what": "multi-positive VCMR+VR, 3 relevant/query", "queries": args.queries,
                         "preds/query": args.k, "seconds": sec, "VCMR 0.5-r100": mp["VCMR"]["0.5-r100"],
                         "setup_s": 0.0})
            with tempfile.TemporaryDirectory() as d:
                path = Path(d) / "sub.json"
                one = Submission.from_ranked({"VCMR": ranked})
                t_write, _ = timed(lambda: one.write(path), repeat=1)
                t_read, _ = timed(lambda: Submission.read(path), repeat=1)
                size = path.stat().st_size / 2**20
            rows.append({"what": f"TVR JSON write+read, VCMR only ({size:.0f} MiB)", "queries": args.queries,
                         "preds/query": args.k, "seconds": t_write + t_read, "VCMR 0.5-r100": float("nan"),
                         "setup_s": 0.0})
    rows.append({"what": "peak RSS of this script (MiB)", "queries": args.queries, "preds/query": args.k,
                 "seconds": peak_rss_mib(), "VCMR 0.5-r100": float("nan"), "setup_s": 0.0})
    report("eval_speed", rows, command_line())


if __name__ == "__main__":
    main()
