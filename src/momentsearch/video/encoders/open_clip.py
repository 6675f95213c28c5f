"""``open_clip:ARCH``: open_clip's image tower (CLIP ViT or ResNet), one L2-normalised vector per clip.

Weights come from a local file (``weights=FILE``, e.g. ``open_clip_pytorch_model.bin``) or from a
pretrained tag after ``@`` (``open_clip:ViT-B-32@laion2b_s34b_b79k``), which open_clip downloads on a
machine with internet: nothing here downloads anything. Without either the network is randomly
initialised, which only tests need (``random=True`` says so on purpose). Frames are scaled to the
model's input size (squashed, not cropped) and normalised with its own mean and std.
The ``clip`` model family reads a corpus made by this encoder with the text tower of the same weights.
"""

from __future__ import annotations

from typing import Any

from momentsearch.errors import EncoderError
from momentsearch.video.encoders.base import register_encoder
from momentsearch.video.encoders.torch_frames import TorchFrameEncoder, file_sha1


def import_open_clip() -> Any:
    try:
        import open_clip
    except Exception as e:  # noqa: BLE001 - ImportError, or torchvision failing to load beside this torch
        raise EncoderError(f"the open_clip encoder needs open_clip_torch and a torchvision that loads beside this "
                           f"torch: pip install 'momentsearch[clip]' ({type(e).__name__}: {str(e)[:200]})") from None
    return open_clip


def weights_source(arch: str, weights: str, random: bool) -> tuple[str, str, str | None]:
    """(arch, identity of the weights, what to pass open_clip as ``pretrained``)."""
    arch, _, tag = arch.partition("@")
    if weights and tag:
        raise EncoderError(f"open_clip:{arch}: give a weights file or a pretrained tag, not both")
    if weights:
        return arch, f"sha1:{file_sha1(weights)}", weights
    if tag:
        return arch, f"tag:{tag}", tag
    if not random:
        raise EncoderError(f"open_clip:{arch}: no weights. Give a local file (--encoder-weights FILE) or a pretrained "
                           f"tag (open_clip:{arch}@TAG, downloaded by open_clip on a machine with internet)")
    return arch, "random", None


@register_encoder
class OpenCLIPEncoder(TorchFrameEncoder):
    kind = "open_clip"
    version = 1
    normalize_output = True

    def __init__(self, arch: str = "", weights: str = "", random: bool = False, seed: int = 0, **options: Any):
        super().__init__(arch, weights, **options)
        open_clip = import_open_clip()
        self.arch, self.weights_id, pretrained = weights_source(arch, weights, random)
        if self.arch not in open_clip.list_models():
            raise EncoderError(f"open_clip has no architecture {self.arch!r} (e.g. ViT-B-32, ViT-B-16, RN50)")
        self.torch.manual_seed(seed)
        try:
            model = open_clip.create_model(self.arch, pretrained=pretrained, device=self.device)
        except Exception as e:  # noqa: BLE001 - open_clip raises RuntimeError, KeyError, OSError...
            raise EncoderError(f"open_clip:{self.arch}: cannot load the weights {weights or pretrained!r} "
                               f"({type(e).__name__}: {str(e)[:300]})") from None
        model.eval()
        self.net = model.visual
        side = model.visual.image_size
        self.size = int(side[0] if isinstance(side, (tuple, list)) else side)
        cfg = getattr(model.visual, "preprocess_cfg", {})
        self.mean = tuple(cfg.get("mean", (0.48145466, 0.4578275, 0.40821073)))
        self.std = tuple(cfg.get("std", (0.26862954, 0.26130258, 0.27577711)))
        self.seed = seed

    def config(self) -> dict[str, Any]:
        out: dict[str, Any] = {"weights": self.weights_id, "size": self.size}
        if self.weights_id == "random":
            out["seed"] = self.seed
        return out
