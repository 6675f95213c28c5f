"""``pack``: a checkpoint for a model family that needs no training (``clip``), from the encoder whose
embeddings it reads. The checkpoint carries everything the family needs (weights, tokenizer), and then
goes through ``index`` and ``search``/``load`` like any trained one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from momentsearch.errors import ConfigError
from momentsearch.models.registry import get_family
from momentsearch.training.checkpoint import pack_checkpoint


def pack(family: str, out: str | Path, encoder: str, encoder_weights: str | Path = "", **options: Any) -> Path:
    """Write ``out``: family ``family`` over the encoder ``encoder`` (``hf_clip`` with ``encoder_weights`` =
    a model folder, or ``open_clip:ARCH[@TAG]``). ``options`` set the family's config (clip: kappa,
    max_clips, smooth)."""
    cls = get_family(family)
    packer = getattr(cls, "pack", None)
    if packer is None:
        raise ConfigError(f"model family {family!r} is trained, not packed: `momentsearch train CONFIG` writes its "
                          "checkpoint (families packed without training: clip)")
    fixed = {"backend", "arch", "text_config", "tokenizer_bytes", "pad_id", "context_length", "image_encoder"}
    bad = sorted(set(options) & fixed)
    if bad:
        raise ConfigError(f"pack: {bad} come from the encoder and its weights, not from options")
    try:
        fam, model, features = packer(encoder, str(encoder_weights) if encoder_weights else "", **options)
    except TypeError as e:
        raise ConfigError(f"pack {family}: {e}") from None
    return pack_checkpoint(out, fam, model, features)
