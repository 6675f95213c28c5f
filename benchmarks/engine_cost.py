"""The search engine's cost per query in process (no HTTP, query features encoded beforehand), path by path:
what each change of the query-cost work bought, on the same index, queries and machine.

    python benchmarks/engine_cost.py --index xml=runs/demo/index --index clip=runs/clip_cost/index

Paths: ``reference`` (every candidate video localized over padded (query, video) pairs: the engine as it
was), ``paired`` (Eq. 2's similarities by one matrix product over the distinct clips, XML only),
``bounded`` (``paired`` + only the videos that can reach the top k localized; what a served search runs).
160 distinct queries, k = 10 (11 moments: one more for paging), batches of 1 and 16; the paths run in turn,
``--repeat`` times: the median ms per query (min and max beside it), the last repetition's parts
(:mod:`momentsearch.timing`), and the share of candidate videos localized. Each path's moments are checked
equal to the reference's.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, report  # noqa: E402
from query_cost import QUERIES  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", action="append", required=True, help="NAME=INDEX_DIR (repeatable)")
    ap.add_argument("--queries", type=int, default=160)
    ap.add_argument("--repeat", type=int, default=5, help="timed repetitions of each path, interleaved")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    import momentsearch
    from momentsearch.data.batching import pad_tokens
    from momentsearch.timing import PartClock

    rows = []
    for spec in args.index:
        name, _, path = spec.partition("=")
        s = momentsearch.load(path, device="cpu")
        loc = s.engine.stages.localizer
        texts = QUERIES[: args.queries]
        paths = [("reference", False, False)]
        if hasattr(loc, "paired"):
            paths.append(("paired", True, False))
        paths.append(("bounded", True, True))
        for batch in (1, 16):
            feats = [pad_tokens(s.queries.encode_many(texts[i: i + batch]), s.family.max_tokens)
                     for i in range(0, len(texts), batch)]
            ref = None
            times: dict[str, list[float]] = {label: [] for label, *_ in paths}
            clocks: dict[str, PartClock] = {}
            for rep in range(args.repeat + 1):  # the paths in turn, each repetition; the first warms
                for label, paired, bounded in paths:
                    if hasattr(loc, "paired"):
                        loc.paired = paired
                    s.engine.stats.clear()
                    clock = PartClock()
                    t0 = time.perf_counter()
                    got = [s.engine.search(["q"] * len(t), t, m, n_moments=11, moments_only=bounded,
                                           clock=clock).vcmr for t, m in feats]
                    if rep == 0:
                        ids = [(r.video_idx, r.start) for r in got]
                        ref = ids if ref is None else ref
                        same = all(np.array_equal(a[0], b[0]) and np.allclose(a[1], b[1])
                                   for a, b in zip(ids, ref, strict=True))
                        assert same, f"{name} {label}: other moments than the reference"
                        continue
                    times[label].append(1000 * (time.perf_counter() - t0) / len(texts))
                    clocks[label] = clock
                    st = dict(s.engine.stats)
            for label, *_ in paths:
                st = s.engine.stats if label == paths[-1][0] else {}
                rows.append({"index": name, "family": s.family.name, "videos": len(s.video_ids), "batch": batch,
                             "path": label, "ms/query (median)": float(np.median(times[label])),
                             "min": float(np.min(times[label])), "max": float(np.max(times[label])),
                             **{f"{p}_ms": 1000 * v / len(texts) for p, v in clocks[label].seconds.items()},
                             "localized": (st["localized"] / st["candidates"]) if st.get("candidates") else 1.0,
                             "same moments": True})
    keys = sorted({k for r in rows for k in r}, key=lambda k: list(rows[0]).index(k) if k in rows[0] else 99)
    rows = [{k: r.get(k, 0.0) for k in keys} for r in rows]
    report("engine_cost", rows, command_line(), args.json)


if __name__ == "__main__":
    main()
