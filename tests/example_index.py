"""A clip index (a tiny random CLIP in Hugging Face's layout, tests/clip_models.py) over three ingested videos
of coloured scenes, for asking with a picture or a moment and for keeping moments as files:

* ``kitchen`` (9 s): red for 0-3 s, blue for 3-6 s, red again for 6-9 s, with a spoken line (SRT) at 3.5-5 s;
* ``garden`` (6 s): green, then a yellow and black checker board from 3 s;
* ``street`` (6 s): grey, then a blue and white stripe from 3 s.

Seen through CLIP's image tower, a scene's frames are near each other and far from the other scenes'."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np

from clip_models import tiny_hf_clip
from momentsearch.serving.indexing import build_index
from momentsearch.serving.packing import pack
from momentsearch.video.ingest import ingest

RATE, W, H = 10, 64, 48
SRT = "1\n00:00:03,500 --> 00:00:05,000\nthe blue wall is painted\n\n"


def scene(name: str, h: int = H, w: int = W) -> np.ndarray:
    """One scene's picture, (h, w, 3) uint8 (its pattern scales with the size)."""
    y, x = np.mgrid[0:h, 0:w]
    y, x = y * H // h, x * W // w
    colours = {"red": (220, 30, 30), "blue": (30, 40, 220), "green": (30, 200, 40), "grey": (128, 128, 128)}
    if name in colours:
        return np.broadcast_to(np.array(colours[name], np.uint8), (h, w, 3)).copy()
    if name == "checker":
        on = ((y // 8 + x // 8) % 2).astype(bool)
        return np.where(on[:, :, None], np.array([240, 220, 20], np.uint8), np.uint8(0)).astype(np.uint8)
    if name == "stripes":
        on = (x // 6 % 2).astype(bool)
        return np.where(on[:, :, None], np.array([30, 40, 220], np.uint8), np.uint8(255)).astype(np.uint8)
    raise KeyError(name)


SCENES = {"kitchen": ["red", "blue", "red"], "garden": ["green", "checker"], "street": ["grey", "stripes"]}


def write_scenes(path: Path, scenes: list[str], seconds_each: float = 3.0, audio: bool = False) -> Path:
    """An H.264 MP4 of the scenes in turn (a little noise on each frame); ``audio``: a 440 Hz tone beside it."""
    rng = np.random.default_rng(len(scenes))
    with av.open(str(path), "w", format="mp4") as out:
        v = out.add_stream("libx264", rate=RATE)
        v.width, v.height, v.pix_fmt = W, H, "yuv420p"
        a = out.add_stream("aac", rate=16000, layout="mono") if audio else None
        n = int(round(seconds_each * RATE))
        for i, name in enumerate(scenes):
            base = scene(name).astype(np.int16)
            for _ in range(n):
                img = np.clip(base + rng.integers(-6, 7, base.shape), 0, 255).astype(np.uint8)
                for p in v.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                    out.mux(p)
        for p in v.encode():
            out.mux(p)
        if a is not None:
            write_tone(out, a, seconds_each * len(scenes), 16000, "mono", 0.3)
    return path


def write_tone(out: av.container.OutputContainer, stream: av.audio.AudioStream, seconds: float, rate: int,
               layout: str, level: float) -> None:
    """A 440 Hz tone into an open container's audio stream, 1,024 samples a frame."""
    t = np.arange(int(rate * seconds)) / rate
    tone = np.repeat((level * np.sin(2 * np.pi * 440 * t)).astype(np.float32)[None], 2 if layout == "stereo" else 1, 0)
    for s in range(0, tone.shape[1], 1024):
        f = av.AudioFrame.from_ndarray(np.ascontiguousarray(tone[:, s: s + 1024]), format="fltp", layout=layout)
        f.sample_rate, f.pts = rate, s
        for p in stream.encode(f):
            out.mux(p)
    for p in stream.encode():
        out.mux(p)


def build_example_index(root: Path) -> Path:
    """(the index folder) over ``root/videos``; the tiny CLIP is at ``root/clip``, the corpus at ``root/corpus``."""
    hf = tiny_hf_clip(root / "clip")
    videos = root / "videos"
    videos.mkdir(parents=True)
    for name, scenes in SCENES.items():
        write_scenes(videos / f"{name}.mp4", scenes, audio=name == "kitchen")
    (videos / "kitchen.srt").write_text(SRT)
    ingest(videos, root / "corpus", "hf_clip", clip_seconds=1.0, fps=2.0, encoder_options={"weights": str(hf)},
           progress=False)
    ckpt = pack("clip", root / "clip.pt", "hf_clip", hf, speech=True)  # seen and said
    build_index(ckpt, root / "corpus", root / "index", device="cpu", progress=False)
    return root / "index"
