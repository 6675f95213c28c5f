"""A corpus folder: videos, their features, and the encoder that made them — apart from any model.

``ingest`` writes one from a folder of videos; :func:`write_dataset_corpus` writes one over a dataset
split's feature files, so researchers and practitioners index and search through the same path::

    CORPUS/
      corpus.json          the manifest (below), written atomically, last
      features/visual/     <video id>.npy per video, (clips, dim) float16 (ids escape '/' as %2F)
      features/subtitle/   the same for the subtitle stream, when anything said in any video was read
      transcripts/         <video id>.json per video with speech: its cues (momentsearch.data.transcripts)
      features/written/    MiniLM of the text read on screen per clip (ingest --read-text), when any was read
      written/             <video id>.json per video with text on screen: its cues, stored as transcripts are
      ingest.journal.jsonl what a running ingest has finished (removed when it completes)
      annotations.jsonl    a dataset's corpus: each video's annotated moments, one line per video, with
      annotations.offsets.npy  where each line starts (momentsearch.data.corpus_notes)

The manifest holds ``format``, ``version``, the visual ``encoder``'s identity (name, version, config,
dim), ``clip_seconds`` and ``fps``, the named feature ``streams`` (each a path — relative to the
folder or absolute —, a kind ``npy`` or ``hdf5``, a dim and the encoder that made it), and per
video: id, source path, size and modification time, when it was ingested (UTC), duration, its time grid (clip length, clip
count), rotation, codec, its subtitle file, what is said and written in it (source, kind, cue count) and
the settings it was heard and read with (``listen``), and a CRC-32 per stream of the stored features.
``failures`` lists the files that could not be ingested and why. The corpus's fingerprint is a
hash of what search depends on (ids, time grids, feature checksums, encoder), so an index knows
the corpus it was built from by content.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from momentsearch.data.corpus import Subtitle, Video
from momentsearch.data.corpus_notes import CorpusNotes, NotesWriter, check_record
from momentsearch.data.features import FeatureSource, FeatureStore, HDF5Features, NpyDirFeatures
from momentsearch.data.transcripts import WRITTEN
from momentsearch.errors import CorpusFolderError
from momentsearch.readers import exists, is_file, read_json

MANIFEST = "corpus.json"
FORMAT = "momentsearch-corpus"
VERSION = 1
VIDEO_FIELDS: dict[str, type | tuple[type, ...]] = {
    "id": str, "duration": (int, float), "clip_length": (int, float), "n_clips": int, "crc32": dict,
}


class VideoEntry(TypedDict):
    """One video of ``corpus.json``: the fields every corpus has (``VIDEO_FIELDS``, checked by
    :meth:`CorpusManifest.read`), and those ingest adds for a video file (``NotRequired``; a dataset's corpus has
    ``annotations`` instead)."""

    id: str
    duration: float  # seconds
    clip_length: float  # seconds a clip
    n_clips: int
    crc32: dict[str, int]  # stream name -> CRC-32 of its rows
    path: NotRequired[str | None]  # the video file, relative to the corpus's source folder (None: features only)
    size: NotRequired[int]  # the file's size and modification time when ingested (a changed file is re-ingested)
    mtime_ns: NotRequired[int]
    sidecars: NotRequired[list[dict[str, Any]]]  # subtitle / transcript files beside it: path, size, mtime_ns
    transcript: NotRequired[dict[str, Any] | None]  # what is said: its source and kind (None: nothing said)
    warnings: NotRequired[list[str]]  # a bad sidecar, a damaged subtitle stream: said, never fatal
    ingested_at: NotRequired[str | None]  # UTC, ISO 8601
    fps: NotRequired[float]
    width: NotRequired[int]
    height: NotRequired[int]
    rotation: NotRequired[int]
    codec: NotRequired[str]
    frames_decoded: NotRequired[int]
    annotations: NotRequired[list[list[Any]]]  # a dataset's corpus: [start, end, text] of each annotated moment


def is_corpus_folder(path: str | Path) -> bool:
    return (Path(path) / MANIFEST).is_file()


def _check(cond: bool, path: Path, what: str) -> None:
    if not cond:
        raise CorpusFolderError(f"{path}: {what}")


@dataclass
class CorpusManifest:
    """``corpus.json``, the format's one typed record: one reader (:meth:`read`) and one writer (:meth:`write`,
    for ingest's corpora and a dataset's). Each of ``videos`` is a mapping with at least ``VIDEO_FIELDS``
    (and optionally path, size, mtime_ns, ingested_at, codec, fps, transcript, annotations, warnings)."""
    encoder: dict[str, Any]
    streams: dict[str, dict[str, Any]]
    videos: list[VideoEntry]
    name: str | None = None
    source: str | None = None  # the folder the videos were ingested from (None: a dataset's corpus)
    clip_seconds: float | None = None
    fps: float | None = None
    failures: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    encoder_weights: str | None = None  # where the encoder's weights were at ingest (a picture query encodes with them)
    annotations: dict[str, Any] | None = None  # a dataset's corpus: its captions' files (momentsearch.data.corpus_notes)

    @property
    def fingerprint(self) -> str:
        """A hash of what search over the corpus depends on: ids, time grids, feature checksums, streams' encoders."""
        rows = [[v["id"], round(float(v["duration"]), 4), round(float(v["clip_length"]), 6), v["n_clips"],
                 sorted(v.get("crc32", {}).items())] for v in self.videos]
        streams = {k: [s.get("dim"), s.get("encoder")] for k, s in self.streams.items()}
        blob = json.dumps([rows, streams], sort_keys=True, default=str).encode()
        return hashlib.sha1(blob).hexdigest()[:16]

    def write(self, folder: str | Path) -> Path:
        """``folder/corpus.json`` with the format, version and fingerprint, atomically (written last, after the
        feature files it names)."""
        from momentsearch.fileio import write_json

        out = Path(folder) / MANIFEST
        write_json(out, {"format": FORMAT, "version": VERSION, **asdict(self), "fingerprint": self.fingerprint},
                   indent=None)
        return out

    @classmethod
    def read(cls, folder: str | Path) -> CorpusManifest:
        r = Path(folder)
        f = r / MANIFEST
        if not f.is_file():
            hint = " (an ingest is under way or was interrupted: run it again to finish)" if (
                r / "ingest.journal.jsonl").is_file() else ""
            raise CorpusFolderError(f"{r}: not a corpus folder, {MANIFEST} is missing{hint}; make one with "
                                    f"`momentsearch ingest VIDEOS_DIR --out {r}`")
        man = read_json(f, lambda m: CorpusFolderError(f"{m[:300]}; the corpus manifest is damaged: ingest again "
                                                       "into a new folder"), "corpus manifest")
        _check(isinstance(man, dict) and man.get("format") == FORMAT, f, "not a momentsearch corpus manifest")
        _check(man.get("version") == VERSION, f, f"corpus version {man.get('version')!r}; this momentsearch reads "
                                                 f"{VERSION}: ingest again into a new folder")
        for key, kind in (("encoder", dict), ("streams", dict), ("videos", list)):
            _check(isinstance(man.get(key), kind), f, f"field {key!r} must be a {kind.__name__}")
        _check("visual" in man["streams"], f, "streams: no 'visual' stream")
        _check(all(isinstance(man.get(k), (str, type(None))) for k in ("source", "name", "encoder_weights"))
               and all(isinstance(man.get(k, []), list) and all(isinstance(x, dict) for x in man.get(k, []))
                       for k in ("failures", "warnings")), f,
               "name, source and encoder_weights must be strings or null, failures and warnings lists of objects")
        _check(all(isinstance(man.get(k), (int, float, type(None))) and not isinstance(man.get(k), bool)
                   for k in ("clip_seconds", "fps")), f, "clip_seconds and fps must be numbers or null")
        for name, s in man["streams"].items():
            _check(isinstance(s, dict) and isinstance(s.get("path"), str) and s.get("kind") in ("npy", "hdf5")
                   and isinstance(s.get("dim"), int) and s["dim"] > 0, f,
                   f"streams.{name}: needs path (str), kind (npy or hdf5) and dim (int > 0)")
        seen: set[str] = set()
        for i, v in enumerate(man["videos"]):
            _check(isinstance(v, dict), f, f"videos[{i}] must be an object")
            for key, kind in VIDEO_FIELDS.items():
                _check(isinstance(v.get(key), kind) and not isinstance(v.get(key), bool), f,
                       f"videos[{i}].{key} missing or not a {getattr(kind, '__name__', 'number')}")
            _check(bool(v["id"]) and v["id"] not in seen, f, f"videos[{i}].id {v['id']!r} is empty or repeated")
            seen.add(v["id"])
            ok = (0 < v["duration"] < 1e12 and 0 < v["clip_length"] < 1e12  # (false for NaN and inf too)
                  and 1 <= v["n_clips"] < 2**40)
            _check(ok, f, f"videos[{i}] ({v['id']}): duration and clip_length must be > 0, n_clips >= 1")
            _check(isinstance(v.get("path"), (str, type(None))) and isinstance(v.get("annotations", []), list)
                   and isinstance(v.get("ingested_at"), (str, type(None))), f,
                   f"videos[{i}].path and ingested_at must be strings or null, annotations a list")
            sums = v.get("crc32", {})
            _check(isinstance(sums, dict) and all(type(c) is int and 0 <= c < 2**32 for c in sums.values()), f,
                   f"videos[{i}].crc32 must map stream names to CRC-32 values (integers)")
        if man.get("annotations") is not None:
            check_record(man["annotations"], len(man["videos"]), f)
        return cls(man["encoder"], man["streams"], man["videos"], man.get("name"), man.get("source"),
                   man.get("clip_seconds"), man.get("fps"), man.get("failures", []), man.get("warnings", []),
                   man.get("encoder_weights"), man.get("annotations"))


@dataclass
class CorpusFolder:
    root: Path
    manifest: CorpusManifest
    _by_id: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False, compare=False)
    _row: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    _notes: CorpusNotes | None = field(default=None, repr=False, compare=False)

    @classmethod
    def open(cls, root: str | Path) -> CorpusFolder:
        return cls(Path(root), CorpusManifest.read(root))

    # ---- what the corpus is ------------------------------------------------------------------
    @property
    def encoder(self) -> dict[str, Any]:
        return dict(self.manifest.encoder)

    @property
    def streams(self) -> dict[str, dict[str, Any]]:
        return self.manifest.streams

    @property
    def fingerprint(self) -> str:
        return self.manifest.fingerprint

    @property
    def video_ids(self) -> list[str]:
        return [v["id"] for v in self.manifest.videos]

    @property
    def failures(self) -> list[dict[str, Any]]:
        return list(self.manifest.failures)

    def entry(self, video_id: str) -> VideoEntry:
        if not self._by_id:  # built once: a service looks videos up per request
            self._by_id.update((v["id"], v) for v in self.manifest.videos)
        if video_id in self._by_id:
            return self._by_id[video_id]
        raise CorpusFolderError(f"{self.root}: no video {video_id!r} in the corpus")

    def annotations(self, video_id: str) -> list[list[Any]]:
        """The video's annotated moments, [start, end, text] each (a dataset's corpus; [] for ingested videos)."""
        inline = self.entry(video_id).get("annotations")
        if inline is not None or self.manifest.annotations is None:
            return inline or []
        return self._open_notes().get(self._row[video_id], video_id)

    def _open_notes(self) -> CorpusNotes:
        if self._notes is None:
            self._notes = CorpusNotes(self.root, self.manifest.annotations["count"])  # type: ignore[index]
            self._row.update((v["id"], i) for i, v in enumerate(self.manifest.videos))
        return self._notes

    def warm_annotations(self, limit_bytes: int) -> int:
        """Read the captions' file (``annotations.jsonl``) once in the background when it holds at most
        ``limit_bytes``, so that the page cache holds it: a service labelling results then reads no line from disk.
        Returns the bytes it reads (0: no such file, or larger than the limit)."""
        if self.manifest.annotations is None:
            return 0
        notes = self._open_notes()
        if notes.nbytes > limit_bytes:
            return 0
        notes.read_in_background()
        return notes.nbytes

    def videos(self) -> list[Video]:
        return [Video(v["id"], float(v["duration"]), clip_length=float(v["clip_length"]),
                      meta={"source": v.get("path")}) for v in self.manifest.videos]

    def clip_lengths(self) -> dict[str, float]:
        return {v["id"]: float(v["clip_length"]) for v in self.manifest.videos}

    def video_signature(self, video_id: str) -> str:
        """Changes exactly when what an index stores for the video could change."""
        v = self.entry(video_id)
        return json.dumps([round(float(v["duration"]), 4), round(float(v["clip_length"]), 6), v["n_clips"],
                           sorted(v["crc32"].items())])

    def video_path(self, video_id: str) -> Path | None:
        """The source video file, where the corpus was ingested from videos and the file is still there."""
        rel = self.entry(video_id).get("path")
        src = self.manifest.source
        if not rel or not src:
            return None
        p = Path(src) / rel
        return p if is_file(p) else None

    def transcript(self, video_id: str) -> list[Subtitle]:
        """What is said in the video (its stored cues, CRC-checked), [] where nothing was read."""
        from momentsearch.data.transcripts import TRANSCRIPTS

        return self._cues(video_id, "transcript", TRANSCRIPTS, "transcript")

    def written(self, video_id: str) -> list[Subtitle]:
        """The text read on screen in the video (``ingest --read-text``; CRC-checked), [] where none was."""
        return self._cues(video_id, "written", WRITTEN, "written_text")

    def _cues(self, video_id: str, key: str, folder: str, crc: str) -> list[Subtitle]:
        import zlib

        from momentsearch.data.features import h5_key
        from momentsearch.data.transcripts import read_stored_transcript
        from momentsearch.readers import read_bytes

        v = self.entry(video_id)
        if not v.get(key):
            return []
        path = self.root / folder / f"{h5_key(video_id)}.json"
        raw = read_bytes(path, CorpusFolderError, key)
        if crc in v["crc32"] and zlib.crc32(raw) != v["crc32"][crc]:
            raise CorpusFolderError(f"{path}: its CRC-32 does not match {MANIFEST}; ingest the folder again")
        return read_stored_transcript(path).cues

    def stream_path(self, name: str) -> Path:
        p = Path(self.streams[name]["path"])
        return p if p.is_absolute() else self.root / p

    def features(self, verify: bool = True) -> FeatureStore:
        """The visual stream and, where the corpus has them, the subtitle and written streams (checksums from the
        manifest)."""
        return FeatureStore(self._source("visual", verify),
                            self._source("subtitle", verify) if "subtitle" in self.streams else None,
                            transcripts=self.transcript,
                            written=self._source(WRITTEN, verify) if WRITTEN in self.streams else None,
                            written_cues=self.written)

    def _source(self, name: str, verify: bool) -> FeatureSource:
        s = self.streams[name]
        path = self.stream_path(name)
        if not exists(path):
            raise CorpusFolderError(f"{self.root / MANIFEST}: stream {name!r}: {str(path)[:300]} is missing")
        if s["kind"] == "hdf5":
            return HDF5Features(path, s["dim"], verify=verify)
        sums = ({v["id"]: int(v["crc32"][name]) for v in self.manifest.videos if name in v["crc32"]}
                if s.get("crc_of") == "stored" else None)  # ingest's: of the stored bytes, checked on read
        return NpyDirFeatures(path, s["dim"], verify=verify, checksums=sums)


def write_dataset_corpus(dataset: Any, split: str, out: str | Path, video_dir: str | Path | None = None,
                         progress: bool = False) -> CorpusFolder:
    """A dataset split (annotations + feature files, as a ``dataset:`` section names them) as a corpus
    folder (``split`` ``all``: every video of the dataset). The features stay where they are: the manifest
    points at them (absolute paths). Each video's annotated moments (start, end, text), for display, go to
    ``annotations.jsonl`` (:mod:`~momentsearch.data.corpus_notes`); ``video_dir``: where ``<id>.mp4`` files of
    the videos are (e.g. the rendered synthetic videos), recorded as the videos' files. Videos are read one at
    a time (:meth:`Dataset.iter_videos`): a generated million is written in the memory of its manifest."""
    from tqdm import tqdm

    from momentsearch.data.features import checksum
    from momentsearch.errors import DatasetError, MissingFeatureError
    from momentsearch.fileio import atomic_dir

    ident = dataset.feature_identity()
    grid = dataset.corpus_folder.clip_lengths() if dataset.corpus_folder is not None else None
    source = Path(video_dir).resolve() if video_dir is not None else None
    videos: list[VideoEntry] = []
    missing: dict[str, list[str]] = {}
    with dataset.features() as store, atomic_dir(out) as tmp, \
            tqdm(unit="video", desc=f"corpus of {split}", disable=not progress) as bar:
        names = {"visual": store.visual, **({"subtitle": store.subtitle} if store.subtitle is not None else {})}
        notes = NotesWriter(tmp)
        for v, moments in dataset.iter_videos(split):
            lacking = [k for k, src in names.items() if v.video_id not in src]
            for k in lacking:
                missing.setdefault(str(names[k].path), []).append(v.video_id)
            if lacking or missing:
                continue
            rows = {k: src[v.video_id] for k, src in names.items()}  # each read once
            file = f"{v.video_id}.mp4" if source is not None and (source / f"{v.video_id}.mp4").is_file() else None
            videos.append({"id": v.video_id, "path": file, "duration": v.duration,
                           "clip_length": dataset.clip_length_of(v, grid), "n_clips": len(rows["visual"]),
                           "crc32": {k: checksum(a) for k, a in rows.items()}})
            notes.add([[round(m.span[0], 3), round(m.span[1], 3), m.text] for m in moments if m.spans])
            bar.update()
        if missing:
            raise MissingFeatureError("; ".join(f"{path}: {len(ids)} video(s) have no features, e.g. {ids[:5]}"
                                                for path, ids in missing.items()))
        if not videos:
            raise DatasetError(f"dataset {dataset.name}: split {split!r} has no videos")
        streams = {k: {"path": str(Path(src.path).resolve()), "kind": "npy" if Path(src.path).is_dir() else "hdf5",
                       "dim": int(src.dim), "encoder": ident if k == "visual" else {"name": f"dataset:{k}"}}
                   for k, src in names.items()}
        man = CorpusManifest(ident, streams, videos, f"{dataset.name}:{split}", None if source is None else str(source),
                             annotations=notes.close())
        man.write(tmp)
    return CorpusFolder.open(out)
