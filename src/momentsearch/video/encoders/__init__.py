"""Visual encoders by name: ``create_encoder("builtin" | "open_clip:ARCH" | "torchvision:NAME")``."""

from momentsearch.video.encoders.base import (
    VisualEncoder,
    create_encoder,
    describe,
    encoder_names,
    register_encoder,
    same_encoder,
)

__all__ = ["VisualEncoder", "create_encoder", "describe", "encoder_names", "register_encoder", "same_encoder"]
