"""Query encoders: free text -> the features a model family's stages read, from one registry.

A query encoder has a registry name (``encoder``), a ``kind`` (``tokens``: one row per token; ``embedding``:
one row per text) and an :meth:`~QueryEncoder.identity` that a checkpoint and an index folder store, so a
model is only ever searched with the encoder it was trained with (``same_query_encoder``). A family says which
one it reads (``ModelFamily.query_encoder``); training, evaluation and search all take it from there.

Registered here: ``minilm`` (all-MiniLM-L6-v2 token states, cut at ``max_tokens``: XML, MINUTE, MMN, CET/BET)
and ``minilm-sentence`` (its sentence embedding, the mean of the token states, L2-normalised). The ``clip``
family registers ``clip`` (a CLIP text tower that travels in its checkpoint; with speech, plus MiniLM's sentence
embedding). Other packages add theirs through the ``momentsearch.query_encoders`` entry points.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from momentsearch.errors import MomentSearchError, QueryError
from momentsearch.plugins import Registry
from momentsearch.text.encoders import MINILM_DIM, SENTENCE_ENCODER, MiniLMSentenceEncoder, MiniLMTokenEncoder


class QueryEncoder:
    """Texts -> one (rows, dim) float32 array each (``tokens``: a row per token; ``embedding``: one row)."""

    encoder = ""  # the registry name
    kind = "tokens"
    dim = 0

    def __init__(self, identity: Mapping[str, Any] | None = None, **options: Any) -> None:
        raise NotImplementedError

    def identity(self) -> dict[str, Any]:
        raise NotImplementedError

    def encode(self, texts: Sequence[str], progress: bool = False) -> list[np.ndarray]:
        raise NotImplementedError


QUERY_ENCODERS: Registry[type[QueryEncoder]] = Registry("encoder", "momentsearch.query_encoders",
                                                        ("momentsearch.text.query_encoders",), unique=True)
register_query_encoder = QUERY_ENCODERS.register  # class decorator; the class takes identity= and options


def query_encoder_names() -> list[str]:
    return QUERY_ENCODERS.names()


def _registry_name(identity: Mapping[str, Any]) -> str:
    """The registry name of a stored identity; identities written before the registry (no ``encoder`` key) were
    MiniLM's tokens or the ``clip`` family's."""
    if isinstance(identity.get("encoder"), str):
        return identity["encoder"]
    name = str(identity.get("name", ""))
    if name.startswith(("clip-text:", "said:")):
        return "clip"
    return "minilm" if identity.get("kind", "tokens") == "tokens" else "minilm-sentence"


def normalised(identity: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """An identity with its registry name filled in (for comparing old and new spellings)."""
    return None if identity is None else {**identity, "encoder": _registry_name(identity)}


def same_query_encoder(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    return normalised(a) == normalised(b)


def describe_query_encoder(identity: Mapping[str, Any] | None) -> str:
    if identity is None:
        return "an unrecorded query encoder"
    extra = f", {identity['max_tokens']} tokens" if identity.get("max_tokens") else ""
    return f"{identity.get('name', '?')} ({_registry_name(identity)}, {identity.get('kind', '?')}{extra})"


def create_query_encoder(spec: str | Mapping[str, Any], **options: Any) -> QueryEncoder:
    """By registry name (``create_query_encoder("minilm", max_tokens=32)``) or from a stored identity."""
    classes = QUERY_ENCODERS.load()
    name = spec if isinstance(spec, str) else _registry_name(spec)
    if name not in classes:
        raise QueryError(f"unknown query encoder {name!r}; registered: {', '.join(sorted(classes))}")
    return classes[name](identity=None if isinstance(spec, str) else dict(spec), **options)


def check_queries(texts: Sequence[str]) -> None:
    """A :class:`QueryError` naming the first empty query, or one that is not text."""
    for i, t in enumerate(texts):
        if not isinstance(t, str) or not t.strip():
            raise QueryError(f"query {i} is empty: a query needs at least one word")
        check_text(t)


def check_text(text: str) -> str:
    """``text``, or a :class:`QueryError` when it cannot be written as UTF-8 (a lone surrogate: not text)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise QueryError("the query holds a character that is not text (a lone UTF-16 surrogate); "
                         "send it as UTF-8") from None
    return text


@register_query_encoder
class MiniLMTokens(QueryEncoder):
    """all-MiniLM-L6-v2's token states ([CLS] and [SEP] included), at most ``max_tokens`` of them."""

    encoder, kind, dim = "minilm", "tokens", MINILM_DIM

    def __init__(self, identity: Mapping[str, Any] | None = None, max_tokens: int | None = None,
                 batch_size: int = 128):
        self.max_tokens = int(max_tokens or (identity or {}).get("max_tokens") or 32)
        if self.max_tokens < 2:
            raise MomentSearchError(f"max_tokens must be >= 2 ([CLS] and [SEP]), got {self.max_tokens}")
        self.tokens = MiniLMTokenEncoder(self.max_tokens, batch_size)

    def identity(self) -> dict[str, Any]:
        return {"name": "all-MiniLM-L6-v2", "kind": "tokens", "dim": MINILM_DIM, "max_tokens": self.max_tokens,
                "encoder": self.encoder}

    def encode(self, texts: Sequence[str], progress: bool = False) -> list[np.ndarray]:
        check_queries(texts)
        return self.tokens.encode(texts, progress)


@register_query_encoder
class MiniLMSentences(QueryEncoder):
    """all-MiniLM-L6-v2's sentence embedding: one (1, 384) row per text (what the subtitle stream holds)."""

    encoder, kind, dim = "minilm-sentence", "embedding", MINILM_DIM

    def __init__(self, identity: Mapping[str, Any] | None = None, batch_size: int = 64):
        self.sentences = MiniLMSentenceEncoder(batch_size)

    def identity(self) -> dict[str, Any]:
        return {**SENTENCE_ENCODER, "kind": "embedding", "encoder": self.encoder}

    def encode(self, texts: Sequence[str], progress: bool = False) -> list[np.ndarray]:
        check_queries(texts)
        return list(self.sentences.encode(list(texts))[:, None])
