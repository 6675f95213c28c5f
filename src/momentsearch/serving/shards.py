"""A sharded index: one model's index split by video into shard folders, each a whole index folder.

    SHARDED/
      shards.json   {"format": "momentsearch-shards", "version": 1, "family": ..., "model_fingerprint": ...,
                     "shards": [{"path": "shard_000", "n_videos": V, "n_clips": N}, ...]}
      shard_000/    an index folder (index.json, model.pt, arrays/, first_stage/) over some of the videos
      shard_001/    ...

A video's score is the best of its own clips and its moments are its own, so an index split by video merges
exactly (:mod:`~momentsearch.serving.sharded`). ``momentsearch shard INDEX --into N --out SHARDED`` splits an
index folder into N shards of about equal clips (a ``scan`` first stage is carried over: the codebooks stay, each
shard keeps its videos' codes); ``momentsearch shard-add SHARDED NEW_INDEX`` adds an index folder built by the
same model over new videos as one more shard, without touching the others. A shard's ``path`` is relative to the
manifest's folder, or absolute. Everything is checked by name before a search: a shard that is missing, damaged,
built by another model or holding a video of another shard is a :class:`~momentsearch.errors.ShardError`.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from momentsearch.errors import SearchIndexError, ShardError
from momentsearch.fileio import atomic_dir, write_json
from momentsearch.readers import exists, is_file, read_json_object
from momentsearch.search.index import VideoIndex
from momentsearch.serving.index_info import INDEX_FILE, CorpusRef, IndexInfo

SHARDS_FILE = "shards.json"
SHARDS_FORMAT = "momentsearch-shards"
SHARDS_VERSION = 1


@dataclass(frozen=True)
class ShardEntry:
    path: str  # relative to the manifest's folder, or absolute
    n_videos: int
    n_clips: int


@dataclass(frozen=True)
class ShardManifest:
    family: str
    model_fingerprint: str
    shards: tuple[ShardEntry, ...]

    @property
    def n_videos(self) -> int:
        return sum(s.n_videos for s in self.shards)

    def folder_of(self, root: Path, entry: ShardEntry) -> Path:
        return Path(entry.path) if os.path.isabs(entry.path) else root / entry.path

    @classmethod
    def read(cls, root: str | Path) -> ShardManifest:
        f = Path(root) / SHARDS_FILE
        d = read_json_object(f, lambda m: ShardError(f"{m}; write it again with `momentsearch shard`"), "shard manifest")
        if d.get("format") != SHARDS_FORMAT:
            raise ShardError(f"{f}: not a momentsearch shard manifest (format {str(d.get('format'))[:40]!r})")
        if d.get("version") != SHARDS_VERSION:
            raise ShardError(f"{f}: shard manifest version {str(d.get('version'))[:20]!r}, this momentsearch reads "
                             f"{SHARDS_VERSION}")
        for key in ("family", "model_fingerprint"):
            if not isinstance(d.get(key), str) or not d[key]:
                raise ShardError(f"{f}: field {key!r} missing or not a non-empty string")
        shards = d.get("shards")
        if not isinstance(shards, list) or not shards:
            raise ShardError(f"{f}: field 'shards' must be a non-empty list of {{path, n_videos, n_clips}}")
        out, seen = [], set()
        for i, s in enumerate(shards):
            if not isinstance(s, dict) or set(s) != {"path", "n_videos", "n_clips"}:
                raise ShardError(f"{f}: shard {i} must be an object of exactly path, n_videos and n_clips")
            p, v, n = s["path"], s["n_videos"], s["n_clips"]
            if not isinstance(p, str) or not p or "\0" in p or len(p) > 4096:
                raise ShardError(f"{f}: shard {i}: path must be a non-empty folder name")
            if not (type(v) is int and type(n) is int and 1 <= v <= n):
                raise ShardError(f"{f}: shard {i} ({p[:80]!r}): n_videos and n_clips must be integers with "
                                 f"1 <= n_videos <= n_clips, got {str(v)[:20]} and {str(n)[:20]}")
            if os.path.normpath(p) in seen:
                raise ShardError(f"{f}: shard {p[:80]!r} is listed twice")
            seen.add(os.path.normpath(p))
            out.append(ShardEntry(p, v, n))
        return cls(d["family"], d["model_fingerprint"], tuple(out))

    def write(self, root: str | Path) -> Path:
        out = Path(root) / SHARDS_FILE
        write_json(out, {"format": SHARDS_FORMAT, "version": SHARDS_VERSION, "family": self.family,
                         "model_fingerprint": self.model_fingerprint,
                         "shards": [{"path": s.path, "n_videos": s.n_videos, "n_clips": s.n_clips}
                                    for s in self.shards]}, indent=1)
        return out


def is_sharded(path: str | Path) -> bool:
    return exists(Path(path) / SHARDS_FILE)


def check_shard(root: Path, manifest: ShardManifest, entry: ShardEntry) -> IndexInfo:
    """The shard's ``index.json``, refused by name when the folder is missing, damaged, of another model, or
    holds other counts than the manifest says."""
    folder = manifest.folder_of(root, entry)
    name = f"shard {entry.path!r} of {root}"
    if not is_file(folder / INDEX_FILE) or not is_file(folder / "model.pt"):
        raise ShardError(f"{name}: not an index folder (index.json or model.pt missing at {folder})")
    try:
        info = IndexInfo.read(folder)
    except SearchIndexError as e:
        raise ShardError(f"{name}: {e}") from None
    if info.family != manifest.family or info.model_fingerprint != manifest.model_fingerprint:
        raise ShardError(f"{name}: built by another model ({info.family} {info.model_fingerprint[:12]}) than the "
                         f"manifest's ({manifest.family} {manifest.model_fingerprint[:12]}); shard that model's index")
    if (info.n_videos, info.n_clips) != (entry.n_videos, entry.n_clips):
        raise ShardError(f"{name}: holds {info.n_videos} videos and {info.n_clips} clips, the manifest says "
                         f"{entry.n_videos} and {entry.n_clips}: the folder was changed since it was sharded")
    return info


def check_sharded(root: str | Path) -> tuple[ShardManifest, list[IndexInfo]]:
    """The manifest and every shard's ``index.json``, each checked (:func:`check_shard`), and no video in two shards."""
    root = Path(root)
    manifest = ShardManifest.read(root)
    infos = [check_shard(root, manifest, e) for e in manifest.shards]
    owner: dict[str, str] = {}
    for e, info in zip(manifest.shards, infos, strict=True):
        for v in info.videos:
            if owner.setdefault(v, e.path) != e.path:
                raise ShardError(f"{root}: video {v[:80]!r} is in shard {owner[v]!r} and in shard {e.path!r}")
    return manifest, infos


def clip_balanced_ranges(offsets: np.ndarray, n: int) -> list[tuple[int, int]]:
    """``n`` runs of consecutive videos [a, b) with about equal clips each (every run holds a video)."""
    v = len(offsets) - 1
    if not 1 <= n <= v:
        raise ShardError(f"cannot split {v} videos into {n} shards: ask for 1 to {v}")
    cuts = np.searchsorted(offsets, np.linspace(0, offsets[-1], n + 1)[1:-1], side="left")
    bounds = [0, *np.clip(cuts, 1, v - 1).tolist(), v]
    for i in range(1, n):  # each run holds at least one video
        bounds[i] = min(max(bounds[i], bounds[i - 1] + 1), v - (n - i))
    return [(bounds[i], bounds[i + 1]) for i in range(n)]


def index_range(index: VideoIndex, a: int, b: int) -> VideoIndex:
    """Videos ``a:b`` of ``index`` as an index of their own (views of its arrays, offsets from 0)."""
    lo, hi = int(index.offsets[a]), int(index.offsets[b])
    return VideoIndex(index.video_ids[a:b], index.durations[a:b], index.clip_lengths[a:b],
                      np.asarray(index.offsets[a: b + 1], np.int64) - lo,
                      {k: x[lo:hi] for k, x in index.arrays.items()},
                      {k: x[a:b] for k, x in index.video_arrays.items()}, dict(index.meta))


def _link_or_copy(src: Path, dst: Path) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def split_index(index_dir: str | Path, into: int, out: str | Path, progress: bool = False) -> ShardManifest:
    """``index_dir`` (an index folder) split by video into ``into`` shard folders under ``out`` with their
    manifest, written as a set. Each shard's ``scan`` first stages are carried over from the index's."""
    from momentsearch.serving.indexing import IndexFolder, carry_first_stages

    src = IndexFolder.open(index_dir)
    out = Path(out)
    if out.resolve() == src.root.resolve() or src.root.resolve() in out.resolve().parents:
        raise ShardError(f"{out}: write the shards beside the index folder, not over or inside it")
    idx, info = src.index, src.info
    entries = []
    with atomic_dir(out) as tmp:
        for i, (a, b) in enumerate(clip_balanced_ranges(np.asarray(idx.offsets), into)):
            name = f"shard_{i:03d}"
            part = index_range(idx, a, b)
            part.save(tmp / name / "arrays")
            ids = part.video_ids
            n_clips = int(part.offsets[-1])
            corpus = CorpusRef(info.corpus.path, os.path.relpath(Path(info.corpus.path), out.resolve()) if
                               info.corpus.path else info.corpus.relative, info.corpus.fingerprint, info.corpus.encoder)
            IndexInfo(info.family, info.model_fingerprint, corpus, {v: info.videos[v] for v in ids}, info.model_source,
                      info.text_encoder, info.model_features, len(ids), n_clips, info.search).write(tmp / name)
            _link_or_copy(src.root / "model.pt", tmp / name / "model.pt")
            carry_first_stages(src, VideoIndex.load(tmp / name / "arrays"), np.arange(a, b), tmp / name / "first_stage",
                               progress)
            entries.append(ShardEntry(name, len(ids), n_clips))
        manifest = ShardManifest(info.family, info.model_fingerprint, tuple(entries))
        manifest.write(tmp)
    return manifest


def add_shard(sharded: str | Path, index_dir: str | Path) -> ShardManifest:
    """The index folder ``index_dir`` (the same model, over videos no shard holds) copied in as the next shard.
    The manifest is replaced last, so a failed copy leaves the sharded index as it was."""
    root = Path(sharded)
    manifest, infos = check_sharded(root)
    new = Path(index_dir)
    try:
        info = IndexInfo.read(new)
    except SearchIndexError as e:
        raise ShardError(f"{new}: {e}") from None
    if info.model_fingerprint != manifest.model_fingerprint:
        raise ShardError(f"{new}: built by another model ({info.family} {info.model_fingerprint[:12]}) than the "
                         f"shards' ({manifest.family} {manifest.model_fingerprint[:12]}); index the new videos with "
                         "the shards' model (any shard's model.pt)")
    held = [v for v in info.videos if any(v in i.videos for i in infos)]
    if held:
        raise ShardError(f"{new}: {len(held)} of its videos are already in a shard (e.g. {held[0][:80]!r}); index "
                         "only the new videos")
    name = f"shard_{len(manifest.shards):03d}"
    while exists(root / name):
        name += "_"
    with atomic_dir(root / name) as tmp:
        shutil.copytree(new, tmp, dirs_exist_ok=True, copy_function=_link_or_copy)
    grown = ShardManifest(manifest.family, manifest.model_fingerprint,
                          (*manifest.shards, ShardEntry(name, info.n_videos, info.n_clips)))
    grown.write(root)
    return grown


def index_sharded(checkpoint: str | Path, corpus: str | Path, out: str | Path, shards: int, device: str = "auto",
                  progress: bool = True) -> ShardManifest:
    """``momentsearch index CHECKPOINT --corpus C --out OUT --shards N``. A new ``out``: the corpus indexed, then
    split into ``shards``. A sharded ``out`` over a grown or changed corpus: each shard built again over its own
    videos still in the corpus (only what changed is encoded; a shard left with none is dropped), and the videos
    no shard holds indexed as one new shard; ``shards`` applies to a new ``out`` only. The manifest is replaced
    last."""
    from momentsearch.data.corpus_folder import CorpusFolder
    from momentsearch.serving.checkpoint import load_checkpoint
    from momentsearch.serving.indexing import build_index

    out = Path(out)
    if not is_sharded(out):
        if exists(out) and any(out.iterdir()):
            raise ShardError(f"{out}: a folder that is not a sharded index; name a new folder for --shards")
        tmp = out.parent / f".{out.name}.whole"
        try:
            build_index(checkpoint, corpus, tmp, device, progress)
            return split_index(tmp, shards, out, progress)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    manifest, infos = check_sharded(out)
    fingerprint = load_checkpoint(checkpoint).fingerprint
    if fingerprint != manifest.model_fingerprint:
        raise ShardError(f"{out}: its shards were built by model {manifest.model_fingerprint[:12]}, not by {checkpoint} "
                         f"({fingerprint[:12]}); index into a new folder")
    ids = CorpusFolder.open(corpus).video_ids
    entries, held = [], set()
    for e, info in zip(manifest.shards, infos, strict=True):
        mine = [v for v in ids if v in info.videos]
        held.update(info.videos)
        if mine:
            build_index(checkpoint, corpus, manifest.folder_of(out, e), device, progress, videos=mine)
            now = IndexInfo.read(manifest.folder_of(out, e))
            entries.append(ShardEntry(e.path, now.n_videos, now.n_clips))
    new = [v for v in ids if v not in held]
    if new:
        name = f"shard_{len(manifest.shards):03d}"
        while exists(out / name):
            name += "_"
        build_index(checkpoint, corpus, out / name, device, progress, videos=new)
        now = IndexInfo.read(out / name)
        entries.append(ShardEntry(name, now.n_videos, now.n_clips))
    if not entries:
        raise ShardError(f"{corpus}: the corpus holds none of the videos; nothing to index")
    grown = ShardManifest(manifest.family, manifest.model_fingerprint, tuple(entries))
    grown.write(out)
    return grown
