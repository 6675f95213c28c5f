"""This machine's floors for the parts of a served query (docs/query_cost.md): measured, not assumed.

    python benchmarks/cpu_floors.py

* the ``scan`` first stage's compiled loop (``search.kernels.video_max``, one thread): table lookups per
  second over random 32-byte codes of 690k clips, the rate the 100k index's 217 M lookups a query meet;
* the compiled byte-table scan (``search.fastscan.video_max_u8``, one thread, AVX-512 VBMI): look-ups per
  second with the codes in cache (a batch of 16 over 64k clips: the compute floor) and streamed from memory
  (batch 1 over 3.4 M clips: what the memory gives);
* memory bandwidth: the best of 5 sums over a 2 GiB array (one thread: numpy's sum is serial);
* a float32 GEMM of MiniLM's feed-forward shape (torch, this process's threads): GFLOP/s, and from it the
  least time MiniLM's 10.8 M non-embedding parameters need per query of 12 tokens;
* the alternative to a scan of codes for a batch: a matrix product of the batch's query vectors with every
  clip (16 x 256 by 256 x 262,144) in float32, bfloat16 and int8 (``torch._int_mm``, batch 64), and from each
  the least time per query at 100k videos (3.39 M clips, 2 streams of d = 128).
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
    from momentsearch.search import fastscan

    hot = fastscan.pack_blocks(rng.integers(0, 256, (65_536, m), dtype=np.uint8))
    hot_off = np.arange(0, 65_537, 32, dtype=np.int64)
    tables = rng.integers(0, 256, (16, m, 256), dtype=np.uint8)
    hot_out = np.zeros((16, len(hot_off) - 1), np.uint16)
    sec = best(lambda: fastscan.video_max_u8(hot, tables, hot_off, 0, len(hot_off) - 1, hot_out))
    rate_hot = 65_536 * m * 16 / sec
    rows.append({"what": "byte-table scan (compiled), 1 thread, codes in cache, batch 16",
                 "work": f"{65_536 * m * 16 / 1e6:.1f} M lookups", "ms": 1000 * sec,
                 "rate": f"{rate_hot / 1e9:.2f} G lookups/s",
                 "floor at 100k videos": f"{1000 * clips_100k * m * streams / rate_hot / 2:.1f} ms a query on 2 threads"})
    n_cold = rng.integers(20, 50, 100_000)
    off_cold = np.r_[0, np.cumsum(n_cold)].astype(np.int64)
    cold = fastscan.pack_blocks(rng.integers(0, 256, (int(off_cold[-1]), m), dtype=np.uint8))
    cold_out = np.zeros((1, len(n_cold)), np.uint16)
    sec = best(lambda: fastscan.video_max_u8(cold, tables[:1], off_cold, 0, len(n_cold), cold_out))
    rows.append({"what": "byte-table scan (compiled), 1 thread, codes from memory, batch 1",
                 "work": f"{cold.nbytes / 1e6:.0f} MB of codes", "ms": 1000 * sec,
                 "rate": f"{cold.nbytes / sec / 2**30:.1f} GiB/s, {off_cold[-1] * m / sec / 1e9:.2f} G lookups/s",
                 "floor at 100k videos": f"{1000 * clips_100k * m * streams / (off_cold[-1] * m / sec):.1f} ms a query"})
    big = np.ones(2**31 // 8, np.float64)
    sec = best(lambda: big.sum())
    rows.append({"what": "memory bandwidth (sum of a 2 GiB array, 1 thread)", "work": "2 GiB", "ms": 1000 * sec,
                 "rate": f"{2 / sec:.1f} GiB/s",
                 "floor at 100k videos": f"{1000 * clips_100k * m * streams / 2**30 / (2 / sec):.1f} ms to read the "
                                         "32-byte codes once"})
    big = cold = None  # noqa: F841 - the 2 GiB go before the matrix products
    torch.set_num_threads(2)
    for name, dtype, b in (("float32", torch.float32, 16), ("bfloat16", torch.bfloat16, 16), ("int8", torch.int8, 64)):
        if dtype == torch.int8:
            x, y = (torch.randint(-128, 127, (b, 256), dtype=dtype), torch.randint(-128, 127, (256, 262_144), dtype=dtype))
            fn = lambda: torch._int_mm(x, y)  # noqa: E731
        else:
            x, y = torch.randn(b, 256).to(dtype), torch.randn(256, 262_144).to(dtype)
            fn = lambda: x @ y  # noqa: E731
        sec = best(fn)
        ops = 2 * b * 256 * 262_144
        rows.append({"what": f"{name} matrix product ({b} x 256) @ (256 x 262,144), 2 threads",
                     "work": f"{ops / 1e9:.2f} G{'OP' if dtype == torch.int8 else 'FLOP'}", "ms": 1000 * sec,
                     "rate": f"{ops / sec / 1e9:.0f} G{'OP' if dtype == torch.int8 else 'FLOP'}/s",
                     "floor at 100k videos": f"{1000 * 2 * clips_100k * 256 / (ops / sec):.1f} ms a query "
                                             f"(every clip's exact score, batch {b})"})
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
