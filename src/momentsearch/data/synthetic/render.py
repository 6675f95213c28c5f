"""Rendered synthetic videos: each benchmark video as a real video file, with the same events, captions
and oracle, so that the whole path (decode -> visual encoder -> model -> search) is tested on pixels.

Every concept has a visual signature:

* **scene**: the background, a vertical gradient between two colours of the scene's own hues;
* **subject**: a bar along the bottom edge in the subject's colour;
* **object**: a shape (disc, square, triangle, ring, cross, diamond, horizontal or vertical bar) in
  one of 10 colours; the 75 objects are 75 distinct (shape, colour) pairs;
* **action**: a motion (left to right, right to left, up, down, circling, pulsing) and a texture on
  the object (solid, horizontal or vertical stripes, checks, dots, diagonal stripes, blinking,
  speckle); the 44 actions are 44 distinct (motion, texture) pairs;
* **adjective**: an outline around the object in the adjective's colour.

An event draws its object, moving and textured as its action says, over its span; overlapping
events use the upper and lower halves. A distractor flashes one concept alone (an action on a grey
square, or an object standing still). Pixel noise follows the preset's ``noise``. Subtitles are
written beside each video as SRT (same stem). Frames are ``size`` x ``size`` at ``fps``, H.264 in MP4.
Deterministic: video i renders the same pixels whatever else is rendered.
"""

from __future__ import annotations

import colorsys
import math
from pathlib import Path

import numpy as np
from tqdm import tqdm

from momentsearch.data.synthetic.concepts import Inventory
from momentsearch.data.synthetic.config import SyntheticConfig
from momentsearch.data.synthetic.generator import SyntheticVideo, World, sample_video
from momentsearch.errors import MomentSearchError
from momentsearch.fileio import atomic_path, make_folder

SHAPES = ("disc", "square", "triangle", "ring", "cross", "diamond", "hbar", "vbar")
MOTIONS = ("right", "left", "up", "down", "circle", "pulse")
TEXTURES = ("solid", "hstripes", "vstripes", "checks", "dots", "diagonal", "blink", "speckle")
_RENDER = 7  # rng stream of the renderer's noise


def _rgb(h: float, s: float = 1.0, v: float = 1.0) -> np.ndarray:
    return np.array(colorsys.hsv_to_rgb(h % 1.0, s, v), np.float32) * 255


def shape_mask(shape: str, n: int) -> np.ndarray:
    """(n, n) bool mask of a shape."""
    y, x = (np.mgrid[0:n, 0:n] + 0.5) / n * 2 - 1
    r = np.sqrt(x ** 2 + y ** 2)
    return {
        "disc": r <= 0.95, "square": (abs(x) <= 0.8) & (abs(y) <= 0.8), "triangle": (y >= -0.9) & (abs(x) <= (y + 0.9) / 2),
        "ring": (r <= 0.95) & (r >= 0.55), "cross": ((abs(x) <= 0.3) | (abs(y) <= 0.3)) & (abs(x) <= 0.95) & (abs(y) <= 0.95),
        "diamond": abs(x) + abs(y) <= 0.95, "hbar": (abs(y) <= 0.35) & (abs(x) <= 0.95),
        "vbar": (abs(x) <= 0.35) & (abs(y) <= 0.95),
    }[shape]


def texture(kind: str, n: int, frame: int, seed: int) -> np.ndarray:
    """(n, n) brightness multipliers in [0.25, 1] of a texture at a frame."""
    y, x = np.mgrid[0:n, 0:n]
    t = {
        "solid": np.ones((n, n)), "hstripes": (y // 2) % 2, "vstripes": (x // 2) % 2, "checks": ((x // 3) + (y // 3)) % 2,
        "dots": ((x % 4) < 2) & ((y % 4) < 2), "diagonal": ((x + y) // 2) % 2,
        "blink": np.full((n, n), frame % 2), "speckle": np.random.default_rng(seed).random((n, n)) > 0.5,
    }[kind]
    return 0.25 + 0.75 * np.asarray(t, np.float32)


class Painter:
    """Signatures of one inventory, on a ``size`` x ``size`` canvas."""

    def __init__(self, inventory: Inventory, size: int = 64):
        self.inv, self.size = inventory, size
        self.obj = [(SHAPES[i % 8], _rgb((i // 8) / 10)) for i in range(len(inventory.objects))]
        self.act = [(MOTIONS[i % 6], TEXTURES[i // 6]) for i in range(len(inventory.actions))]
        self.adj = [_rgb(i / 12 + 0.04, 0.6, 1.0) for i in range(len(inventory.adjectives))]
        self.scene = {s.id: (_rgb(i / 12, 0.5, 0.55), _rgb(i / 12 + 0.33, 0.5, 0.3)) for i, s in enumerate(inventory.scenes)}
        self.subject = {s.id: _rgb(i / 3 + 0.1, 0.8, 0.9) for i, s in enumerate(inventory.subjects)}
        self.side = max(8, size * 5 // 16)

    def background(self, video: SyntheticVideo, style: np.ndarray) -> np.ndarray:
        top, bottom = self.scene[video.scene]
        w = np.linspace(0, 1, self.size, dtype=np.float32)[:, None, None]
        bg = (1 - w) * top + w * bottom + style
        bg = np.repeat(bg, self.size, axis=1)
        bg[-max(2, self.size // 16):] = self.subject[video.subject]
        return bg

    def place(self, canvas: np.ndarray, shape: str, colour: np.ndarray, tex: np.ndarray, outline: np.ndarray | None,
              cx: float, cy: float, scale: float) -> None:
        n = max(4, int(self.side * scale))
        mask = shape_mask(shape, n)
        idx = (np.arange(n) * tex.shape[0] // n)
        fill = colour[None, None, :] * tex[np.ix_(idx, idx)][:, :, None]
        x0, y0 = int(round(cx - n / 2)), int(round(cy - n / 2))
        xs, ys = slice(max(0, x0), min(self.size, x0 + n)), slice(max(0, y0), min(self.size, y0 + n))
        sub = (slice(ys.start - y0, ys.stop - y0), slice(xs.start - x0, xs.stop - x0))
        region = canvas[ys, xs]
        if outline is not None:
            grown = np.zeros_like(mask)
            grown[1:-1, 1:-1] = mask[:-2, 1:-1] | mask[2:, 1:-1] | mask[1:-1, :-2] | mask[1:-1, 2:]
            ring = (grown | mask)[sub] & ~mask[sub]
            region[ring] = outline
        region[mask[sub]] = fill[sub][mask[sub]]

    def position(self, motion: str, p: float, t: float, lane: int) -> tuple[float, float, float]:
        """(cx, cy, scale) of an action's motion at progress p in [0, 1] and time t seconds."""
        s, m = self.size, self.side / 2 + 1
        cy = s * (0.3 if lane == 0 else 0.62)
        cx = s * (0.3 if lane == 0 else 0.7)
        if motion == "right":
            return m + p * (s - 2 * m), cy, 1.0
        if motion == "left":
            return s - m - p * (s - 2 * m), cy, 1.0
        if motion == "up":
            return cx, s - m - p * (s - 2 * m), 1.0
        if motion == "down":
            return cx, m + p * (s - 2 * m), 1.0
        if motion == "circle":
            a = 2 * math.pi * t / 2.0
            return s / 2 + s * 0.22 * math.cos(a), s / 2 + s * 0.22 * math.sin(a), 1.0
        return s / 2, cy, 0.75 + 0.35 * math.sin(2 * math.pi * t)


def render_frames(cfg: SyntheticConfig, painter: Painter, video: SyntheticVideo, fps: float):  # noqa: ANN201
    """Yield (size, size, 3) uint8 frames of one video."""
    inv = painter.inv
    rng = np.random.default_rng([cfg.seed, _RENDER, video.index])
    style = (rng.standard_normal(3) * 20 * cfg.style_strength).astype(np.float32)
    bg = painter.background(video, style)
    n_frames = max(1, math.ceil(video.duration * fps - 1e-9))
    events = sorted(video.events, key=lambda e: e.start)
    for f in range(n_frames):
        t = (f + 0.5) / fps
        canvas = bg.copy()
        active = [e for e in events if e.start <= t < e.end]
        for lane, e in enumerate(active[:2]):
            shape, colour = painter.obj[inv.object_index[e.object]]
            motion, tex = painter.act[inv.action_index[e.action]]
            p = (t - e.start) / max(e.end - e.start, 1e-6)
            cx, cy, sc = painter.position(motion, p, t, lane)
            outline = painter.adj[painter_adj_index(inv, e.adjective)] if e.adjective else None
            painter.place(canvas, shape, colour, texture(tex, 16, f, video.index), outline, cx, cy, sc)
        for st, ed, kind, i in video.distractors:
            if st <= t < ed:
                p = (t - st) / max(ed - st, 1e-6)
                if kind == "action":
                    motion, tex = painter.act[i]
                    cx, cy, sc = painter.position(motion, p, t, 1)
                    painter.place(canvas, "square", np.full(3, 150, np.float32), texture(tex, 16, f, i), None, cx, cy, sc)
                else:
                    shape, colour = painter.obj[i]
                    painter.place(canvas, shape, colour, texture("solid", 16, f, 0), None, painter.size * 0.7,
                                  painter.size * 0.3, 0.8)
        canvas += rng.standard_normal(canvas.shape).astype(np.float32) * (12 * cfg.noise)
        yield np.clip(canvas, 0, 255).astype(np.uint8)


def painter_adj_index(inv: Inventory, adjective: str) -> int:
    return next(i for i, a in enumerate(inv.adjectives) if a.id == adjective)


def srt_text(subtitles: list) -> str:  # noqa: ANN001
    """A video's subtitles ``(start, end, text, ...)`` as the text of an SRT file."""
    return "".join(f"{k + 1}\n{_srt_time(s[0])} --> {_srt_time(s[1])}\n{s[2]}\n\n" for k, s in enumerate(subtitles))


def _srt_time(s: float) -> str:
    ms = int(round(s * 1000))
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"


def write_video(path: Path, frames, fps: float, size: int) -> None:  # noqa: ANN001
    import av

    with atomic_path(path) as tmp:
        with av.open(str(tmp), "w", format="mp4") as out:
            stream = out.add_stream("libx264", rate=int(round(fps)) if float(fps).is_integer() else fps)
            stream.width = stream.height = size
            stream.pix_fmt = "yuv420p"
            stream.options = {"preset": "ultrafast", "crf": "20"}
            for img in frames:
                for packet in stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                    out.mux(packet)
            for packet in stream.encode():
                out.mux(packet)


def render_benchmark(root: str | Path, fps: float = 4.0, size: int = 64, progress: bool = True,
                     only: set[str] | None = None) -> Path:
    """Render every video of the benchmark at ``root`` (or the ids in ``only``) into ``root/videos/<id>.mp4``
    (+ ``<id>.srt``). Videos already rendered (same file name) are kept, so an interrupted render resumes."""
    from momentsearch.data.synthetic.benchmark import SyntheticBenchmark

    if not (fps > 0 and math.isfinite(fps)) or not 16 <= size <= 1024 or size % 2:
        raise MomentSearchError(f"render: fps must be > 0 (got {fps}) and size an even number of pixels in "
                                f"16..1024 (got {size})")
    bench = SyntheticBenchmark.load(root)
    cfg = bench.config
    inv = Inventory()
    world, painter = World(cfg, inv), Painter(inv, size)
    out = Path(root) / "videos"
    make_folder(out, out)
    for i in tqdm(range(cfg.n_videos), desc="rendering videos", unit="video", disable=not progress):
        if only is not None and f"syn_{i:06d}" not in only:  # the generator's id of video i
            continue
        video = sample_video(cfg, world, i)
        target = out / f"{video.video_id}.mp4"
        if video.subtitles:
            with atomic_path(out / f"{video.video_id}.srt") as tmp:
                tmp.write_text(srt_text(video.subtitles), encoding="utf-8")
        if not target.is_file():
            write_video(target, render_frames(cfg, painter, video, fps), fps, size)
    return out
