"""This machine's floors for the parts of a served query (docs/query_cost.md): measured, not assumed.

    python benchmarks/cpu_floors.py

* the ``scan`` first stage's compiled loop (``search.kernels.video_max``, one thread): table lookups per
  second over random 32-byte codes of 690k clips, the rate the 100k index's 217 M lookups a query meet;
* a float32 GEMM of MiniLM's feed-forward shape (torch, this process's threads): GFLOP/s, and from it the
  least time MiniLM's 10.8 M non-embedding parameters need per query of 12 tokens.
Best of 5 each (the GEMM: of 50 in a row). Writes ``results/cpu_floors.json``.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import report  # noqa: E402


def best(fn, repeat: int = 5) -> float:
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    import torch

    from momentsearch.search.kernels import packed, video_max

    rng = np.random.default_rng(0)
    n = rng.integers(20, 50, 20_000)
    off = np.r_[0, np.cumsum(n)].astype(np.int64)
    m = 32
    words = packed(rng.integers(0, 256, (int(off[-1]), m), dtype=np.uint8))
    lut = rng.standard_normal((m, 256)).astype(np.float32)
    out = np.empty(len(n), np.float32)
    sec = best(lambda: video_max(words, lut, off, 0, len(n), out))
    lookups = int(off[-1]) * m
    rate = lookups / sec
    clips_100k, streams = 3_391_117, 2
    rows = [{"what": "scan loop, 1 thread", "work": f"{lookups / 1e6:.1f} M lookups", "ms": 1000 * sec,
             "rate": f"{rate / 1e9:.2f} G lookups/s",
             "floor at 100k videos": f"{1000 * clips_100k * m * streams / rate / 2:.1f} ms a query on 2 threads"}]
    a, w = torch.randn(16 * 12, 384), torch.randn(384, 1536)
    sec = best(lambda: [a @ w for _ in range(50)]) / 50  # 50 in a row: the threads stay awake, as in a forward pass
    gflops = 2 * a.shape[0] * 384 * 1536 / sec / 1e9
    rows.append({"what": f"float32 GEMM (192 x 384) @ (384 x 1536), {torch.get_num_threads()} threads",
                 "work": f"{2 * a.shape[0] * 384 * 1536 / 1e6:.0f} MFLOP", "ms": 1000 * sec,
                 "rate": f"{gflops:.0f} GFLOP/s",
                 "floor at 100k videos": f"MiniLM {2 * 10_794_624 * 12 / gflops / 1e6:.2f} ms a query of 12 tokens"})
    report("cpu_floors", rows, "python benchmarks/cpu_floors.py")


if __name__ == "__main__":
    main()
