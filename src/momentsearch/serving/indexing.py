"""An index folder: one model over one corpus — ``momentsearch index CHECKPOINT --corpus DIR --out INDEX``.

    INDEX/
      index.json   format, the family, the model's fingerprint (by content), its text encoder and the
                   features it was trained on, the corpus (path, fingerprint, encoder) and each
                   video's signature
      model.pt     the checkpoint (without optimizer state): an index searches on its own, with the search
                   settings index.json records (k_videos, nms_threshold: the model's run's, or the defaults)
      arrays/      the family's encoded corpus (a VideoIndex: named per-clip arrays, time grids)

A model trained on features of another encoder or dim is refused, naming both. Building again over
a grown corpus encodes only the videos the index lacks or whose features changed, and drops the
videos the corpus lost; its ``scan`` first stage (``first_stage/scan_*``) grows with it (kept videos
keep their codes, new ones are coded with the same codebooks) instead of being built again. The
folder is written as a set (``.INDEX.partial`` beside it, renamed over the old when done). A build that is
killed goes on from its last written part when run again with the same weights, corpus and videos
(``build.progress.json`` there); a lock refuses a second build of the same folder meanwhile.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from momentsearch.console import say
from momentsearch.data.corpus_folder import CorpusFolder
from momentsearch.device import resolve_device
from momentsearch.errors import SearchIndexError
from momentsearch.fileio import replace_dir, write_json
from momentsearch.readers import read_json_object
from momentsearch.search.index import IndexWriter, VideoIndex
from momentsearch.search.stages import provides
from momentsearch.serving.checkpoint import Checkpoint, load_checkpoint
from momentsearch.serving.index_info import INDEX_FILE, CorpusRef, IndexInfo
from momentsearch.text.query_encoders import describe_query_encoder, same_query_encoder

PART_VIDEOS = 2048  # videos encoded and written at a time: memory stays that of a part, not of the corpus
PROGRESS = "build.progress.json"  # in an unfinished build's folder: the videos written so far (resumed from)


@dataclass
class IndexReport:
    folder: Path
    encoded: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    first_stages_grown: int = 0  # scan stages carried over to the new videos instead of rebuilt
    resumed: int = 0  # videos an interrupted build of the same index had written, not encoded again

    def summary(self) -> str:
        grown = f"; {self.first_stages_grown} scan first stage(s) grown" if self.first_stages_grown else ""
        resumed = f"; resumed an interrupted build at video {self.resumed}" if self.resumed else ""
        return (f"index {self.folder}: {len(self.encoded)} video(s) encoded, {len(self.kept)} kept, "
                f"{len(self.removed)} removed{grown}{resumed}")


def is_index_folder(path: str | Path) -> bool:
    return (Path(path) / INDEX_FILE).is_file()


def read_index_info(folder: str | Path) -> IndexInfo:
    """The folder's ``index.json`` (:class:`~momentsearch.serving.index_info.IndexInfo`)."""
    return IndexInfo.read(folder)


def check_compatible(ckpt: Checkpoint, corpus: CorpusFolder, where: str) -> None:
    """Refuse a model that cannot read the corpus's features, naming both sides."""
    dims = {k: int(s["dim"]) for k, s in corpus.streams.items()}
    why = ckpt.family.check_features(ckpt.features, corpus.encoder, dims, corpus.streams)
    if why is not None:
        raise SearchIndexError(f"{where}: the model {ckpt.path} cannot search the corpus {corpus.root}: {why}")
    ds = ckpt.dataset()
    if ds is not None and ds.query_features:
        raise SearchIndexError(f"{ckpt.path}: trained on precomputed query features ({ds.query_features}), "
                               "so it cannot take free text; train it on MiniLM features to search with words")


def _subset(index: VideoIndex, rows: list[int]) -> list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]:
    """Per video of ``rows``: (its per-clip arrays, its per-video arrays)."""
    out = []
    for r in rows:
        a, b = int(index.offsets[r]), int(index.offsets[r + 1])
        out.append(({k: np.asarray(v[a:b]) for k, v in index.arrays.items()},
                    {k: np.asarray(v[r: r + 1]) for k, v in index.video_arrays.items()}))
    return out


def _merge(ids: list[str], durations: list[float], clip_lengths: list[float],
           parts: list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]], meta: dict[str, Any]) -> VideoIndex:
    n = [len(next(iter(p[0].values()))) if p[0] else 0 for p in parts]
    offsets = np.zeros(len(parts) + 1, np.int64)
    offsets[1:] = np.cumsum(n)
    names = parts[0][0].keys() if parts else []
    vnames = parts[0][1].keys() if parts else []
    arrays = {k: np.concatenate([p[0][k] for p in parts]) for k in names}
    varrays = {k: np.concatenate([p[1][k] for p in parts]) for k in vnames}
    return VideoIndex(ids, np.asarray(durations, np.float64), np.asarray(clip_lengths, np.float64), offsets, arrays,
                      varrays, meta)


def _build_key(*parts: Any) -> str:
    """What an interrupted build must share with this one to be resumed: weights, corpus, videos, reused rows."""
    return hashlib.sha1(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def folder_size(path: Path) -> str:
    """What a folder's files hold on disk (sparse files count what they allocate), as "3.0 MiB" or "33.1 GiB"."""
    n = sum(f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file())
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB"


def _lock(out: Path) -> Any:
    """Held while a build writes ``out``: a second build of the same folder is refused, not interleaved."""
    import fcntl

    out.parent.mkdir(parents=True, exist_ok=True)
    fh = (out.parent / f".{out.name}.partial.lock").open("a")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        raise SearchIndexError(f"{out}: another `momentsearch index` is writing this index; wait for it") from None
    return fh


def _partial(out: Path, key: str, n_videos: int) -> tuple[Path, int, dict[str, Any]]:
    """The folder a build writes into (``.OUT.partial`` beside ``out``, renamed over it when done), the videos an
    interrupted build of the same ``key`` wrote there (0: a fresh folder) and the index meta it had. Its last part
    is always encoded again, so the files are reopened by a write."""
    tmp = out.parent / f".{out.name}.partial"
    prog: dict[str, Any] = {}
    try:
        prog = read_json_object(tmp / PROGRESS, SearchIndexError, "index build progress")
        done = prog["videos"] if prog.get("key") == key and isinstance(prog.get("meta"), dict) else 0
        done = min(done, n_videos - 1) if type(done) is int and done > 0 else 0
    except (SearchIndexError, KeyError):
        done = 0
    done -= done % PART_VIDEOS  # whole parts only, the last one always again
    if not done:
        if tmp.exists():
            say(f"{out}: discarding {tmp.name}, an interrupted build of other weights, corpus or videos "
                f"({folder_size(tmp)})")
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        say(f"{out}: resuming the interrupted build in {tmp.name}: {done} of {n_videos} videos on disk")
    tmp.mkdir(parents=True, exist_ok=True)
    return tmp, done, prog["meta"] if done else {}


def _old_index(out: Path, ckpt: Checkpoint) -> tuple[VideoIndex | None, dict[str, str]]:
    """The index already at ``out`` when it was built by the same weights (reusable rows), else None."""
    if not is_index_folder(out):
        return None, {}
    try:
        info = read_index_info(out)
        if info.model_fingerprint != ckpt.fingerprint:
            return None, {}
        return VideoIndex.load(out / "arrays"), info.videos
    except SearchIndexError:
        return None, {}


def build_index(checkpoint: str | Path, corpus: str | Path, out: str | Path, device: str = "auto",
                progress: bool = True, videos: Sequence[str] | None = None) -> IndexReport:
    """Encode the corpus's videos with the checkpoint's model into ``out`` (only what is new or changed);
    ``videos``: only these of the corpus's videos (a shard's, :mod:`~momentsearch.serving.shards`)."""
    dev = resolve_device(device)
    ckpt = load_checkpoint(checkpoint)
    folder = CorpusFolder.open(corpus)
    out = Path(out)
    check_compatible(ckpt, folder, str(out))
    old, old_sigs = _old_index(out, ckpt)
    report = IndexReport(out)
    chosen = None if videos is None else set(videos)
    corpus_ids = [v for v in folder.video_ids if chosen is None or v in chosen]
    sigs = {v: folder.video_signature(v) for v in corpus_ids}
    old_rows = {v: i for i, v in enumerate(old.video_ids)} if old is not None else {}
    reuse = [v for v in corpus_ids if v in old_rows and old_sigs.get(v) == sigs[v]]
    kept = set(reuse)
    todo = [v for v in corpus_ids if v not in kept]
    report.kept, report.encoded = reuse, todo
    report.removed = sorted(set(old_sigs) - set(sigs))
    videos = {v.video_id: v for v in folder.videos()}
    ids = corpus_ids
    lengths = folder.clip_lengths()
    model = ckpt.model.to(dev).eval()
    if not ids:
        raise SearchIndexError(f"{corpus}: the corpus holds no videos to index")
    meta: dict[str, Any] = dict(old.meta) if old is not None else {}
    grid = {v: ckpt.family.index_grid(videos[v].duration, lengths[v], folder.entry(v)["n_clips"]) for v in ids}
    key = _build_key(ckpt.fingerprint, folder.fingerprint, ids, meta.get("fingerprint"), sorted(kept))
    lock = _lock(out)
    tmp, start, resumed = _partial(out, key, len(ids))  # an interrupted build of the same index goes on from there
    meta |= resumed  # the meta of the parts it encoded
    report.resumed = start
    try:
        # part by part into memory-mapped files: the index may be larger than memory
        writer = IndexWriter(tmp / "arrays", ids, [videos[v].duration for v in ids], [grid[v][0] for v in ids],
                             [grid[v][1] for v in ids])
        writer.resume(start)
        with (folder.features() if todo else contextlib.nullcontext()) as store, \
                tqdm(total=len(ids), initial=start, unit="video", desc="indexing", disable=not progress) as bar:
            for s in range(start, len(ids), PART_VIDEOS):
                chunk = ids[s: s + PART_VIDEOS]
                parts: dict[str, tuple[dict[str, np.ndarray], dict[str, np.ndarray]]] = {}
                again = [v for v in chunk if v in kept]
                if again:
                    parts.update(zip(again, _subset(old, [old_rows[v] for v in again]), strict=True))  # type: ignore[arg-type]
                fresh = [v for v in chunk if v not in kept]
                if fresh:
                    new = ckpt.family.encode_corpus(model, store, [videos[v] for v in fresh], lengths, dev, False)
                    parts.update(zip(new.video_ids, _subset(new, list(range(len(new)))), strict=True))
                    meta = dict(new.meta)
                writer.write(s, _merge(chunk, [videos[v].duration for v in chunk], [grid[v][0] for v in chunk],
                                       [parts[v] for v in chunk], {}))
                writer.flush()
                write_json(tmp / PROGRESS, {"key": key, "videos": s + len(chunk), "meta": meta})
                bar.update(len(chunk))
        meta.update(fingerprint=ckpt.fingerprint, corpus_fingerprint=folder.fingerprint)
        index = writer.close(meta)
        info = IndexInfo(ckpt.family.name, ckpt.fingerprint,
                         CorpusRef(str(folder.root.resolve()), os.path.relpath(folder.root.resolve(), out.resolve().parent),
                                   folder.fingerprint, folder.encoder),
                         sigs, str(Path(checkpoint).resolve()), ckpt.family.text_encoder, ckpt.features, len(ids),
                         int(index.offsets[-1]), ckpt.search_settings())
        dataclasses.replace(ckpt.stored, optimizer=None).write(tmp / "model.pt")
        info.write(tmp)
        if old is not None:
            old_row = np.asarray([old_rows[v] if v in kept else -1 for v in ids], np.int64)
            report.first_stages_grown = _grow_first_stages(ckpt, model, old, index, old_row, out / "first_stage",
                                                           tmp / "first_stage", dev, progress)
        del index  # its memory maps point into tmp, which is renamed next
        (tmp / PROGRESS).unlink()
        replace_dir(tmp, out)
    except SearchIndexError:
        shutil.rmtree(tmp, ignore_errors=True)  # a refused build is not resumed
        raise
    except BaseException:  # killed (Ctrl-C) or failed: say what is kept, and how to go on or free it
        if (tmp / PROGRESS).is_file():
            say(f"{out}: the build stopped; the videos written so far are kept in {tmp} ({folder_size(tmp)}). "
                f"Run the same command again to go on from there, or delete that folder to free the space.")
        raise
    finally:
        lock.close()
    return report


def _grow_first_stages(ckpt: Checkpoint, model: torch.nn.Module, old: VideoIndex, new: VideoIndex,
                       old_row: np.ndarray, old_folder: Path, new_folder: Path, device: torch.device,
                       progress: bool) -> int:
    """The old index folder's scan stages, carried over to the new index (others are built on first use)."""
    if not old_folder.is_dir():
        return 0
    retriever = ckpt.family.stages(model, new, device).retriever
    if "vectors" not in provides(retriever):
        return 0
    from momentsearch.search.first_stage.scan_build import grow_scan

    return grow_scan(old_folder, new_folder, retriever, old, old_row, progress)


@dataclass
class IndexFolder:
    """An opened index folder: its info, model and arrays, and the corpus it was built from (when still there)."""

    root: Path
    info: IndexInfo
    checkpoint: Checkpoint
    index: VideoIndex
    corpus: CorpusFolder | None

    @classmethod
    def open(cls, folder: str | Path) -> IndexFolder:
        root = Path(folder)
        if not is_index_folder(root):
            raise SearchIndexError(f"{root}: not an index folder ({INDEX_FILE} missing); build one with "
                                   f"`momentsearch index CHECKPOINT --corpus CORPUS_DIR --out {root}`")
        info = read_index_info(root)
        ckpt = load_checkpoint(root / "model.pt")
        if ckpt.fingerprint != info.model_fingerprint:
            raise SearchIndexError(f"{root}: model.pt is not the model the index was built with; build it again")
        stored, reads = info.text_encoder, ckpt.family.text_encoder
        if isinstance(stored, dict) and not same_query_encoder(stored, reads):
            raise SearchIndexError(f"{root}: the index was built for queries encoded by {describe_query_encoder(stored)}, "
                                   f"and its model reads {describe_query_encoder(reads)}; build it again with "
                                   "`momentsearch index`")
        index = VideoIndex.load(root / "arrays")
        index.check_built_by(ckpt.family.name, ckpt.fingerprint)
        if index.video_ids != list(info.videos):
            raise SearchIndexError(f"{root}: the arrays hold other videos than {INDEX_FILE} lists; build it again")
        return cls(root, info, ckpt, index, find_corpus(root, info))


def find_corpus(root: Path, info: IndexInfo) -> CorpusFolder | None:
    """The corpus by its recorded path, else relative to the index (a moved pair of folders); None if gone.
    A corpus that changed since (its fingerprint) is not used for video files: the index says what it holds."""
    for cand in (Path(info.corpus.path), root.parent / info.corpus.relative):
        try:
            c = CorpusFolder.open(cand)
        except Exception:  # noqa: BLE001 - a missing or changed corpus only loses playback, not search
            continue
        return c
    return None



def carry_first_stages(src: IndexFolder, new: VideoIndex, old_rows: np.ndarray, out: Path, progress: bool = False
                       ) -> int:
    """``src``'s ``scan`` first stages carried over to ``new``, an index of some of its videos (``old_rows[v]``:
    new video v's row in ``src``; a shard, :mod:`~momentsearch.serving.shards`), into ``out``."""
    cpu = torch.device("cpu")
    return _grow_first_stages(src.checkpoint, src.checkpoint.model.to(cpu).eval(), src.index, new,
                              np.asarray(old_rows, np.int64), src.root / "first_stage", out, cpu, progress)
