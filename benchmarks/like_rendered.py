"""More like this (issue 73): ``search(like=(video, start, end))`` on the rendered benchmark's test videos.

    python benchmarks/like_rendered.py [--preset small] [--out runs/rendered]

The test videos of ``generate --preset P`` are rendered (64 x 64, 4 fps: ``render --only``; kept where
``speech_vision.py`` rendered them already) and ingested with a **random** tiny CLIP image tower
(``tests/clip_models.tiny_hf_clip``, the one ``speech_vision.py`` uses: no CLIP weights can be had offline), then
packed as the ``clip`` family, seen only, and indexed. Each captioned event of a test video is asked for by its
own moment (its annotated span):

* **own video first**: how often the moment's own video ranks first (its own clips give cosine 1, so a failure
  means another video holds clips as alike), and how often the top moment overlaps the asked span (tIoU >= 0.5);
* **same event elsewhere**: R@10 over the other test videos' moments of the same action on the same object (the
  event's ``(action, object)`` in the generator's metadata): the share of those moments that one of the top 10
  moments from other videos overlaps at tIoU >= 0.5, averaged over the asked moments that have any; beside it the
  same R@10 for a random ranking of the other videos' moments (analytic: 10 / candidates per query, on average).

With a random image tower, pixels that look alike embed alike but nothing semantic is learnt, so the second
row shows the mechanics, not what CLIP would find. Writes ``benchmarks/results/like_rendered.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _common import report, test_videos_and_random_clip  # noqa: E402


def tiou(a: tuple[float, float], b: tuple[float, float]) -> float:
    inter = min(a[1], b[1]) - max(a[0], b[0])
    return max(inter, 0.0) / (max(a[1], b[1]) - min(a[0], b[0]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--out", type=Path, default=Path("runs/rendered"))
    ap.add_argument("--k", type=int, default=100, help="moments asked for per query")
    args = ap.parse_args()

    import momentsearch
    from momentsearch.data.synthetic import SyntheticBenchmark, generate, load_preset
    from momentsearch.data.synthetic.render import render_benchmark
    from momentsearch.serving.indexing import build_index
    from momentsearch.serving.packing import pack
    from momentsearch.video.ingest import ingest

    out, times = args.out, {}
    bench = out / "benchmark"
    if not (bench / "benchmark.yaml").is_file():
        generate(load_preset(args.preset), bench)
    b = SyntheticBenchmark.load(bench)
    test = b.corpus.split("test")
    test_ids = sorted(test.videos)
    t = time.perf_counter()
    render_benchmark(bench, only=set(test_ids))
    times["render_s"] = time.perf_counter() - t
    test_dir, hf = test_videos_and_random_clip(out, bench, test_ids)  # the test videos and their SRTs, a random CLIP
    t = time.perf_counter()
    ingest(test_dir, out / "corpus_clip", "hf_clip", clip_seconds=2.0, fps=2.0, encoder_options={"weights": str(hf)})
    times["ingest_s"] = time.perf_counter() - t
    pack("clip", out / "seen.pt", "hf_clip", hf)
    build_index(out / "seen.pt", out / "corpus_clip", out / "index_seen", progress=False)
    s = momentsearch.load(out / "index_seen", device="cpu")

    events = {}  # (video, event id) -> (action, object, span)
    for v in test_ids:
        for e in test.videos[v].meta["events"]:
            events[(v, e["id"])] = (e["action"], e["object"], (float(e["start"]), float(e["end"])))
    asked = sorted({(m.video_id, m.meta["event"]) for m in test.moments if (m.video_id, m.meta.get("event")) in events})
    own_first = own_top = 0
    recalls, chance = [], []
    t = time.perf_counter()
    queries = [(v, *events[(v, eid)][2]) for v, eid in asked]
    for (v, eid), hits in zip(asked, s.search_many([momentsearch.Query(like=q) for q in queries], k=args.k),
                              strict=True):
        act, obj, span = events[(v, eid)]
        own_first += bool(hits) and hits[0].video_id == v
        own_top += bool(hits) and hits[0].video_id == v and tiou((hits[0].start, hits[0].end), span) >= 0.5
        same = [(w, sp) for (w, _), (a, o, sp) in events.items() if w != v and (a, o) == (act, obj)]
        if not same:
            continue
        others = [h for h in hits if h.video_id != v][:10]
        found = sum(any(h.video_id == w and tiou((h.start, h.end), sp) >= 0.5 for h in others) for w, sp in same)
        recalls.append(found / len(same))
        n_other = sum(1 for (w, _) in events if w != v)
        chance.append(min(1.0, 10 / n_other))
    times["search_s"] = time.perf_counter() - t
    n = len(asked)
    rows = [{"measure": "own video ranks first", "value %": round(100 * own_first / n, 1), "queries": n},
            {"measure": "top moment is the asked span (tIoU >= 0.5)", "value %": round(100 * own_top / n, 1),
             "queries": n},
            {"measure": "R@10 of same (action, object) moments in other videos", "value %":
             round(100 * float(np.mean(recalls)), 1), "queries": len(recalls)},
            {"measure": "  the same for a random ranking (about)", "value %": round(100 * float(np.mean(chance)), 1),
             "queries": len(recalls)}]
    print(f"times (s): { {k: round(v, 1) for k, v in times.items()} }")
    report("like_rendered", rows, f"python benchmarks/like_rendered.py --preset {args.preset}",
           extra={"test_videos": len(test_ids), "image_tower": "random tiny CLIP (mechanics, not quality)",
                  "times_s": {k: round(v, 1) for k, v in times.items()}})


if __name__ == "__main__":
    main()
