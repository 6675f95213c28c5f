"""The ``clip`` family's config: which CLIP text tower, which image embeddings it pairs with, and the
moment rule's three numbers (see :mod:`momentsearch.models.clip.moments`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

BACKENDS = ("hf_clip", "open_clip")
RULE_OPTIONS = ("kappa", "max_clips", "smooth")  # what a user sets; the rest comes from the encoder


@dataclass(frozen=True)
class CLIPSearchConfig:
    name: str = "clip"
    backend: str = "hf_clip"  # hf_clip (transformers) | open_clip
    arch: str = ""  # open_clip's architecture (ViT-B-32...); unused by hf_clip
    text_config: dict[str, Any] = field(default_factory=dict)  # hf_clip: CLIPTextConfig with projection_dim
    tokenizer_bytes: int = 0  # hf_clip: size of the tokenizer.json the checkpoint carries
    pad_id: int = 0
    context_length: int = 77  # tokens per query, CLIP's text context
    image_encoder: dict[str, Any] = field(default_factory=dict)  # identity of the visual encoder it pairs with
    kappa: float = 0.5  # threshold = mean + kappa * std of the video's smoothed similarities
    max_clips: int = 16  # the longest moment, in clips
    smooth: int = 1  # clips in the moving average before thresholding (1: none)

    def __post_init__(self) -> None:
        if self.name != "clip":
            raise ValueError(f"name must be 'clip', got {self.name!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.max_clips < 1 or self.smooth < 1 or self.context_length < 2:
            raise ValueError("max_clips and smooth must be >= 1 and context_length >= 2")

    @property
    def dim(self) -> int:
        return int(self.image_encoder.get("dim", 0))
