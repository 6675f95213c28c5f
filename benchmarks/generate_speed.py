"""Time and size of generating the synthetic presets.

    python benchmarks/generate_speed.py [--presets tiny,default,large] [--keep DIR]

For each preset: seconds to generate (sampling, features, all files), videos/s, queries, events,
bytes on disk (features and annotations), and the seconds to load the corpus back and to build
the oracle's relevance table (relevance >= 1.0) for the test split.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, peak_rss_mib, report  # noqa: E402
from momentsearch.data.synthetic import SyntheticBenchmark, generate, load_preset  # noqa: E402


def size_mib(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--presets", default="tiny,default")
    ap.add_argument("--keep", type=Path, default=None, help="write the benchmarks here instead of a temp dir")
    args = ap.parse_args()
    rows = []
    for preset in args.presets.split(","):
        cfg = load_preset(preset)
        base = args.keep or Path(tempfile.mkdtemp())
        root = base / preset
        if root.exists():
            shutil.rmtree(root)
        t = time.perf_counter()
        generate(cfg, root, progress=True)
        gen = time.perf_counter() - t
        t = time.perf_counter()
        bench = SyntheticBenchmark.load(root)
        load = time.perf_counter() - t
        t = time.perf_counter()
        table = bench.oracle("test").moment_relevance(min_relevance=1.0)
        oracle = time.perf_counter() - t
        stats = bench.corpus.stats()
        rows.append({
            "preset": preset, "videos": cfg.n_videos, "queries": stats["n_queries"],
            "events": sum(len(v.meta["events"]) for v in bench.corpus.videos.values()),
            "generate_s": gen, "videos/s": cfg.n_videos / gen,
            "features_MiB": size_mib(root / "features"), "annotations_MiB": size_mib(root) - size_mib(root / "features"),
            "load_s": load, "oracle_test_s": oracle,
            "exact_relevant_per_query": table.nnz / max(1, len(table)),
            "peak_rss_MiB": peak_rss_mib(),
        })
        if args.keep is None:
            shutil.rmtree(base)
    report("generate_speed", rows, command_line())


if __name__ == "__main__":
    main()
