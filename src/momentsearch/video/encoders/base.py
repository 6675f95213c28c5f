"""Visual encoders behind one registry: the frames of one clip in, one vector out.

An encoder is chosen by name, in YAML or on the command line, like a model family:

* ``builtin``: colour, texture and motion statistics per clip; no weights, runs anywhere;
* ``open_clip:ARCH`` (e.g. ``open_clip:ViT-B-32``): open_clip's image tower, weights from a local
  file (``--encoder-weights FILE``) or a pretrained tag that open_clip downloads on a machine
  with internet (``open_clip:ViT-B-32@laion2b_s34b_b79k``);
* ``torchvision:NAME`` (e.g. ``torchvision:resnet50``): a torchvision classification backbone with
  its classifier removed, weights from a local file or torchvision's own (``@DEFAULT``);
* ``hf_clip``: the image tower of a CLIP model folder in Hugging Face's layout (``weights=DIR``),
  with transformers alone.

Outside packages add encoders through the ``momentsearch.encoders`` entry-point group
(``name = "pkg.module:EncoderClass"``; the class takes ``(arch, **options)``).

Each encoder says the frame size it wants (the decoder scales to it) and its
:meth:`VisualEncoder.identity` — name, version, config and dim — which a corpus records and a
model's checkpoint is checked against.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from momentsearch.errors import EncoderError
from momentsearch.plugins import Registry

_REGISTRY: Registry = Registry("kind", "momentsearch.encoders", (
    "momentsearch.video.encoders.builtin", "momentsearch.video.encoders.open_clip",
    "momentsearch.video.encoders.torchvision", "momentsearch.video.encoders.hf_clip"))
ENCODERS: dict[str, type[VisualEncoder]] = _REGISTRY.classes


class VisualEncoder(ABC):
    """``encode(clips)``: a list of clips, each ``(n_frames, H, W, 3)`` uint8, -> ``(len(clips), dim)`` float32."""

    kind: ClassVar[str]  # the registry name: builtin, open_clip, torchvision
    version: ClassVar[int] = 1  # bump when the same config would give other features
    needs_previous_frame: ClassVar[bool] = False  # motion across clip boundaries

    def __init__(self, arch: str = "", **options: Any):
        self.arch = arch
        self.options = options

    @property
    @abstractmethod
    def dim(self) -> int: ...

    @property
    @abstractmethod
    def frame_size(self) -> tuple[int, int]:
        """(width, height) the frames are scaled to before :meth:`encode`."""

    @property
    def name(self) -> str:
        return f"{self.kind}:{self.arch}" if self.arch else self.kind

    def config(self) -> dict[str, Any]:
        """What, beside name and version, makes two encoders give the same features (weights' hash...)."""
        return {}

    def identity(self) -> dict[str, Any]:
        return {"name": self.name, "version": self.version, "config": self.config(), "dim": self.dim}

    @abstractmethod
    def encode(self, clips: Sequence[np.ndarray], previous: np.ndarray | None = None) -> np.ndarray:
        """``previous``: the last frame before ``clips[0]`` (None at the video's start)."""


def register_encoder(cls: type[VisualEncoder]) -> type[VisualEncoder]:
    return _REGISTRY.register(cls)


def encoder_names() -> list[str]:
    return _REGISTRY.names()


def create_encoder(name: str, **options: Any) -> VisualEncoder:
    """``builtin``, ``open_clip:ARCH[@TAG]``, ``torchvision:NAME[@WEIGHTS]``; options go to the encoder
    (``weights=FILE``, ``device=...``, ``batch_size=...``)."""
    _REGISTRY.load()
    kind, _, arch = name.partition(":")
    if kind not in ENCODERS:
        raise EncoderError(f"unknown visual encoder {name!r}; known: {sorted(ENCODERS)} "
                           "(e.g. builtin, open_clip:ViT-B-32, torchvision:resnet50, hf_clip)")
    return ENCODERS[kind](arch, **options)


def same_encoder(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Two identities give interchangeable features: same name, version, config and dim."""
    keys = ("name", "version", "config", "dim")
    return all(a.get(k) == b.get(k) for k in keys)


def describe(identity: dict[str, Any]) -> str:
    cfg = identity.get("config") or {}
    extra = f", {', '.join(f'{k}={v}' for k, v in sorted(cfg.items()))}" if cfg else ""
    return f"{identity.get('name', '?')} v{identity.get('version', '?')} (dim {identity.get('dim', '?')}{extra})"
