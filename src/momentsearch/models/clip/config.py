"""The ``clip`` family's config: which streams it searches (what is seen: a CLIP text tower and the image
embeddings it pairs with; what is said: MiniLM over the corpus's transcripts; what is written: MiniLM over the
text read on screen), and the moment rule's three
numbers (see :mod:`momentsearch.models.clip.moments` and :mod:`momentsearch.models.clip.spans`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

BACKENDS = ("hf_clip", "open_clip", "none")  # none: no CLIP, what is said only
RULE_OPTIONS = ("kappa", "max_clips", "smooth")
SPEECH_DIM = 384  # MiniLM (all-MiniLM-L6-v2) sentence embeddings, as ingest writes the subtitle stream  # what a user sets; the rest comes from the encoder


@dataclass(frozen=True)
class CLIPSearchConfig:
    name: str = "clip"
    backend: str = "hf_clip"  # hf_clip (transformers) | open_clip | none (speech only)
    arch: str = ""  # open_clip's architecture (ViT-B-32...); unused by hf_clip
    text_config: dict[str, Any] = field(default_factory=dict)  # hf_clip: CLIPTextConfig with projection_dim
    tokenizer_bytes: int = 0  # hf_clip: size of the tokenizer.json the checkpoint carries
    pad_id: int = 0
    context_length: int = 77  # tokens per query, CLIP's text context
    image_encoder: dict[str, Any] = field(default_factory=dict)  # identity of the visual encoder it pairs with
    kappa: float = 0.5  # threshold = mean + kappa * std of the video's smoothed similarities
    max_clips: int = 16  # the longest moment, in clips
    smooth: int = 1  # clips in the moving average before thresholding (1: none)
    speech: bool = False  # also search what is said (the corpus's subtitle stream, MiniLM)
    written: bool = False  # also search the text read on screen (the corpus's written stream, MiniLM)

    def __post_init__(self) -> None:
        if self.name != "clip":
            raise ValueError(f"name must be 'clip', got {self.name!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.max_clips < 1 or self.smooth < 1 or self.context_length < 2:
            raise ValueError("max_clips and smooth must be >= 1 and context_length >= 2")
        if self.backend == "none" and not (self.speech or self.written):
            raise ValueError("backend 'none' (no CLIP) searches what is said or written: it needs speech=True or "
                             "written=True")

    @property
    def vision(self) -> bool:
        return self.backend != "none"

    @property
    def dim(self) -> int:
        return int(self.image_encoder.get("dim", 0))

    @property
    def streams(self) -> tuple[str, ...]:
        """The streams searched, in the order of the index's rows: seen, said, then written."""
        return (("seen",) if self.vision else ()) + (("said",) if self.speech else ()) + (
            ("written",) if self.written else ())

    @property
    def width(self) -> int:
        """Each stream's row in the index (and each query vector), zero-padded to the widest of them."""
        return max(self.dim if self.vision else 0, SPEECH_DIM if self.speech or self.written else 0)
