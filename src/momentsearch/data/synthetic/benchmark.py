"""Write a synthetic benchmark to a folder, in the same formats as the real data, and read it back.

Folder layout::

    benchmark.yaml                  the config used, the stats, the format version
    concepts.json                   the concept inventory and the oracle's weights
    corpus.jsonl                    momentsearch's generic corpus (events and concepts in meta)
    tvr/tvr_<split>_release.jsonl   the same queries in TVR's format (desc_id, desc, vid_name, ...)
    tvr/tvr_video2dur_idx.json      TVR's corpus file: {split: {vid: [duration, index]}}
    tvr/tvqa_preprocessed_subtitles.jsonl   subtitles in TVR/TVQA's format
    features/visual.h5              fp16 (clips, feature_dim), one dataset per video id
    features/subtitle.h5            fp16 (clips, subtitle_dim), when subtitles are on

Every file is written atomically; a run that dies leaves no half-written file in place.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from tqdm import tqdm

from momentsearch.config import from_dict, to_dict
from momentsearch.data.corpus import Corpus, Moment, Video
from momentsearch.data.feature_writers import HDF5FeatureWriter
from momentsearch.data.features import FeatureStore
from momentsearch.data.loaders.jsonl import (
    iter_jsonl_videos,
    jsonl_corpus_name,
    load_jsonl_corpus,
    write_jsonl_corpus,
)
from momentsearch.data.synthetic.concepts import Inventory
from momentsearch.data.synthetic.config import SyntheticConfig
from momentsearch.data.synthetic.oracle import SyntheticOracle
from momentsearch.data.synthetic.stream import CorpusStream, made_videos, tvr_release_record, tvr_subtitles_record
from momentsearch.errors import DatasetError, MomentSearchError
from momentsearch.fileio import atomic_dir, atomic_open, write_json, write_jsonl
from momentsearch.readers import read_yaml

FORMAT_VERSION = 1


def assign_splits(cfg: SyntheticConfig) -> list[str]:
    """Split of every video index: a seeded permutation cut by the split fractions."""
    rng = np.random.default_rng([cfg.seed, 0, 1])
    order = rng.permutation(cfg.n_videos)
    names = list(cfg.splits)
    bounds = np.round(np.cumsum([cfg.splits[n] for n in names]) * cfg.n_videos).astype(int)
    out = [""] * cfg.n_videos
    start = 0
    for name, end in zip(names, bounds, strict=True):
        for i in order[start:end]:
            out[int(i)] = name
        start = end
    return out


def generate(cfg: SyntheticConfig, out_dir: str | Path, progress: bool = True, workers: int = 1) -> Path:
    """Generate the benchmark described by ``cfg`` into ``out_dir``; returns the folder.

    The benchmark is written into a temporary folder beside ``out_dir`` and swapped in as a whole, so
    a run killed half-way leaves the old benchmark (or none), never a mix. Videos are streamed to disk as
    they are made (memory stays that of a few hundred videos), by ``workers`` processes when more than one
    (the same files for any number). Over an existing
    benchmark, files it holds that generation does not write (the query-feature cache) are kept. A
    non-empty folder that is not a benchmark is refused: its files would be replaced.
    """
    out = Path(out_dir)
    if out.is_dir() and any(out.iterdir()) and not (out / "benchmark.yaml").is_file():
        raise MomentSearchError(f"{out}: a non-empty folder that is not a synthetic benchmark; name a new or empty "
                                "folder (generation replaces the folder as a whole)")
    with atomic_dir(out) as root:
        _generate_into(cfg, root, progress, workers)
        if out.is_dir():
            _keep_extras(out, root)
    return out


def _keep_extras(old: Path, new: Path) -> None:
    """Move what the old benchmark folder holds and the new one lacks (caches), one folder level deep."""
    for p in [*old.iterdir(), *((old / "features").iterdir() if (old / "features").is_dir() else [])]:
        rel = p.relative_to(old)
        if not (new / rel).exists() and not (p.name.startswith(".") and p.name.endswith((".tmp", ".old"))):
            (new / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(p, new / rel)


def _generate_real_captions(cfg: SyntheticConfig, out: Path, progress: bool) -> None:
    """The ``source: charades-sta`` preset (:mod:`momentsearch.data.synthetic.charades`), in the same layout."""
    from momentsearch.data.synthetic.charades import generate_charades_into

    t0 = time.time()
    corpus = generate_charades_into(cfg, out, progress)
    write_jsonl_corpus(corpus, out / "corpus.jsonl")
    write_tvr_files(corpus, out / "tvr")
    stats = corpus.stats()
    info = {"format": "momentsearch-synthetic", "version": FORMAT_VERSION, "config": to_dict(cfg),
            "stats": {k: stats[k] for k in ("n_queries", "n_videos", "splits", "video_duration_s", "span_length_s")},
            "n_events": sum(len(v.meta["actions"]) for v in corpus.videos.values()),
            "seconds_to_generate": round(time.time() - t0, 2)}
    with atomic_open(out / "benchmark.yaml") as fh:
        yaml.safe_dump(info, fh, sort_keys=False)


def _generate_into(cfg: SyntheticConfig, out: Path, progress: bool, workers: int = 1) -> None:
    if cfg.source:
        return _generate_real_captions(cfg, out, progress)
    t0 = time.time()
    inv = Inventory()
    feats = out / "features"
    attrs = {"clip_length": cfg.clip_length}
    stream = CorpusStream(out, f"synthetic-{cfg.name}")
    n_events = 0
    with contextlib.ExitStack() as stack:
        vis_w = stack.enter_context(HDF5FeatureWriter(feats / "visual.h5", cfg.feature_dim, attrs=attrs))
        sub_w = stack.enter_context(HDF5FeatureWriter(feats / "subtitle.h5", cfg.subtitle_dim, attrs=attrs)) \
            if cfg.subtitles else None
        made = made_videos(cfg, assign_splits(cfg), workers)
        for v, ms, vis, sub in tqdm(made, total=cfg.n_videos, desc=f"generating {cfg.name}", unit="video",
                                            disable=not progress, mininterval=1.0):
            stream.add(v, ms)
            n_events += len(v.meta["events"])
            vis_w.add(v.video_id, vis)
            if sub_w is not None and sub is not None:
                sub_w.add(v.video_id, sub)
    stats = stream.close()
    write_json(out / "concepts.json", {"inventory": inv.to_dict(), "oracle": to_dict(cfg.oracle)})
    info = {"format": "momentsearch-synthetic", "version": FORMAT_VERSION, "config": to_dict(cfg), "stats": stats,
            "n_events": n_events, "seconds_to_generate": round(time.time() - t0, 2)}
    with atomic_open(out / "benchmark.yaml") as fh:
        yaml.safe_dump(info, fh, sort_keys=False)


def write_tvr_files(corpus: Corpus, folder: Path) -> None:
    """The corpus in TVR's formats, so that ``load_tvr`` reads the synthetic data unchanged."""
    folder.mkdir(parents=True, exist_ok=True)
    video2dur: dict[str, dict[str, list[float | int]]] = {}
    for i, v in enumerate(corpus.videos.values()):
        video2dur.setdefault(v.split or "all", {})[v.video_id] = [v.duration, i]
    write_json(folder / "tvr_video2dur_idx.json", video2dur, indent=None)
    for split in corpus.splits:
        write_jsonl(folder / f"tvr_{split}_release.jsonl", (
            tvr_release_record(m, corpus.videos[m.video_id].duration)  # type: ignore[index]
            for m in corpus.moments if m.split == split
        ))
    write_jsonl(folder / "tvqa_preprocessed_subtitles.jsonl",
                (tvr_subtitles_record(v) for v in corpus.videos.values() if v.subtitles))


def benchmark_stats(root: str | Path) -> dict[str, Any]:
    """The counts generation recorded in ``benchmark.yaml`` (videos, queries, splits, durations)."""
    info = _read_info(Path(root))
    if not isinstance(info.get("stats"), dict):
        raise DatasetError(f"{Path(root) / 'benchmark.yaml'}: no 'stats' mapping; generate the folder again")
    return info["stats"]


def _read_info(r: Path) -> dict[str, Any]:
    """``benchmark.yaml``, checked to be this format's version."""
    meta_path = r / "benchmark.yaml"
    if not meta_path.is_file():
        raise DatasetError(f"{r}: not a synthetic benchmark folder (no benchmark.yaml); "
                           f"make one with `momentsearch generate --preset default --out {r}`")
    info = read_yaml(meta_path, DatasetError, "benchmark file")
    if not isinstance(info, dict) or info.get("version") != FORMAT_VERSION:
        got = info.get("version") if isinstance(info, dict) else None
        raise DatasetError(f"{meta_path}: benchmark format version {str(got)[:40]}, expected {FORMAT_VERSION}; "
                           "generate the folder again")
    return info


@dataclass
class SyntheticBenchmark:
    """A generated benchmark folder: corpus, features and oracle. The corpus is read on first use, so a
    generated million can be walked video by video (:meth:`iter_videos`) without holding it."""

    root: Path
    config: SyntheticConfig
    _corpus: Corpus | None = field(default=None, repr=False)

    @classmethod
    def load(cls, root: str | Path) -> SyntheticBenchmark:
        r = Path(root)
        cfg = cls.config_of(r)
        if not (r / "corpus.jsonl").is_file():
            raise DatasetError(f"{r}: corpus.jsonl is missing; generate the folder again")
        return cls(r, cfg)

    @property
    def corpus(self) -> Corpus:
        if self._corpus is None:
            self._corpus = load_jsonl_corpus(self.root / "corpus.jsonl")
        return self._corpus

    @property
    def name(self) -> str:
        """The corpus's name (its file's header), without reading the corpus."""
        return self._corpus.name if self._corpus is not None else jsonl_corpus_name(self.root / "corpus.jsonl")

    def iter_videos(self, split: str | None = None) -> Iterator[tuple[Video, list[Moment]]]:
        """Each video of ``split`` (None: every split) with its moments, read from ``corpus.jsonl`` line by line
        (memory: one video's), or from the corpus when it is already read."""
        if self._corpus is not None:
            yield from (self._corpus.split(split) if split else self._corpus).iter_videos()
            return
        for v, moments in iter_jsonl_videos(self.root / "corpus.jsonl"):
            if split is None or v.split == split:
                yield v, moments

    @staticmethod
    def config_of(root: str | Path) -> SyntheticConfig:
        """The config a benchmark folder was generated with, without reading its corpus."""
        meta_path = Path(root) / "benchmark.yaml"
        info = _read_info(Path(root))
        if not isinstance(info.get("config"), dict):
            raise DatasetError(f"{meta_path}: field 'config' missing or not a mapping")
        return from_dict(SyntheticConfig, info["config"], f"{meta_path}: config")

    def features(self) -> FeatureStore:
        sub = self.root / "features" / "subtitle.h5"
        return FeatureStore(self.root / "features" / "visual.h5", sub if sub.exists() else None)

    def oracle(self, split: str | None = None) -> Any:
        """The graded truth: the synthetic oracle, or for the charades preset the action-class oracle."""
        corpus = self.corpus.split(split) if split else self.corpus
        if self.config.source:
            from momentsearch.data.synthetic.charades import ActionClassOracle

            return ActionClassOracle(corpus)
        return SyntheticOracle(corpus, Inventory(), self.config.oracle)

    def write_ranking(self, path: str | Path, split: str = "test", min_relevance: float = 0.5,
                      layout: str = "grouped") -> int:
        """The oracle's graded moments of ``split`` (relevance >= ``min_relevance``) as a TVR-Ranking file
        in ``layout`` (the released files' grouped one, or flat pairs): grade = 4 x relevance,
        ``caption`` = an annotated description of that event where one exists. Returns the number of pairs."""
        from momentsearch.data.loaders.tvr_ranking import write_tvr_ranking

        corpus = self.corpus.split(split)
        rel = self.oracle(split).moment_relevance(min_relevance)
        captions: dict[tuple[str, float, float], str] = {}
        for m in corpus.moments:
            if m.video_id is not None and m.spans:
                captions.setdefault((m.video_id, *m.spans[0]), m.text)
        return write_tvr_ranking(path, rel, {m.query_id: m.text for m in corpus.moments},
                                 {v.video_id: v.duration for v in corpus.videos.values()}, captions, layout)
