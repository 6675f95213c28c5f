"""``momentsearch.load(CHECKPOINT, split)``: a trained model searching its dataset's split, through an index folder.

The split is written once as a corpus folder (:func:`~momentsearch.data.corpus_folder.write_dataset_corpus`: its
annotations and the feature files it names) and indexed by the checkpoint into a cache beside the run, then opened
like any index folder (:func:`momentsearch.serving.loader.load`)::

    RUN/index_<split>_<checkpoint stem>/
      split.json   the split's signature when its corpus was written
      corpus/      the split as a corpus folder (its features stay where they are)
      index/       the index folder: one model over that corpus

The corpus is written again when the split's data changed (videos, time grids, feature files' sizes and times); the
index is built again (only what changed) when the checkpoint or the corpus changed. The serving core never opens a
dataset: this module is the one path from a training run's dataset to a searcher.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from momentsearch.data.corpus_folder import CorpusFolder, is_corpus_folder, write_dataset_corpus
from momentsearch.data.dataset import Dataset, open_dataset
from momentsearch.errors import CorpusFolderError, SearchIndexError
from momentsearch.fileio import write_json
from momentsearch.readers import read_json_object
from momentsearch.serving.checkpoint import load_checkpoint
from momentsearch.serving.indexing import build_index, is_index_folder, read_index_info
from momentsearch.serving.loader import load as load_index
from momentsearch.serving.searcher import Searcher

SPLIT_FILE = "split.json"


def split_cache(checkpoint: Path, split: str) -> Path:
    """Where a checkpoint's index of ``split`` is kept: beside its run's ``checkpoints/`` folder."""
    return checkpoint.parent.parent / f"index_{split}_{checkpoint.stem}"


def split_signature(dataset: Dataset, split: str) -> str:
    """Changes when the split's videos, time grids or feature files change (a regenerated dataset)."""
    corpus = dataset.split(split)
    lengths = dataset.clip_lengths(corpus)
    h = hashlib.sha1()
    h.update(json.dumps([[v.video_id, v.duration, lengths[v.video_id]] for v in corpus.videos.values()]).encode())
    for f in (dataset.config.video_features, dataset.config.subtitle_features):
        if f:
            files = sorted(Path(f).glob("*")) if Path(f).is_dir() else [Path(f)]
            for p in files:
                st = p.stat()
                h.update(f"{p.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


def _stored_signature(root: Path) -> str | None:
    try:
        d = read_json_object(root / SPLIT_FILE, SearchIndexError, "split record")
    except SearchIndexError:
        return None  # missing or damaged: the corpus is written again
    sig = d.get("signature")
    return sig if isinstance(sig, str) else None


def split_index(checkpoint: str | Path, split: str = "test", device: str = "auto", progress: bool = False) -> Path:
    """The index folder of ``split`` of the checkpoint's dataset, written or brought up to date first."""
    ckpt = load_checkpoint(checkpoint)
    dataset = open_dataset(ckpt.require_dataset())
    root = split_cache(ckpt.path, split)
    corpus_dir, index_dir = root / "corpus", root / "index"
    sig = split_signature(dataset, split)
    if not (is_corpus_folder(corpus_dir) and _stored_signature(root) == sig):
        root.mkdir(parents=True, exist_ok=True)
        write_dataset_corpus(dataset, split, corpus_dir)
        write_json(root / SPLIT_FILE, {"split": split, "signature": sig})
    try:
        corpus_fp = CorpusFolder.open(corpus_dir).fingerprint
    except CorpusFolderError:
        write_dataset_corpus(dataset, split, corpus_dir)  # damaged since: written again
        corpus_fp = CorpusFolder.open(corpus_dir).fingerprint
    current = False
    if is_index_folder(index_dir):
        try:
            info = read_index_info(index_dir)
            current = info.model_fingerprint == ckpt.fingerprint and info.corpus.fingerprint == corpus_fp
        except SearchIndexError:
            current = False  # damaged: built again
    if not current:
        build_index(ckpt.path, corpus_dir, index_dir, device, progress)
    return index_dir


def load_split(checkpoint: str | Path, split: str = "test", device: str = "auto", progress: bool = False,
               k_videos: int | None = None, cache_size: int = 4096, first_stage: str | None = None,
               first_stage_params: dict[str, str] | None = None) -> Searcher:
    """A :class:`~momentsearch.serving.searcher.Searcher` over ``split``'s videos of the dataset the checkpoint was
    trained on (the exact first stage unless ``first_stage`` says otherwise)."""
    folder = split_index(checkpoint, split, device, progress)
    return load_index(folder, device, progress, k_videos, cache_size, first_stage or "exact", first_stage_params)


def load(path: str | Path, split: str = "test", device: str = "auto", progress: bool = False,
         k_videos: int | None = None, cache_size: int = 4096, first_stage: str | None = None,
         first_stage_params: dict[str, str] | None = None) -> Searcher:
    """``path`` an index folder: :func:`momentsearch.serving.loader.load` (``split`` unused); a checkpoint:
    :func:`load_split`."""
    if is_index_folder(path):
        return load_index(path, device, progress, k_videos, cache_size, first_stage, first_stage_params)
    return load_split(path, split, device, progress, k_videos, cache_size, first_stage, first_stage_params)
