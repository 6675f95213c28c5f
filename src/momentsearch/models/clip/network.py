"""CLIP text towers, the query side of the ``clip`` family: texts in, L2-normalised embeddings out.

* :class:`HFCLIPText`: transformers' ``CLIPTextModelWithProjection``; the tokenizer (its
  ``tokenizer.json``) travels inside the checkpoint as a byte buffer, so a packed checkpoint needs
  nothing but itself;
* :class:`OpenCLIPText`: open_clip's model of the architecture with its image tower dropped; its
  tokenizer ships with open_clip.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from momentsearch.models.clip.config import CLIPSearchConfig


class HFCLIPText(nn.Module):
    def __init__(self, cfg: CLIPSearchConfig):
        super().__init__()
        from transformers import CLIPTextConfig, CLIPTextModelWithProjection

        self.cfg = cfg
        self.tower = CLIPTextModelWithProjection(CLIPTextConfig(**cfg.text_config))
        self.register_buffer("tokenizer_json", torch.zeros(cfg.tokenizer_bytes, dtype=torch.uint8))
        self._tok: Any = None

    def set_tokenizer(self, tokenizer_json: str) -> None:
        data = torch.frombuffer(bytearray(tokenizer_json.encode("utf-8")), dtype=torch.uint8)
        self.tokenizer_json = data.clone()
        self._tok = None

    def _tokenizer(self) -> Any:
        if self._tok is None:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_str(bytes(self.tokenizer_json.cpu().numpy()).decode("utf-8"))
            tok.enable_truncation(max_length=self.cfg.context_length)
            tok.enable_padding(pad_id=self.cfg.pad_id)
            self._tok = tok
        return self._tok

    @torch.no_grad()
    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        enc = self._tokenizer().encode_batch(list(texts))
        dev = self.tokenizer_json.device
        ids = torch.tensor([e.ids for e in enc], device=dev)
        mask = torch.tensor([e.attention_mask for e in enc], device=dev)
        return F.normalize(self.tower(input_ids=ids, attention_mask=mask).text_embeds.float(), dim=-1)


class OpenCLIPText(nn.Module):
    def __init__(self, cfg: CLIPSearchConfig, model: Any = None):
        super().__init__()
        from momentsearch.video.encoders.open_clip import import_open_clip

        self.cfg = cfg
        self._open_clip = import_open_clip()
        if model is None:
            model = self._open_clip.create_model(cfg.arch)  # weights come from the checkpoint
        model.visual = None  # the corpus holds the image embeddings already
        self.model = model
        self._tok: Any = None

    @torch.no_grad()
    def encode_text(self, texts: Sequence[str]) -> torch.Tensor:
        if self._tok is None:
            self._tok = self._open_clip.get_tokenizer(self.cfg.arch)
        dev = next(self.model.parameters()).device
        return self.model.encode_text(self._tok(list(texts)).to(dev), normalize=True).float()


class NoTower(nn.Module):
    """The query side of a family that searches what is said only: no CLIP weights (MiniLM is loaded offline)."""


def text_tower(cfg: CLIPSearchConfig) -> nn.Module:
    if cfg.backend == "none":
        return NoTower()
    return HFCLIPText(cfg) if cfg.backend == "hf_clip" else OpenCLIPText(cfg)
