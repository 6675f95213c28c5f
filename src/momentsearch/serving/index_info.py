"""``index.json``, an index folder's description, as one typed record with one reader and one writer.

    {"format": "momentsearch-index", "version": 1, "family": ..., "model_fingerprint": ..., "model_source": ...,
     "text_encoder": {...}, "model_features": {...},
     "corpus": {"path": ..., "relative": ..., "fingerprint": ..., "encoder": {...}},
     "videos": {video id: signature, ...}, "n_videos": V, "n_clips": N,
     "search": {"k_videos": 100, "nms_threshold": 0.7}}

``corpus.relative`` is the corpus's path relative to the index folder's parent (a moved pair of folders still
finds it); ``videos`` holds each video's signature when the index was built
(:meth:`~momentsearch.data.corpus_folder.CorpusFolder.video_signature`); ``search`` how the index is searched
(:class:`SearchSettings`: the videos the localizer sees per query, NMS's tIoU threshold), written when it is built
(from the model's run, or the defaults); an ``index.json`` written before it had them is searched as its model's
run said.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from momentsearch.errors import SearchIndexError
from momentsearch.fileio import write_json
from momentsearch.readers import read_json

INDEX_FILE = "index.json"
INDEX_FORMAT = "momentsearch-index"
INDEX_FOLDER_VERSION = 1


@dataclass(frozen=True)
class CorpusRef:
    path: str = ""
    relative: str = ""
    fingerprint: str = ""
    encoder: dict[str, Any] = field(default_factory=dict)


K_VIDEOS = 100  # videos the localizer sees per query, where a run says nothing (TrainConfig's default)
NMS_THRESHOLD = 0.7  # temporal NMS's tIoU threshold, likewise


@dataclass(frozen=True)
class SearchSettings:
    k_videos: int = K_VIDEOS
    nms_threshold: float = NMS_THRESHOLD

    def __post_init__(self) -> None:
        if not (type(self.k_videos) is int and self.k_videos >= 1 and type(self.nms_threshold) in (int, float)
                and 0 <= self.nms_threshold <= 1):
            raise SearchIndexError(f"search settings: k_videos {str(self.k_videos)[:40]!r} and nms_threshold "
                                   f"{str(self.nms_threshold)[:40]!r}; expected an int >= 1 and a number in [0, 1]")


@dataclass(frozen=True)
class IndexInfo:
    family: str
    model_fingerprint: str
    corpus: CorpusRef
    videos: dict[str, str]  # video id -> its signature when indexed
    model_source: str = ""
    text_encoder: dict[str, Any] | None = None  # the query encoder's identity (text.query_encoders)
    model_features: dict[str, Any] | None = None
    n_videos: int = 0
    n_clips: int = 0
    search: SearchSettings | None = None  # None: an index.json written before the settings were stored

    @classmethod
    def read(cls, folder: str | Path) -> IndexInfo:
        f = Path(folder) / INDEX_FILE
        d = read_json(f, lambda m: SearchIndexError(f"{m}; build the index again"), "index file")
        if not isinstance(d, dict) or d.get("format") != INDEX_FORMAT:
            raise SearchIndexError(f"{f}: not a momentsearch index folder")
        if d.get("version") != INDEX_FOLDER_VERSION:
            raise SearchIndexError(f"{f}: index folder version {d.get('version')!r}, this momentsearch reads "
                                   f"{INDEX_FOLDER_VERSION}; build it again with `momentsearch index`")
        for key, kind in (("family", str), ("model_fingerprint", str), ("corpus", dict), ("videos", dict)):
            if not isinstance(d.get(key), kind):
                raise SearchIndexError(f"{f}: field {key!r} missing or not a {kind.__name__}")
        if not all(isinstance(v, str) for v in d["videos"].values()):
            raise SearchIndexError(f"{f}: field 'videos' must map video ids to signatures (strings)")
        c = d["corpus"]
        if not all(isinstance(c.get(k, ""), str) for k in ("path", "relative", "fingerprint")) or not isinstance(
                c.get("encoder", {}), dict):
            raise SearchIndexError(f"{f}: corpus.path, corpus.relative and corpus.fingerprint must be strings, "
                                   "corpus.encoder an object")
        for key in ("text_encoder", "model_features"):
            if not isinstance(d.get(key), (dict, type(None))):
                raise SearchIndexError(f"{f}: field {key!r} must be an object or null")
        counts = [d.get(k, 0) for k in ("n_videos", "n_clips")]
        if not all(type(n) is int and n >= 0 for n in counts) or not isinstance(d.get("model_source", ""), str):
            raise SearchIndexError(f"{f}: n_videos and n_clips must be integers >= 0, model_source a string")
        search = d.get("search")
        if search is not None:
            if not isinstance(search, dict) or set(search) - {"k_videos", "nms_threshold"}:
                raise SearchIndexError(f"{f}: field 'search' must be an object of k_videos and nms_threshold")
            try:
                search = SearchSettings(**search)
            except SearchIndexError as e:
                raise SearchIndexError(f"{f}: {e}") from None
        return cls(d["family"], d["model_fingerprint"],
                   CorpusRef(c.get("path", ""), c.get("relative", ""), c.get("fingerprint", ""), c.get("encoder", {})),
                   d["videos"], d.get("model_source", ""), d.get("text_encoder"), d.get("model_features"), *counts,
                   search)

    def write(self, folder: str | Path) -> Path:
        """``folder/index.json`` (atomically; the caller makes the folder a set)."""
        out = Path(folder) / INDEX_FILE
        write_json(out, {"format": INDEX_FORMAT, "version": INDEX_FOLDER_VERSION, **asdict(self)}, indent=1)
        return out
