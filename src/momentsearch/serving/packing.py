"""``pack``: a checkpoint for a model family that needs no training (``clip``), from the encoder whose
embeddings it reads. The checkpoint carries everything the family needs (weights, tokenizer), and then
goes through ``index`` and ``search``/``load`` like any trained one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from momentsearch.errors import ConfigError
from momentsearch.models.registry import get_family
from momentsearch.serving.checkpoint import pack_checkpoint


def pack(family: str, out: str | Path, encoder: str = "", encoder_weights: str | Path = "", speech: bool = False, written: bool = False,
         **options: Any) -> Path:
    """Write ``out``: family ``family`` over the encoder ``encoder`` (``hf_clip`` with ``encoder_weights`` =
    a model folder, or ``open_clip:ARCH[@TAG]``); ``speech``: search what is said too (clip; alone, with no
    encoder: what is said only). ``options`` set the family's config (clip: kappa, max_clips, smooth)."""
    cls = get_family(family)
    if not cls.packable:
        raise ConfigError(f"model family {family!r} is trained, not packed: `momentsearch train CONFIG` writes its "
                          "checkpoint (families packed without training: clip)")
    fam, model, features = cls.pack(encoder, str(encoder_weights) if encoder_weights else "", speech=speech, written=written, **options)
    return pack_checkpoint(out, fam, model, features)
