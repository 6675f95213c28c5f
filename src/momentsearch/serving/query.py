"""A query is words, a picture, a found moment, or words with either: :class:`Query`.

    searcher.search("a dog on the sofa")                       # words
    searcher.search(Query(image="sofa.jpg"))                  # a picture (a path, bytes or an RGB array)
    searcher.search(Query(like=("living_room", 12.0, 17.5)))  # more like this moment
    searcher.search(Query("a dog", image="sofa.jpg"))         # both: each weighs alike (models/clip/family.py)

A plain string is a text query everywhere. A picture goes through the corpus's own visual encoder (the one
ingest recorded, with its weights), so it lands in the space the clips are in; a moment's query is its clips'
vectors from the index. The family turns the parts into its query features
(:meth:`~momentsearch.models.family.ModelFamily.example_query`); a family whose query side reads words only
refuses with a :class:`~momentsearch.errors.QueryError`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from momentsearch.errors import QueryError


@dataclass(frozen=True)
class MomentRef:
    """A found moment: ``video_id`` and its span in seconds."""

    video_id: str
    start: float
    end: float

    @classmethod
    def of(cls, x: Any) -> MomentRef:
        if isinstance(x, MomentRef):
            return x
        if isinstance(x, str):  # VIDEO:START-END, as the CLI takes it
            vid, sep, span = x.rpartition(":")
            a, dash, b = span.partition("-")
            try:
                if not (sep and dash and vid):
                    raise ValueError
                return cls.of((vid, float(a), float(b)))
            except ValueError:
                raise QueryError(f"a moment is VIDEO_ID:START-END in seconds (living_room:12-17.5), not "
                                 f"{x[:80]!r}") from None
        if not (isinstance(x, (tuple, list)) and len(x) == 3 and isinstance(x[0], str) and x[0]):
            raise QueryError("like= takes (video_id, start, end): a found moment")
        s, e = x[1], x[2]
        for name, t in (("start", s), ("end", e)):
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not np.isfinite(t):
                raise QueryError(f"like=: the moment's {name} must be a number of seconds, got {str(t)[:40]!r}")
        if not 0 <= s < e:
            raise QueryError(f"like=: the moment's span must have 0 <= start < end, got {s:g}-{e:g}")
        return cls(x[0], float(s), float(e))


@dataclass(frozen=True, eq=False)
class Query:
    """Words (``text``), a picture (``image``: a path, encoded bytes or an (H, W, 3) uint8 array, read by
    :func:`~momentsearch.video.images.read_image`) and/or a found moment (``like``: (video_id, start, end)).
    At least one; a picture and a moment are not combined with each other."""

    text: str | None = None
    image: Any = None
    like: Any = None

    def __post_init__(self) -> None:
        if self.text is not None and not isinstance(self.text, str):
            raise QueryError(f"the query's text must be a string, not {type(self.text).__name__}")
        if self.text is not None and not self.text.strip():
            raise QueryError("the query is empty: type a few words, e.g. \"a person opens the fridge\"")
        if self.text is None and self.image is None and self.like is None:
            raise QueryError("a query needs words, a picture (image=) or a moment (like=)")
        if self.image is not None and self.like is not None:
            raise QueryError("ask with a picture or with a moment, not both")
        if self.like is not None:
            object.__setattr__(self, "like", MomentRef.of(self.like))
        if self.image is not None and not isinstance(self.image, np.ndarray):
            from momentsearch.video.images import read_image

            object.__setattr__(self, "image", read_image(self.image))

    @property
    def words_only(self) -> bool:
        return self.image is None and self.like is None

    @property
    def label(self) -> str:
        """What the answer says was asked: the words, ``[picture]``, ``like VIDEO 1.0-2.0``, joined by ``+``."""
        bits = [self.text] if self.text else []
        if self.image is not None:
            bits.append("[picture]")
        if self.like is not None:
            bits.append(f"like {self.like.video_id} {self.like.start:g}-{self.like.end:g}")
        return " + ".join(bits)  # type: ignore[arg-type]


def as_query(x: str | Query) -> Query:
    if isinstance(x, Query):
        return x
    if isinstance(x, str):
        return Query(x)
    raise QueryError(f"a query is a string or a Query, not {type(x).__name__}")


class PictureEncoder:
    """The corpus's visual encoder, made once from the identity ingest recorded (name, config, weights) and
    checked to be the same; pictures are scaled as video frames are (:func:`~momentsearch.video.images.frame_of`)."""

    def __init__(self, identity: dict[str, Any] | None, weights: str | None, where: str):
        self.identity, self.weights, self.where = identity, weights, where
        self._enc: Any = None
        self._lock = threading.Lock()

    def _encoder(self) -> Any:
        from momentsearch.video.encoders import create_encoder, describe, same_encoder

        if self.identity is None:
            raise QueryError(f"{self.where}: no corpus beside the index records its visual encoder, so a picture "
                             "cannot be encoded; search with words or a moment")
        with self._lock:
            if self._enc is None:
                needs = bool((self.identity.get("config") or {}).get("weights"))
                options = {"weights": self.weights} if self.weights else {}
                if needs and not (self.weights and Path(self.weights).exists()):
                    where = f" ({self.weights})" if self.weights else ""
                    raise QueryError(f"the corpus was encoded by {describe(self.identity)}, whose weights{where} are "
                                     "not on this machine (ingest records where they were), so a picture cannot be "
                                     "encoded; search with words or a moment")
                enc = create_encoder(self.identity["name"], **options)
                if not same_encoder(enc.identity(), self.identity):
                    raise QueryError(f"the corpus's visual encoder {describe(self.identity)} cannot be made again "
                                     f"here (got {describe(enc.identity())}), so a picture cannot be encoded")
                self._enc = enc
            return self._enc

    def encode(self, images: list[np.ndarray]) -> np.ndarray:
        """(n, d) unit vectors of the pictures."""
        from momentsearch.video.images import frame_of

        enc = self._encoder()
        x = np.asarray(enc.encode([frame_of(img, enc.frame_size)[None] for img in images]), np.float32)
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


__all__ = ["MomentRef", "PictureEncoder", "Query", "as_query"]
