"""``clip``: a training-free searcher. The query goes through CLIP's text tower; each clip of the corpus
already holds the image embedding of the same CLIP (the corpus was ingested with its image tower);
a video scores by its best clip's cosine, and its moments are spans of high similarity
(:mod:`momentsearch.models.clip.moments`). It is packed, not trained: ``momentsearch pack clip
--encoder hf_clip --encoder-weights DIR --out clip.pt``, then ``index`` and ``search`` as any model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import Any

import numpy as np
import torch
from torch import nn

from momentsearch.data.corpus import Video
from momentsearch.data.features import FeatureStore
from momentsearch.errors import ConfigError, EncoderError
from momentsearch.models.clip.config import RULE_OPTIONS, CLIPSearchConfig
from momentsearch.models.clip.moments import similarity_moments
from momentsearch.models.clip.network import HFCLIPText, OpenCLIPText, text_tower
from momentsearch.models.family import BatchSource, InputDims, ModelFamily, Step, TrainingData
from momentsearch.models.registry import register
from momentsearch.search.clipmax import ClipMaxRetriever
from momentsearch.search.index import VideoIndex, concat_ragged
from momentsearch.search.stages import SearchStages
from momentsearch.text.queries import InMemoryTextFeatures

NOT_TRAINED = ("model family 'clip' needs no training: pack it with `momentsearch pack clip --encoder hf_clip "
               "--encoder-weights DIR --out clip.pt` (or open_clip:ARCH[@TAG]) and index a corpus made by that encoder")


class CLIPTextEncoder:
    """Texts -> one (1, D) normalised embedding each, the 'token features' the clip stages read."""

    def __init__(self, tower: nn.Module, batch_size: int = 64):
        self.tower, self.batch_size = tower, batch_size

    def encode(self, texts: Sequence[str], progress: bool = False) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for s in range(0, len(texts), self.batch_size):
            emb = self.tower.encode_text([t.strip() for t in texts[s: s + self.batch_size]]).cpu().numpy()
            out.extend(e[None].astype(np.float32) for e in emb)
        return out


class CLIPLocalizer:
    """Moments of each candidate video by the similarity rule; ``propose`` (any length) and a dense grid."""

    def __init__(self, index: VideoIndex, cfg: CLIPSearchConfig):
        self.index, self.cfg = index, cfg

    def score_bound(self, video_scores: torch.Tensor) -> torch.Tensor:
        """A moment scores (1 + the mean cosine of its clips) / 2, at most (1 + the video's best clip's cosine) / 2:
        (1 + s_vr) / 2 (+1e-5: the retriever and this localizer compute the cosines apart, in float32)."""
        return (1.0 + video_scores.float()) / 2.0 + 1e-5

    def _cosines(self, q: np.ndarray, v: int) -> np.ndarray:
        a, b = int(self.index.offsets[v]), int(self.index.offsets[v + 1])
        clips = np.asarray(self.index.array("img")[a:b, 0], np.float32)
        clips /= np.maximum(np.linalg.norm(clips, axis=1, keepdims=True), 1e-12)
        return clips @ q

    def propose(self, tokens: torch.Tensor, token_mask: torch.Tensor, videos: np.ndarray,
                video_scores: torch.Tensor | None, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        q = torch.nn.functional.normalize(tokens[:, 0].float(), dim=-1).cpu().numpy()  # (B, D)
        b, k = videos.shape
        st, ed, sc = np.zeros((b, k, n), np.int64), np.zeros((b, k, n), np.int64), np.zeros((b, k, n), np.float32)
        for i in range(b):
            for j in range(k):
                s_, e_, p_ = similarity_moments(self._cosines(q[i], int(videos[i, j])), self.cfg.kappa,
                                                self.cfg.max_clips, self.cfg.smooth)
                m = min(n, len(s_))
                st[i, j, :m], ed[i, j, :m], sc[i, j, :m] = s_[:m], e_[:m], p_[:m]
        return st, ed, sc

    def localize(self, tokens: torch.Tensor, token_mask: torch.Tensor, videos: np.ndarray,
                 video_scores: torch.Tensor | None = None) -> torch.Tensor:
        """(B, K, T, T): each proposed span's score at its (start, end) cell, 0 elsewhere."""
        t = int(self.index.n_clips[videos].max())
        st, ed, sc = self.propose(tokens, token_mask, videos, video_scores, t)
        grid = np.zeros((*videos.shape, t, t), np.float32)
        bi, ki, ni = np.nonzero(sc > 0)
        grid[bi, ki, st[bi, ki, ni], ed[bi, ki, ni]] = sc[bi, ki, ni]
        return torch.from_numpy(grid)


@register
class CLIPFamily(ModelFamily):
    name = "clip"
    version = 1
    config_class = CLIPSearchConfig
    cfg: CLIPSearchConfig

    def build(self, dims: InputDims) -> nn.Module:
        raise ConfigError(NOT_TRAINED)

    def restore(self) -> nn.Module:
        return text_tower(self.cfg)

    @property
    def max_tokens(self) -> int:
        return 1  # one 'token': the text embedding

    @property
    def text_encoder(self) -> dict[str, Any]:
        weights = (self.cfg.image_encoder.get("config") or {}).get("weights")
        return {"name": f"clip-text:{self.cfg.backend}{':' + self.cfg.arch if self.cfg.arch else ''}",
                "kind": "embedding", "dim": self.cfg.dim, "weights": weights, "max_tokens": self.cfg.context_length}

    def query_features(self, model: nn.Module, cache_size: int = 4096) -> Any:
        return InMemoryTextFeatures(cache_size, encoder=CLIPTextEncoder(model))  # type: ignore[arg-type]

    def check_features(self, model_features: dict[str, Any] | None, corpus_encoder: dict[str, Any],
                       dims: dict[str, int]) -> str | None:
        from momentsearch.video.encoders.base import describe, same_encoder

        if not same_encoder(self.cfg.image_encoder, corpus_encoder):
            return (f"its CLIP text tower pairs with image embeddings of {describe(self.cfg.image_encoder)}, and the "
                    f"corpus was made by {describe(corpus_encoder)}: ingest the videos with that encoder")
        return None

    def batches(self, data: TrainingData) -> BatchSource:
        raise ConfigError(NOT_TRAINED)

    def loss(self, model: nn.Module, batch: Any, step: Step) -> tuple[torch.Tensor, dict[str, float]]:
        raise ConfigError(NOT_TRAINED)

    def encode_corpus(self, model: nn.Module, store: FeatureStore, videos: Sequence[Video],
                      clip_lengths: Mapping[str, float], device: torch.device, progress: bool = True) -> VideoIndex:
        """The corpus's image embeddings, normalised, as the index's ``img`` array (clips, 1, D) fp16."""
        per = []
        for v in videos:
            vis = np.asarray(store.get(v.video_id)[0], np.float32)
            per.append((vis / np.maximum(np.linalg.norm(vis, axis=1, keepdims=True), 1e-12))[:, None].astype(np.float16))
        img, offsets = concat_ragged(per)
        return self.stamped(VideoIndex([v.video_id for v in videos], np.array([v.duration for v in videos]),
                                       np.array([clip_lengths[v.video_id] for v in videos], np.float64), offsets,
                                       {"img": img}))

    def stages(self, model: nn.Module, index: VideoIndex, device: torch.device) -> SearchStages:
        retriever = ClipMaxRetriever(lambda tokens, mask: tokens[:, :1], index, "img", cosine=True, device=device)
        return SearchStages(retriever, CLIPLocalizer(index, self.cfg))  # type: ignore[arg-type]

    # ---- packing ---------------------------------------------------------------------------------
    @classmethod
    def pack(cls, encoder: str, weights: str = "", **options: Any) -> tuple[CLIPFamily, nn.Module, dict[str, Any]]:
        """(family, text tower, the image encoder's identity) for ``encoder``: ``hf_clip`` with a model
        folder, or ``open_clip:ARCH[@TAG]`` with a weights file or tag. ``options``: the moment rule's."""
        from momentsearch.video.encoders.base import create_encoder

        for key in options:
            if key not in RULE_OPTIONS:
                why = ("settings that come from the encoder and its weights cannot be set" if key in
                       {f.name for f in fields(CLIPSearchConfig)} else "unexpected keyword argument")
                raise ConfigError(f"pack clip: {why} {key!r}; the options are {', '.join(RULE_OPTIONS)}")
        kind = encoder.partition(":")[0]
        if kind == "hf_clip":
            from momentsearch.video.encoders.hf_clip import load_hf_clip, tower_config

            image = create_encoder("hf_clip", weights=weights)
            full = load_hf_clip(weights)
            tok, pad = _hf_tokenizer(weights, int(full.config.text_config.eos_token_id))
            cfg = CLIPSearchConfig(backend="hf_clip", text_config=tower_config(full, "text"),
                                   tokenizer_bytes=len(tok.encode("utf-8")), pad_id=pad,
                                   context_length=int(full.config.text_config.max_position_embeddings),
                                   image_encoder=image.identity(), **options)
            tower: nn.Module = HFCLIPText(cfg)
            tower.tower.load_state_dict({k: v for k, v in full.state_dict().items()  # type: ignore[union-attr]
                                         if k.startswith(("text_model.", "text_projection."))})
            tower.set_tokenizer(tok)  # type: ignore[operator]
        elif kind == "open_clip":
            from momentsearch.video.encoders.open_clip import import_open_clip, weights_source

            image = create_encoder(encoder, weights=weights)
            arch, _, pretrained = weights_source(encoder.partition(":")[2], weights, False)
            model = import_open_clip().create_model(arch, pretrained=pretrained)
            cfg = CLIPSearchConfig(backend="open_clip", arch=arch, context_length=int(model.context_length),
                                   image_encoder=image.identity(), **options)
            tower = OpenCLIPText(cfg, model)
        else:
            raise EncoderError(f"the clip family reads hf_clip or open_clip:ARCH corpora, not {encoder!r}")
        fam = cls(cfg)
        return fam, tower.eval(), image.identity()


def _hf_tokenizer(folder: str, eos_id: int) -> tuple[str, int]:
    """(tokenizer.json as text, the pad id): CLIP pads with its end-of-text token."""
    try:
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        data = tok.backend_tokenizer.to_str()
    except Exception as e:  # noqa: BLE001 - missing or unreadable tokenizer files
        raise EncoderError(f"{folder}: no usable CLIP tokenizer (tokenizer.json, or vocab.json and merges.txt): "
                           f"{type(e).__name__}: {str(e).splitlines()[0][:200]}") from None
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    return data, int(pad if pad is not None else eos_id)


__all__ = ["CLIPFamily", "CLIPSearchConfig"]
