"""The rendered benchmark's test videos given a voice and some written words (issue 72), for
``speech_vision.py --voiced``.

Each test video is rendered again at ``size`` x ``size`` (the generator's own frames, ``render_frames``), and:

* **a voice**: eSpeak NG (``tests/voices.py``) says each of the video's subtitle lines, starting at the line's
  time or, when the last line is still being said, right after it; the lines mixed into a mono AAC track. No
  SRT is written beside the video: what is said is only in the audio. The words said are the reference for
  the word error rate.
* **written words**: during each event with probability one half (seeded per video), the event's object
  (its first name, e.g. "red car" or "teapot") is drawn in white DejaVu Sans across the frame's lower third;
  these are the reference for the character error rate.

A second folder holds the same videos with their SRT beside them (symbolic links), so "said from subtitles"
and "said from recognised speech" are measured on the same pictures and sounds.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def _draw(img: np.ndarray, text: str, font: Any) -> np.ndarray:
    from PIL import Image, ImageDraw

    im = Image.fromarray(img)
    d = ImageDraw.Draw(im)
    w = d.textlength(text, font=font)
    x = max(4, int((img.shape[1] - w) / 2))
    y = int(img.shape[0] * 0.70)
    d.text((x + 1, y + 1), text, font=font, fill=(0, 0, 0))
    d.text((x, y), text, font=font, fill=(255, 255, 255))
    return np.asarray(im)


def render_voiced(bench: Path, ids: list[str], out: Path, size: int = 256, fps: float = 4.0,
                  words_per_minute: int = 150) -> dict[str, Any]:
    """Write ``out/voiced/<id>.mp4`` (and ``out/voiced_srt/<id>.mp4`` + ``.srt`` links); returns and stores the
    references ``{"said": {id: text}, "drawn": {id: [[start, end, text], ...]}}`` in ``out/voiced_truth.json``.
    Videos already written are kept."""
    import av
    from PIL import ImageFont

    from momentsearch.data.synthetic import SyntheticBenchmark
    from momentsearch.data.synthetic.concepts import Inventory
    from momentsearch.data.synthetic.generator import World, sample_video
    from momentsearch.data.synthetic.render import Painter, render_frames, srt_text
    from momentsearch.fileio import atomic_path
    from voices import FONT, voice

    truth_path = out / "voiced_truth.json"
    truth: dict[str, Any] = json.loads(truth_path.read_text()) if truth_path.is_file() else {"said": {}, "drawn": {}}
    b = SyntheticBenchmark.load(bench)
    cfg = b.config
    inv = Inventory()
    world, painter = World(cfg, inv), Painter(inv, size)
    font = ImageFont.truetype(FONT, max(12, size // 10))
    voiced, with_srt = out / "voiced", out / "voiced_srt"
    voiced.mkdir(parents=True, exist_ok=True)
    with_srt.mkdir(parents=True, exist_ok=True)
    index = {f"syn_{i:06d}": i for i in range(cfg.n_videos)}
    for n, vid in enumerate(ids):
        video = sample_video(cfg, world, index[vid])
        rng = np.random.default_rng([cfg.seed, 72, video.index])
        drawn = [(e.start, e.end, inv.objects[inv.object_index[e.object]].forms[0])
                 for e in sorted(video.events, key=lambda e: e.start) if rng.random() < 0.5]
        target = voiced / f"{vid}.mp4"
        if not target.is_file() or vid not in truth["said"]:
            rate, track, said, free = 22050, np.zeros(int(video.duration * 22050) + 1, np.float32), [], 0
            with voice(words_per_minute) as say:  # a fresh voice per video: the same samples on every run
                for st, _, text, *_ in video.subtitles:
                    wav, rate = say(text)
                    a = max(int(st * rate), free)
                    m = min(len(wav), len(track) - a)
                    if m <= 0:
                        continue
                    track[a:a + m] += wav[:m].astype(np.float32) / 32768.0
                    said.append(text if m == len(wav) else "")  # a line cut by the video's end is not counted
                    free = a + m + int(0.3 * rate)
            with atomic_path(target) as tmp, av.open(str(tmp), "w", format="mp4") as box:
                vs = box.add_stream("libx264", rate=int(fps))
                vs.width = vs.height = size
                vs.pix_fmt, vs.options = "yuv420p", {"preset": "ultrafast", "crf": "20"}
                aus = box.add_stream("aac", rate=rate)
                aus.layout = "mono"
                for f, img in enumerate(render_frames(cfg, painter, video, fps)):
                    t = (f + 0.5) / fps
                    for a, e, text in drawn:
                        if a <= t < e:
                            img = _draw(img, text, font)
                            break
                    for p in vs.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                        box.mux(p)
                for p in vs.encode():
                    box.mux(p)
                for i in range(0, len(track), 1024):
                    fr = av.AudioFrame.from_ndarray(np.clip(track[None, i:i + 1024], -1, 1), format="fltp",
                                                    layout="mono")
                    fr.sample_rate, fr.pts = rate, i
                    for p in aus.encode(fr):
                        box.mux(p)
                for p in aus.encode():
                    box.mux(p)
            truth["said"][vid] = " ".join(s for s in said if s)
            truth["drawn"][vid] = [[round(a, 2), round(min(e, video.duration), 2), text]
                                   for a, e, text in drawn if len(set(_shown(a, e, fps))) > 0]
        if not (with_srt / f"{vid}.mp4").exists():
            (with_srt / f"{vid}.mp4").symlink_to(target.resolve())
        if video.subtitles:  # the generator's subtitles, as render_benchmark writes them
            (with_srt / f"{vid}.srt").write_text(srt_text(video.subtitles), encoding="utf-8")
        if n % 10 == 9:
            truth_path.write_text(json.dumps(truth))
            print(f"  voiced {n + 1}/{len(ids)} videos", flush=True)
    truth_path.write_text(json.dumps(truth))
    return truth


def _shown(a: float, e: float, fps: float) -> list[int]:
    """The frames on which a word drawn from a to e s is seen."""
    return [f for f in range(int(a * fps), int(math.ceil(e * fps)) + 1) if a <= (f + 0.5) / fps < e]


def edit_distance(a: list[str] | str, b: list[str] | str) -> int:
    d = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        prev, d[0] = d[:], i
        for j in range(1, len(b) + 1):
            d[j] = min(prev[j] + 1, d[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
    return d[len(b)]


def _words(text: str) -> list[str]:
    return "".join(c.lower() if c.isalnum() or c == "'" else " " for c in text).split()


def word_error_rate(truth: dict[str, str], heard: dict[str, str]) -> dict[str, float]:
    """Corpus WER: edits over reference words, summed over the videos (lower case, punctuation dropped)."""
    edits = ref = 0
    for vid, text in truth.items():
        r = _words(text)
        edits += edit_distance(r, _words(heard.get(vid, "")))
        ref += len(r)
    return {"wer": round(edits / max(ref, 1), 4), "reference_words": ref, "videos": len(truth)}


def character_error_rate(drawn: dict[str, list[list[Any]]], read: dict[str, list[tuple[float, float, str]]]
                         ) -> dict[str, float]:
    """Per drawn word: the closest written cue overlapping its time (edit distance over its characters, lower
    case, spaces dropped), 1.0 when none overlaps; CER = edits / characters summed; found = share with a cue."""
    edits = chars = found = n = 0
    for vid, items in drawn.items():
        cues = read.get(vid, [])
        for a, e, text in items:
            ref = "".join(text.lower().split())
            cands = ["".join(c[2].lower().split()) for c in cues if min(e, c[1]) > max(a, c[0])]
            best = min((edit_distance(ref, c) for c in cands), default=len(ref))
            best = min(best, len(ref))
            edits, chars, n, found = edits + best, chars + len(ref), n + 1, found + bool(cands)
    return {"cer": round(edits / max(chars, 1), 4), "drawn_words": n, "found_share": round(found / max(n, 1), 4)}
