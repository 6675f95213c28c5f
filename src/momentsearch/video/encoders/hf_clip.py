"""``hf_clip``: the image tower of a CLIP model saved in Hugging Face's layout (a folder with
``config.json`` and ``model.safetensors``/``pytorch_model.bin``, e.g. a local copy of
openai/clip-vit-base-patch32), one L2-normalised vector per clip. Runs with transformers alone, no
torchvision. The folder is given as ``weights=DIR`` (``--encoder-weights DIR``); nothing is downloaded.
The ``clip`` model family reads a corpus made by this encoder with the text tower of the same folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from momentsearch.errors import EncoderError
from momentsearch.video.encoders.base import register_encoder
from momentsearch.video.encoders.torch_frames import TorchFrameEncoder, file_sha1

WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def _weight_files(folder: Path) -> list[Path]:
    files = sorted(p for p in folder.glob("*") if p.name in WEIGHT_FILES or (p.suffix == ".safetensors" and p.is_file()))
    if not folder.is_dir() or not files:
        raise EncoderError(f"{folder}: not a Hugging Face CLIP folder (no {' or '.join(WEIGHT_FILES)}); give the "
                           "folder that save_pretrained wrote, e.g. a local copy of openai/clip-vit-base-patch32")
    return files


def folder_weights_id(folder: str | Path) -> str:
    """The weights' identity: a content hash of the folder's weight file(s) (a copied folder is the same)."""
    return f"sha1:{file_sha1(*_weight_files(Path(folder)))}"


def load_hf_clip(folder: str | Path) -> Any:
    """The CLIPModel in ``folder`` (CPU, eval mode), or an EncoderError naming the folder."""
    d = Path(folder)
    _weight_files(d)
    try:
        from transformers import CLIPModel
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        model = CLIPModel.from_pretrained(str(d), local_files_only=True)
    except Exception as e:  # noqa: BLE001 - transformers raises OSError, ValueError, RuntimeError...
        raise EncoderError(f"{d}: cannot load a CLIP model from this folder ({type(e).__name__}: "
                           f"{str(e).splitlines()[0][:300]})") from None
    return model.eval()


def tower_config(model: Any, which: str) -> dict[str, Any]:
    """The text or vision sub-config with the shared projection dim, to build a tower alone."""
    cfg = getattr(model.config, f"{which}_config").to_dict()
    cfg["projection_dim"] = int(model.config.projection_dim)
    return cfg


def _preprocess_stats(folder: Path) -> tuple[tuple[float, ...], tuple[float, ...]]:
    p = folder / "preprocessor_config.json"
    if p.is_file():
        try:
            cfg = json.loads(p.read_text(encoding="utf-8"))
            return tuple(cfg.get("image_mean", CLIP_MEAN)), tuple(cfg.get("image_std", CLIP_STD))
        except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
            raise EncoderError(f"{p}: not a readable preprocessor config") from None
    return CLIP_MEAN, CLIP_STD


@register_encoder
class HFCLIPEncoder(TorchFrameEncoder):
    kind = "hf_clip"
    version = 1
    normalize_output = True

    def __init__(self, arch: str = "", weights: str = "", **options: Any):
        if arch:
            raise EncoderError(f"hf_clip takes no architecture name (got {arch!r}): give the model folder as "
                               "--encoder-weights DIR")
        if not weights:
            raise EncoderError("hf_clip needs a CLIP model folder: --encoder-weights DIR (Hugging Face layout)")
        super().__init__("folder", weights, **options)
        self.arch = ""
        from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

        full = load_hf_clip(weights)
        self.weights_id = folder_weights_id(weights)
        tower = CLIPVisionModelWithProjection(CLIPVisionConfig(**tower_config(full, "vision")))
        tower.load_state_dict({k: v for k, v in full.state_dict().items()
                               if k.startswith(("vision_model.", "visual_projection."))})
        self.tower = tower.eval().to(self.device)
        self.net = lambda x: self.tower(pixel_values=x).image_embeds
        self.size = int(full.config.vision_config.image_size)
        self.mean, self.std = _preprocess_stats(Path(weights))

    def config(self) -> dict[str, Any]:
        return {"weights": self.weights_id, "size": self.size}
