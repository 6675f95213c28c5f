"""The scan's approximate pass alone, 8-bit against 7-bit codes, on the 100k corpus of ``first_stage_scale.py``.

    python benchmarks/scan_bits.py [--work /tmp/fs_scale] [--videos 100000] [--repeats 15]

Both stages are built (or loaded) from ``first_stage_scale.py``'s folder: 32 sub-quantizers a stream, one pass
(``coarse=0``), ``bits=8`` (256 centroids: two ``vpermi2b`` and a blend for 64 look-ups) and ``bits=7`` (128
centroids: one ``vpermi2b``). Per batch size, the pass over every clip (``loops.approximate``: tables quantized,
the compiled scan on the stage's threads, no re-score) is timed ``--repeats`` times, the two codes interleaved,
over random unit queries. Beside it, what the pass reads and computes: the bytes of codes (read once a batch)
over the bandwidth of one NumPy sum measured in the same run (two threads read faster: not a floor at batch 1),
and the look-ups a query (clips x streams x 32).
Writes ``results/scan_bits.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

import momentsearch  # noqa: F401  (first: its OpenMP default applies before torch loads)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, report  # noqa: E402
from _scale_data import checkpoint, encoded  # noqa: E402
from first_stage_scale import bandwidth_gib_s  # noqa: E402
from momentsearch.models.xml.search import xml_stages  # noqa: E402
from momentsearch.search.first_stage import build_first_stage  # noqa: E402
from momentsearch.serving.checkpoint import load_checkpoint  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", type=Path, default=Path("/tmp/fs_scale"))
    ap.add_argument("--videos", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--batches", default="1,4,16,64")
    args = ap.parse_args()
    torch.set_num_threads(2)
    model = load_checkpoint(checkpoint(args.work, None)).model.eval()
    _, index = encoded(args.work, args.videos, model, mmap=False, copies=1, noise=0.3)
    xml = xml_stages(model, index)
    folder = args.work / f"first_stage_{args.videos}"
    stages = {bits: build_first_stage(xml.retriever, index, "scan", folder, {"coarse": "0", "bits": str(bits)},
                                      family="xml", progress=True) for bits in (8, 7)}
    rng = np.random.default_rng(0)
    batches = [int(b) for b in args.batches.split(",")]
    q = rng.normal(size=(max(batches), stages[8].codebooks.shape[0], index.arrays["h1"].shape[-1]))
    q = (q / np.linalg.norm(q, axis=-1, keepdims=True)).astype(np.float32)
    n_clips, streams = int(index.offsets[-1]), stages[8].codebooks.shape[0]
    lookups = n_clips * streams * stages[8].codebooks.shape[1]
    code_bytes = stages[8].loops.nbytes
    bw = bandwidth_gib_s()
    times: dict[tuple[int, int], list[float]] = {}
    for b in batches:
        for bits, st in stages.items():  # a warm-up each
            st.loops.approximate(st.luts(q[:b]))
        for _ in range(args.repeats):
            for bits, st in stages.items():
                luts = st.luts(q[:b])
                t = time.perf_counter()
                st.loops.approximate(luts)
                times.setdefault((b, bits), []).append(1000 * (time.perf_counter() - t) / b)
    rows = []
    for (b, bits), ms in sorted(times.items()):
        med = float(np.median(ms))
        rows.append({"batch": b, "bits": bits, "ms/query (median)": med, "ms/query (best)": float(min(ms)),
                     "G look-ups/s (both cores)": lookups / med / 1e6,
                     "codes read once a batch, over one NumPy sum's bandwidth (ms/query)": code_bytes / b / (bw * 2**30) * 1000,
                     "speed-up of 7 bits": float(np.median(times[(b, 8)]) / med) if bits == 7 else "-"})
    report("scan_bits", rows, command_line(), extra={"videos": len(index), "clips": n_clips, "look-ups/query": lookups,
                                     "code bytes": code_bytes, "bandwidth GiB/s": bw, "repeats": args.repeats,
                                     "threads": stages[8].threads})


if __name__ == "__main__":
    main()
