"""What is said, what is seen, both, and a trained XML, on the rendered benchmark: one table (issue 40).

    python benchmarks/speech_vision.py [--preset small] [--out runs/rendered]

1. ``generate --preset P`` and render every video (64 x 64, 4 fps, H.264, with the generator's subtitles as SRT);
2. ``ingest`` the videos with the ``builtin`` encoder (2 s clips, 2 fps): each video's SRT becomes its stored
   transcript and its subtitle stream (MiniLM);
3. the test videos again with a **random** tiny CLIP image tower (``tests/clip_models.tiny_hf_clip``): no CLIP
   weights can be had offline, so the seen and fused rows only show the mechanics, not what CLIP would find;
4. pack the training-free family three ways (said: ``pack clip --speech``; seen: ``--encoder hf_clip``; fused:
   both), train XML on the builtin features of the train split (``configs/xml/small.yaml``, seed 0; resumed
   from ``OUT/xml_pixels_s0`` where ``rendered_xml.py`` left it), index each over its corpus;
5. search every test query over the test videos (the same path a user's ``search`` takes: filter to the test
   videos, 100 moments) and score VR (each video's first place in the moment list) and VCMR with the
   project's recall (``evaluation.recall``).

Writes ``benchmarks/results/speech_vision.json``. Every step resumes (renders, corpora, runs, indexes).

    python benchmarks/speech_vision.py --voiced [--voiced-videos N]

(issue 72) then also gives the test videos a voice and some written words (``benchmarks/_voiced.py``: eSpeak NG
says each subtitle line into the audio track, no SRT; an event's object is drawn in its frames), renders them at
256 x 256, and ingests them twice with the same random CLIP: once with ``--speech pocketsphinx --read-text`` and
no SRT, once with the SRTs beside them. It reports PocketSphinx's word error rate against what was said, the
text reader's character error rate against what was drawn, and the retrieval rows said (subtitles), said
(recognised), written, said + written, seen, and all three, over those videos; into
``benchmarks/results/speech_vision_voiced.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _common import render_and_ingest, test_videos_and_random_clip  # noqa: E402
from _common import report as print_report

COLUMNS = ("VR r1", "VR r10", "VCMR 0.5-r1", "VCMR 0.5-r10", "VCMR 0.5-r100", "VCMR 0.7-r1")


def _score(searcher, corpus, test_ids: list[str]) -> dict[str, float]:
    import numpy as np

    from momentsearch.evaluation.recall import evaluate_ranked
    from momentsearch.search.ranked import RankedMoments

    moments = [m for m in corpus.moments if m.has_ground_truth]
    hits = searcher.search_many([m.text for m in moments], k=100, videos=test_ids)
    ids = searcher.video_ids
    row = {v: i for i, v in enumerate(ids)}
    qids = [m.query_id for m in moments]
    vcmr = RankedMoments.from_lists(qids, ids, [[(row[h.video_id], h.start, h.end, h.score) for h in hs] for hs in hits])
    first = []
    for hs in hits:  # VR: the videos in the order of their first moment
        seen: dict[str, None] = {}
        for h in hs:
            seen.setdefault(h.video_id, None)
        first.append([(row[v], 0.0, 0.0, 1.0) for v in seen])
    vr = RankedMoments.from_lists(qids, ids, first)
    got = evaluate_ranked(vcmr, corpus, tasks=("VCMR",))["VCMR"]
    got_vr = evaluate_ranked(vr, corpus, tasks=("VR",))["VR"]
    out = {"VR r1": got_vr["r1"], "VR r10": got_vr["r10"]}
    for thr in ("0.5", "0.7"):
        for k in (1, 10, 100):
            out[f"VCMR {thr}-r{k}"] = got[f"{thr}-r{k}"]
    return {c: round(float(np.asarray(out[c])), 2) for c in COLUMNS}


def main() -> None:  # noqa: C901
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="small")
    ap.add_argument("--out", type=Path, default=Path("runs/rendered"))
    ap.add_argument("--voiced", action="store_true", help="also the voiced, written-on test videos (issue 72)")
    ap.add_argument("--voiced-videos", type=int, default=0, help="only the first N test videos (0: all)")
    ap.add_argument("--voiced-only", action="store_true", help="only the voiced rows; the XML row read from "
                    "results/speech_vision.json (the table above, as stored)")
    args = ap.parse_args()
    if args.voiced_only:
        return _voiced_only(args)

    import momentsearch
    from momentsearch.data.synthetic import SyntheticBenchmark
    from momentsearch.serving.indexing import build_index
    from momentsearch.serving.packing import pack
    from momentsearch.video.ingest import ingest

    out = args.out
    times: dict[str, float] = {}
    bench, corpus, report = render_and_ingest(args.preset, out, times)
    print(report.summary().splitlines()[0])
    b = SyntheticBenchmark.load(bench)
    test = b.corpus.split("test")
    test_ids = sorted(test.videos)
    test_dir, hf = test_videos_and_random_clip(out, bench, test_ids)  # the test videos and their SRTs, a random CLIP
    t = time.perf_counter()
    ingest(test_dir, out / "corpus_clip", "hf_clip", clip_seconds=2.0, fps=2.0, encoder_options={"weights": str(hf)})
    times["ingest_random_clip_s"] = time.perf_counter() - t
    models = {"said": (out / "said.pt", corpus), "seen": (out / "seen.pt", out / "corpus_clip"),
              "fused": (out / "fused.pt", out / "corpus_clip")}
    pack("clip", models["said"][0], speech=True)
    pack("clip", models["seen"][0], "hf_clip", hf)
    pack("clip", models["fused"][0], "hf_clip", hf, speech=True)
    xml = out / "xml_pixels_s0" / "checkpoints" / "best.pt"
    if not xml.is_file():
        t = time.perf_counter()
        momentsearch.train("configs/xml/small.yaml", {"dataset": {"benchmark": str(bench), "corpus": str(corpus)},
                                                      "seed": 0, "out_dir": str(out / "xml_pixels_s0")})
        times["train_xml_s"] = time.perf_counter() - t
    models["xml"] = (xml, corpus)
    names = {"said": "training-free, what is said only (MiniLM over the SRT cues, offline)",
             "seen": "training-free, what is seen only (a RANDOM tiny CLIP: mechanics, not quality)",
             "fused": "training-free, seen + said (the same random CLIP + MiniLM)",
             "xml": "XML trained on the train split's pixels (builtin encoder, seed 0)"}
    rows = []
    for key, (ckpt, c) in models.items():
        t = time.perf_counter()
        build_index(ckpt, c, out / f"index_{key}", progress=False)
        searcher = momentsearch.load(out / f"index_{key}")
        rows.append({"model": names[key], **_score(searcher, test, test_ids)})
        times[f"index+search {key} s"] = time.perf_counter() - t
    n = len(test_ids)
    rows.append({"model": "random (VR, analytic)", "VR r1": round(100 / n, 2), "VR r10": round(min(100.0, 1000 / n), 2),
                 **{c: "" for c in COLUMNS[2:]}})
    said = sum(1 for v in test_ids if (bench / "videos" / f"{v}.srt").is_file())
    print(f"times (s): { {k: round(v, 1) for k, v in times.items()} }")
    print_report("speech_vision", rows, f"python benchmarks/speech_vision.py --preset {args.preset}",
                 extra={"test_videos": n, "test_videos_with_srt": said, "queries": len(test.moments),
                        "times_s": {k: round(v, 1) for k, v in times.items()}})
    if args.voiced:
        _voiced_rows(args, bench, test, test_ids, hf, rows[-2])


def _voiced_only(args) -> None:
    import json

    from clip_models import tiny_hf_clip
    from momentsearch.data.synthetic import SyntheticBenchmark, generate, load_preset

    bench = args.out / "benchmark"
    if not (bench / "benchmark.yaml").is_file():
        generate(load_preset(args.preset), bench)
    test = SyntheticBenchmark.load(bench).corpus.split("test")
    hf = args.out / "random_clip"
    if not (hf / "config.json").is_file():
        tiny_hf_clip(hf, projection_dim=64)
    stored = json.loads((Path(__file__).parent / "results" / "speech_vision.json").read_text())["rows"]
    _voiced_rows(args, bench, test, sorted(test.videos), hf, next(r for r in stored if r["model"].startswith("XML")))


def _voiced_rows(args, bench: Path, test, test_ids: list[str], hf: Path, xml_row: dict) -> None:
    import momentsearch
    from _voiced import character_error_rate, render_voiced, word_error_rate
    from momentsearch.data.corpus_folder import CorpusFolder
    from momentsearch.serving.indexing import build_index
    from momentsearch.serving.packing import pack
    from momentsearch.video.ingest import ingest

    out = args.out
    ids = test_ids[: args.voiced_videos] if args.voiced_videos else test_ids
    keep = set(ids)
    sub = test.with_moments([m for m in test.moments if m.video_id in keep])
    times: dict[str, float] = {}
    t = time.perf_counter()
    truth = render_voiced(bench, ids, out)
    times["render_voiced_s"] = time.perf_counter() - t
    clip = {"encoder_options": {"weights": str(hf)}, "clip_seconds": 2.0, "fps": 2.0}
    corpora = {"heard": out / "corpus_voiced", "srt": out / "corpus_voiced_srt"}
    t = time.perf_counter()
    ingest(out / "voiced", corpora["heard"], "hf_clip", speech="pocketsphinx", read_text=True, **clip)
    times["ingest_heard_read_s"] = time.perf_counter() - t
    t = time.perf_counter()
    ingest(out / "voiced_srt", corpora["srt"], "hf_clip", **clip)
    times["ingest_srt_s"] = time.perf_counter() - t
    c = CorpusFolder.open(corpora["heard"])
    heard = {v: " ".join(x.text for x in c.transcript(v)) for v in ids}
    read = {v: [(x.start, x.end, x.text) for x in c.written(v)] for v in ids}
    wer = word_error_rate({v: truth["said"][v] for v in ids}, heard)
    cer = character_error_rate({v: truth["drawn"][v] for v in ids}, read)
    print(f"PocketSphinx WER {wer}; text reader CER {cer}")
    packs = {"said": dict(speech=True), "written": dict(written=True), "said_written": dict(speech=True, written=True),
             "seen": dict(encoder="hf_clip", encoder_weights=hf),
             "all": dict(encoder="hf_clip", encoder_weights=hf, speech=True, written=True)}
    for name, kw in packs.items():
        pack("clip", out / f"voiced_{name}.pt", **kw)
    plan = [("said from subtitles (SRT beside the video)", "said", "srt"),
            ("said from recognised speech (PocketSphinx, no SRT)", "said", "heard"),
            ("written (text read on screen)", "written", "heard"),
            ("said (recognised) + written", "said_written", "heard"),
            ("seen (a RANDOM tiny CLIP: mechanics, not quality)", "seen", "heard"),
            ("seen + said (recognised) + written", "all", "heard")]
    rows = []
    for label, model, corpus in plan:
        t = time.perf_counter()
        folder = out / f"index_voiced_{model}_{corpus}"
        build_index(out / f"voiced_{model}.pt", corpora[corpus], folder, progress=False)
        rows.append({"model": label, **_score(momentsearch.load(folder), sub, ids)})
        times[f"index+search {model}/{corpus} s"] = time.perf_counter() - t
    rows.append({**xml_row, "model": xml_row["model"] + " (the 64 x 64 renders, all test videos)"})
    print_report("speech_vision_voiced", rows,
                 f"python benchmarks/speech_vision.py --preset {args.preset} --voiced"
                 + (f" --voiced-videos {args.voiced_videos}" if args.voiced_videos else ""),
                 extra={"videos": len(ids), "queries": len(sub.moments), "speech_wer": wer, "text_cer": cer,
                        "times_s": {k: round(v, 1) for k, v in times.items()},
                        "example": {v: {"said": truth["said"][v][:300], "heard": heard[v][:300],
                                        "drawn": truth["drawn"][v][:6], "read": read[v][:6]} for v in ids[:3]}})


if __name__ == "__main__":
    main()
