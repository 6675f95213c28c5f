"""XML on pixels against XML on the benchmark's own features: the whole own-videos path, measured.

    python benchmarks/rendered_xml.py [--preset small] [--out runs/rendered] [--seeds 0]

1. ``generate --preset P`` and render every video (``--render``: 64 x 64, 4 fps, H.264, with SRT subtitles);
2. ``ingest`` the videos with the ``builtin`` encoder (2 s clips, 2 fps: the benchmark's grid);
3. train XML (``configs/xml/small.yaml``) on the benchmark's annotations twice: with the ingested
   features (``dataset: {benchmark, corpus}``) and with the benchmark's own features;
4. evaluate both on the test split, and ``index`` + ``search`` the test videos with the pixel model.

Prints a table (VR and VCMR recall beside random) and writes ``benchmarks/results/rendered_xml.json``.
Every step resumes: rendered videos, the corpus and the training runs are kept.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import render_and_ingest  # noqa: E402
from _common import report as print_report

COLUMNS = ("VR r1", "VR r10", "VR r100", "VCMR 0.5-r1", "VCMR 0.5-r10", "VCMR 0.5-r100", "VCMR 0.7-r1", "SVMR 0.5-r1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--out", type=Path, default=Path("runs/rendered"))
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--epochs", type=int, default=None)
    args = ap.parse_args()

    import momentsearch
    from momentsearch.data.corpus_folder import CorpusFolder
    from momentsearch.data.synthetic import SyntheticBenchmark
    from momentsearch.serving.indexing import build_index

    times: dict[str, float] = {}
    bench, corpus, report = render_and_ingest(args.preset, args.out, times)
    print(report.summary())
    rows, runs = {}, {}
    for seed in [int(s) for s in args.seeds.split(",")]:
        for name, dataset in (("XML on pixels (builtin encoder)", {"benchmark": str(bench), "corpus": str(corpus)}),
                              ("XML on the benchmark's features", {"benchmark": str(bench)})):
            tag = "pixels" if "pixels" in name else "features"
            over = {"dataset": dataset, "seed": seed, "out_dir": str(args.out / f"xml_{tag}_s{seed}")}
            if args.epochs:
                over["epochs"] = args.epochs
            t = time.perf_counter()
            trainer = momentsearch.train("configs/xml/small.yaml", over)
            ckpt = trainer.ckpt_dir / "best.pt"
            ev = momentsearch.evaluate(ckpt, "test", args.out / f"eval_{tag}_s{seed}", progress=False)
            times[f"train+eval {tag} s{seed}"] = time.perf_counter() - t
            rows[f"{name}, seed {seed}"] = {c: ev.row.get(c) for c in COLUMNS}
            runs[tag] = ckpt
    folder = CorpusFolder.open(corpus)
    n_test = len(SyntheticBenchmark.load(bench).corpus.split("test").videos)
    rows["random (VR, analytic)"] = {"VR r1": 100 / n_test, "VR r10": 1000 / n_test, "VR r100": min(100.0, 10000 / n_test)}
    build_index(runs["pixels"], corpus, args.out / "index", progress=False)
    hits = momentsearch.load(args.out / "index").search("a person opens the fridge", k=3)
    table = [{"model": name, **{c: (round(row[c], 2) if row.get(c) is not None else "") for c in COLUMNS}}
             for name, row in rows.items()]
    print(report.summary())
    print(f"times (s): { {k: round(v, 1) for k, v in times.items()} }")
    print("search over the index of all", len(folder.video_ids), "videos:",
          [(h.video_id, round(h.start, 1), round(h.end, 1)) for h in hits])
    print_report("rendered_xml", table, f"python benchmarks/rendered_xml.py --preset {args.preset} --seeds {args.seeds}")

if __name__ == "__main__":
    main()
