"""A real 100k-video index split into shards answers as the whole index: the same moments for the same queries.

    python benchmarks/sharded_exactness.py --index /tmp/index100k [--shards 4] [--queries 200]

Splits the index folder (``momentsearch shard``: its ``scan`` stage carried into each shard) unless the shards are
there, then searches ``--queries`` queries (k = 10) four ways: the whole index and the shards (in this process),
each with the ``exact`` first stage and with ``auto`` (``scan``). Reports the share of queries whose 10 moments
(video, start, end, in order) are the same, the largest score difference, and each ``scan`` answer's agreement
with the exact one (its moments found in the exact top 10). Writes ``results/sharded_exactness.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import momentsearch  # noqa: E402
from _common import command_line, report  # noqa: E402
from momentsearch.serving.shards import is_sharded, split_index  # noqa: E402
from service_load import QUERIES  # noqa: E402


def key(hits: list) -> list[tuple]:
    return [(h.video_id, round(h.start, 3), round(h.end, 3)) for h in hits]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=Path, default=Path("/tmp/index100k"))
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    out = args.out or args.index.parent / f"{args.index.name}_shards{args.shards}"
    if not is_sharded(out):
        t = time.time()
        split_index(args.index, args.shards, out, progress=True)
        print(f"split into {args.shards} shards in {time.time() - t:.0f} s", flush=True)
    texts = QUERIES[: args.queries]
    got = {}
    for where, path in (("whole", args.index), ("shards", out)):
        for stage in ("exact", "auto"):
            s = momentsearch.load(path, device="cpu", first_stage=stage)
            t = time.time()
            got[where, stage] = [s.search(q, k=10) for q in texts]  # one query at a time, as a user asks
            print(f"{where} {stage} ({getattr(s.first_stage, 'spec', '')}): {time.time() - t:.0f} s", flush=True)
            if hasattr(s, "close"):
                s.close()
    rows = []
    for stage in ("exact", "auto"):
        a, b = got["whole", stage], got["shards", stage]
        same = np.mean([key(x) == key(y) for x, y in zip(a, b, strict=True)])
        diff = max((abs(h.score - g.score) / max(abs(h.score), 1e-9) for x, y in zip(a, b, strict=True)
                    if key(x) == key(y) for h, g in zip(x, y, strict=True)), default=0.0)
        agree = {w: float(np.mean([len(set(key(x)) & set(key(e))) / max(len(e), 1)
                                   for x, e in zip(got[w, stage], got[w, "exact"], strict=True)])) for w in ("whole", "shards")}
        rows.append({"first stage": stage, "queries": len(texts), "shards": args.shards,
                     "same 10 moments, in order": float(same), "max relative score difference": float(diff),
                     "whole: moments in the exact top 10": agree["whole"],
                     "shards: moments in the exact top 10": agree["shards"]})
    report("sharded_exactness", rows, command_line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
