"""A dataset named by its files: annotations per split, video feature store(s), query features.

The ``dataset:`` section of a training YAML is a :class:`DatasetConfig`. Either it names a
synthetic benchmark folder (``benchmark: runs/demo/benchmark``), which fills in everything, or it
names the files, e.g. TVR's released layout::

    dataset:
      annotations:
        train: data/tvr_train_release.jsonl
        val: data/tvr_val_release.jsonl
      video_features: features/tvr_resnet152_rgb_max_i3d_rgb_max_cl-1.5.h5   # 3,072-d, one dataset per video
      subtitle_features: features/tvr_sub_pretrained_w_sub_query_max_cl-1.5.h5  # 768-d
      query_features: features/tvr_query_pretrained_w_query.h5                 # by desc_id; or empty: MiniLM
      clip_length: 1.5

Relative paths are resolved against the working directory when a run starts; checkpoints store
them absolute and relative to themselves, so a run folder that moves keeps finding its data.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from momentsearch.data.corpus import Corpus, Moment, Video
from momentsearch.data.features import FeatureStore
from momentsearch.errors import DatasetError

PATH_FIELDS = ("benchmark", "corpus", "video2dur", "subtitles", "video_features", "subtitle_features", "query_features",
               "query_cache")


@dataclass(frozen=True)
class DatasetConfig:
    benchmark: str = ""  # a synthetic benchmark folder: fills in everything below
    annotations: dict[str, str] = field(default_factory=dict)  # split name -> annotation file (any format)
    corpus: str = ""  # a corpus folder (momentsearch ingest): its feature streams and time grids replace the files below
    format: str = ""  # annotation format; "" = detected from each file
    video2dur: str = ""  # TVR: tvr_video2dur_idx.json (default: the one beside the annotation file)
    subtitles: str = ""  # TVR: the subtitle text jsonl (optional)
    video_features: str = ""  # HDF5 file (one dataset per video id) or a folder of <video_id>.npy
    subtitle_features: str = ""  # the same, for a second (subtitle) stream; "" = none
    query_features: str = ""  # HDF5 keyed by query id (TVR's RoBERTa release); "" = MiniLM from the text
    query_cache: str = ""  # where MiniLM token features are cached; "" = queries_minilm.h5 beside the video features
    clip_length: float = 0.0  # seconds per feature clip, for every video; 0 = the loader's (TVR: 1.5), else the feature file's

    def __post_init__(self) -> None:
        if not self.benchmark and not (self.annotations and (self.video_features or self.corpus)):
            raise ValueError("dataset: name a synthetic `benchmark` folder, or `annotations` (split -> file) "
                             "and `video_features` (or a `corpus` folder)")
        if self.clip_length < 0:
            raise ValueError(f"dataset.clip_length must be > 0 seconds, got {self.clip_length}")

    def paths(self) -> dict[str, str]:
        out = {k: getattr(self, k) for k in PATH_FIELDS if getattr(self, k)}
        out |= {f"annotations.{k}": v for k, v in self.annotations.items()}
        return out

    def _with_paths(self, paths: dict[str, str]) -> DatasetConfig:
        ann = {k.split(".", 1)[1]: v for k, v in paths.items() if k.startswith("annotations.")}
        return dataclasses.replace(self, annotations=ann or self.annotations,
                                   **{k: v for k, v in paths.items() if k in PATH_FIELDS})

    def resolved(self, base: str | Path | None = None) -> DatasetConfig:
        """Every path absolute (relative ones taken from ``base``, default the working directory)."""
        b = Path(base) if base is not None else Path.cwd()
        return self._with_paths({k: str((b / v).resolve()) for k, v in self.paths().items()})

    def relative_to(self, folder: str | Path) -> dict[str, str]:
        return {k: os.path.relpath(v, folder) for k, v in self.paths().items()}

    def relocated(self, relative: dict[str, str], folder: str | Path) -> DatasetConfig:
        """Where an absolute path is gone, the one stored relative to ``folder`` (a moved run folder)."""
        fixed = {}
        for k, v in self.paths().items():
            alt = Path(folder) / relative.get(k, "")
            fixed[k] = str(alt.resolve()) if not Path(v).exists() and k in relative and alt.exists() else v
        return self._with_paths(fixed)


@dataclass
class Dataset:
    """An opened dataset: the corpus (all splits), how to open its features, and its time grid. A synthetic
    benchmark's corpus is read on first use; :meth:`iter_videos` walks it without holding it."""

    config: DatasetConfig
    _corpus: Corpus | None
    clip_length: float | None  # seconds per clip: the dataset section's, else the feature file's (if it says)
    benchmark: Any = None  # the SyntheticBenchmark when the dataset is one (its oracle grades moments)
    corpus_folder: Any = None  # the CorpusFolder whose features the dataset reads, when it names one

    @property
    def corpus(self) -> Corpus:
        if self._corpus is None:
            self._corpus = self.benchmark.corpus
        return self._corpus

    def iter_videos(self, split: str = "all") -> Iterator[tuple[Video, list[Moment]]]:
        """Each video of ``split`` (``all``: every split's) with its moments; a synthetic benchmark's are read
        line by line, so memory stays that of one video whatever the corpus size."""
        if self._corpus is None and self.benchmark is not None:
            names = list(self.benchmark.config.splits)
            if split != "all" and split not in names:
                raise DatasetError(f"dataset {self.name}: no split {split!r}; it has {names}")
            yield from self.benchmark.iter_videos(None if split == "all" else split)
            return
        yield from (self.corpus if split == "all" else self.split(split)).iter_videos()

    def feature_identity(self) -> dict[str, Any]:
        """What made the visual features: a corpus folder's encoder, the encoder a feature file records,
        the synthetic generator, or, for a file from elsewhere, its name and dim."""
        if self.corpus_folder is not None:
            return self.corpus_folder.encoder
        with self.features() as store:
            dim = int(store.visual.dim)
            attrs = getattr(store.visual, "attrs", {})
        if "encoder" in attrs:
            try:
                return dict(json.loads(attrs["encoder"]))
            except (TypeError, ValueError):
                pass
        if self.benchmark is not None and Path(self.config.video_features) == Path(self.benchmark.root) / "features" / "visual.h5":
            return {"name": "synthetic", "version": 1, "config": {"seed": self.benchmark.config.seed}, "dim": dim}
        return {"name": f"file:{Path(self.config.video_features).name}", "version": None, "config": {}, "dim": dim}

    @property
    def name(self) -> str:
        return self._corpus.name if self._corpus is not None or self.benchmark is None else self.benchmark.name

    def features(self) -> FeatureStore:
        if self.corpus_folder is not None:
            return self.corpus_folder.features()
        c = self.config
        return FeatureStore(_existing(c.video_features, "video_features"),
                            _existing(c.subtitle_features, "subtitle_features") if c.subtitle_features else None)

    def clip_lengths(self, corpus: Corpus | None = None) -> dict[str, float]:
        """Seconds per clip of every video: the dataset section's ``clip_length`` when it gives one,
        else the video's own (a loader's default, e.g. TVR's 1.5 s), else the feature file's."""
        grid = self.corpus_folder.clip_lengths() if self.corpus_folder is not None else {}
        return {v.video_id: self.clip_length_of(v, grid) for v in (corpus or self.corpus).videos.values()}

    def clip_length_of(self, v: Video, grid: dict[str, float] | None = None) -> float:
        """One video's seconds per clip (:meth:`clip_lengths`; ``grid``: a corpus folder's, when it has one)."""
        c = (grid or {}).get(v.video_id) or self.config.clip_length or v.clip_length or self.clip_length
        if not c:
            raise DatasetError(f"dataset {self.name}: no clip length for video {v.video_id!r}; say `clip_length:` "
                               "(seconds per feature clip) in the dataset section")
        return c

    def split(self, name: str) -> Corpus:
        try:
            return self.corpus.split(name)
        except KeyError:
            raise DatasetError(f"dataset {self.name}: no split {name!r}; it has {self.corpus.splits}") from None


def _existing(path: str, what: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise DatasetError(f"dataset.{what}: {p} not found")
    return p


def open_dataset(cfg: DatasetConfig) -> Dataset:
    """Load the annotations and check the feature files; a synthetic benchmark fills in the rest."""
    if cfg.corpus:
        from momentsearch.data.corpus_folder import CorpusFolder

        folder = CorpusFolder.open(cfg.corpus)
        sub = str(folder.stream_path("subtitle")) if "subtitle" in folder.streams else ""
        inner = dataclasses.replace(cfg, corpus="", video_features=str(folder.stream_path("visual")),
                                    subtitle_features=sub,
                                    query_cache=cfg.query_cache or str(Path(cfg.corpus) / "queries_minilm.h5"))
        ds = open_dataset(inner)  # the corpus's streams stand for video_features and subtitle_features
        ds.config, ds.corpus_folder = dataclasses.replace(ds.config, corpus=cfg.corpus), folder
        return ds
    if cfg.benchmark:
        from momentsearch.data.synthetic import SyntheticBenchmark

        root = Path(cfg.benchmark)
        if not (root / "benchmark.yaml").is_file():
            raise DatasetError(f"dataset.benchmark: {root} is not a synthetic benchmark folder (no benchmark.yaml); "
                               f"make one with `momentsearch generate --preset default --out {root}`")
        bench = SyntheticBenchmark.load(root)
        sub = root / "features" / "subtitle.h5"
        full = dataclasses.replace(
            cfg, video_features=cfg.video_features or str(root / "features" / "visual.h5"),
            subtitle_features=cfg.subtitle_features or (str(sub) if sub.exists() else ""),
            query_cache=cfg.query_cache or str(root / "features" / "queries_minilm.h5"))
        return Dataset(full, None, cfg.clip_length or bench.config.clip_length, bench)
    corpus = _load_annotations(cfg)
    clip = cfg.clip_length or _feature_clip_length(_existing(cfg.video_features, "video_features"))
    full = cfg if cfg.query_cache else dataclasses.replace(
        cfg, query_cache=str(Path(cfg.video_features).parent / "queries_minilm.h5"))
    return Dataset(full, corpus, clip)


def _feature_clip_length(path: Path) -> float | None:
    """The ``clip_length`` attribute momentsearch writes into its feature files (TVR's have none)."""
    if path.is_file():
        from momentsearch.data.features import HDF5Features

        src = HDF5Features(path)
        try:
            if "clip_length" in src.attrs:
                return float(src.attrs["clip_length"])
        finally:
            src.close()
    return None


def _load_annotations(cfg: DatasetConfig) -> Corpus:
    from momentsearch.data.loaders import detect_format, load_corpus

    videos, moments = [], []
    for split, path in cfg.annotations.items():
        p = Path(path)
        if not p.exists():
            raise DatasetError(f"dataset.annotations.{split}: {p} not found")
        fmt = cfg.format or detect_format(p)
        kwargs: dict[str, Any] = {}
        if fmt == "tvr":
            kwargs = {k: v for k, v in (("video2dur", cfg.video2dur), ("subtitles", cfg.subtitles)) if v}
        part = load_corpus(p, fmt, **kwargs)
        # the split is the one the dataset section names, whatever the file calls it
        videos += [dataclasses.replace(v, split=split) for v in part.videos.values()]
        moments += [dataclasses.replace(m, split=split) for m in part.moments]
    name = "+".join(Path(p).stem for p in cfg.annotations.values())
    try:
        return Corpus.from_parts(videos, moments, name=name)
    except ValueError as e:
        raise DatasetError(f"dataset.annotations: the files do not fit together: {e}") from None
