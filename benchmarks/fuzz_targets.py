"""The fuzz run's readers beyond the annotation formats: feature stores (HDF5, npy), checkpoints, YAML
configs, index folders (index.json, arrays and their manifest), relevance tables, MVMR pools, corpus
folders, subtitle files, query files, synthetic benchmark folders, the ``scan`` first stage's folder, a sharded
index's manifest, the service's ``/search`` body, the audio track, recognised words and text-reader lines of
``ingest --speech --read-text`` (:mod:`fuzz_heard_read`), and an uploaded picture, a moment reference, the saved
searches and the alerts log (:mod:`fuzz_keep_ask`).

Each :class:`Target` starts from real files made by momentsearch itself (a served index over three
ingested videos, a packed checkpoint, the shipped configs...), writes one mutant at a time over its
file, and runs what a user would run on it. ``fuzz_loaders.py`` drives them beside the annotation formats.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the test suite's video writer and served index

from benchmarks.fuzz_file_mutants import (  # noqa: E402
    GOOD,
    _checkpoint_mutant,
    _h5_mutant,
    _index_mutant,
    _npy_mutant,
    _npz_mutant,
    _rows8_mutant,
    _scan_mutant,
    _yaml_mutant,
)
from benchmarks.fuzz_heard_read import heard_fixture, heard_targets  # noqa: E402
from benchmarks.fuzz_keep_ask import keep_fixture, keep_targets  # noqa: E402
from benchmarks.fuzz_mutations import mutate  # noqa: E402

SRT = "1\n00:00:01,000 --> 00:00:03,000\nthe red door opens\n\n2\n00:00:04,000 --> 00:00:05,500\nsomeone <i>waves</i>\n"
VTT = "WEBVTT\n\nNOTE a note\n\n00:01.000 --> 00:03.000 align:start\nthe red door opens\n\ncue-2\n" \
      "00:00:04.000 --> 00:00:05.500\nsomeone waves\n"
MVMR_ANNOTATIONS = json.dumps({
    "v_a": {"duration": 20.0, "timestamps": [[1.0, 5.0], [4.0, 19.5]], "sentences": ["a man runs", "he jumps"]},
    "v_b": {"duration": 31.3, "timestamps": [[0.0, 31.3]], "sentences": ["people dance"]}})
MVMR_POOLS = json.dumps({
    "v_a": {"duration": 20.0, "timestamps": [[1.0, 5.0], [4.0, 19.5]], "sentences": ["a man runs", "he jumps"],
            "pos_moments": [[], [["v_b", "people dance", [0.0, 31.3]]]], "retrieval_pool": [["v_a", "v_b"], ["v_a", "v_b"]]},
    "v_b": {"duration": 31.3, "timestamps": [[0.0, 31.3]], "sentences": ["people dance"], "pos_moments": [[]],
            "retrieval_pool": [["v_b", "v_a"]]}})
BODIES = [{"query": "the red door opens", "k": 3}, {"query": "someone waves", "k": 5, "videos": ["clip1", "clip0"]}]
V1_BODY = {"query": "someone waves", "k": 4, "offset": 2, "group_by_video": True, "min_score": 0.0,
           "path_prefix": "clip", "min_duration": 1, "max_duration": 60, "ingested_after": "2020-01-01",
           "ingested_before": "2100-01-01T00:00:00Z", "timeout_ms": 20000}
CHARADES_CSV = ("id,subject,scene,quality,relevance,verified,script,objects,descriptions,actions,length\n"
                '46GP8,HR43,Kitchen,6,7,Yes,A person cooks.,food;stove,A person cooks.,"c092 11.90 21.20;c147 0.00 12.60",24.83\n'
                'N11GT,0KZ7,Stairs,6,7,Yes,One person opens a blanket.,blanket,Shakes a blanket.,"c098 8.60 14.20;c075 0.00 11.70",18.33\n'
                "EMPTY,X,Hall,6,7,Yes,Nothing.,,Nothing.,,10.00\n")
CHARADES_STA = "46GP8 11.9 21.2##person looking out of a window.\nN11GT 8.6 14.2##a person opens a blanket.\n"


@dataclass
class Target:
    name: str
    file: str  # the file mutated, relative to the work folder
    action: Callable[[Path], Any]  # what a user runs, given the work folder
    mutant: Callable[[Path, random.Random], str] | None = None  # writes a mutant; None: text mutations of the file
    text: bool = True  # the file is text (JSON, YAML...): json_type mutations apply
    extra: dict[str, Any] = field(default_factory=dict)


def apply_mutant(target: Target, fixture_root: Path, work: Path, rng: random.Random) -> tuple[bytes | str, str]:
    """Restore ``target``'s file (or folder) in ``work`` from the fixtures, then write one mutant over it;
    returns (the mutant's bytes, or its description, and the mutation's name)."""
    pristine, path = fixture_root / target.file, work / target.file
    if pristine.is_dir():
        shutil.rmtree(path, ignore_errors=True)
        shutil.copytree(pristine, path)
    elif pristine.is_file():
        shutil.copyfile(pristine, path)
    if target.mutant is not None:
        kind = target.mutant(work, rng)
        return kind, kind
    mutant, kind = mutate(pristine.read_bytes(), rng)
    path.write_bytes(mutant)
    return mutant, kind


# ---- fixtures: real files, made once per run -------------------------------------------------------

_FIXTURES: dict[str, Path] = {}


def fixtures(root: Path) -> Path:
    """A served index over three ingested videos (corpus folder, packed XML checkpoint, index folder),
    feature stores, a relevance table, a tiny synthetic benchmark and the companion text files."""
    if "root" in _FIXTURES:
        return _FIXTURES["root"]
    from momentsearch.data.feature_writers import write_features, write_npy_features
    from momentsearch.data.relevance import MomentRelevance
    from momentsearch.data.synthetic import generate, load_preset
    from served_index import build_served_index

    root.mkdir(parents=True, exist_ok=True)
    build_served_index(root / "served")
    write_features(root / "visual.h5", {"v1": GOOD, "v2": GOOD[:3] * 2}, attrs={"clip_length": 1.5})
    write_npy_features(root / "npy", {"v1": GOOD, "v2": GOOD[:3] * 2})
    MomentRelevance.from_rows(["q1", "q2"], ["v1", "v2"], [[(0, 1.0, 4.0, 1.0), (1, 0.0, 2.0, 0.5)],
                                                           [(1, 2.0, 6.0, 0.75)]]).save(root / "relevance.npz")
    generate(load_preset("tiny"), root / "synthetic", progress=False)
    _dataset_corpus_fixture(root)
    _scan_fixture(root / "scan")
    _sharded_fixture(root)
    _inputs_fixture(root)
    heard_fixture(root / "heard")
    keep_fixture(root / "keep")
    texts = {"subtitles.srt": SRT, "subtitles.vtt": VTT, "mvmr_annotations.json": MVMR_ANNOTATIONS,
             "mvmr_pools.json": MVMR_POOLS, "queries.txt": "the red door opens\n\n  someone waves  \n",
             "search_body.json": json.dumps(BODIES[1]), "v1_body.json": json.dumps(V1_BODY),
             "Charades_v1_test.csv": CHARADES_CSV, "charades_sta_test.txt": CHARADES_STA,
             "whisper.json": WHISPER_JSON, "stored_transcript.json": STORED_TRANSCRIPT,
             "history.json": json.dumps([{"epoch": e, "selection": v, "val": {"VR": {"r10": 30.0 + e},
                                                                            "VCMR": {"0.5-r10": v}}}
                                         for e, v in ((1, 2.5), (2, 4.0))])}
    for name, text in texts.items():
        (root / name).write_text(text, encoding="utf-8")
    for name in ("xml/default.yaml", "minute/small.yaml", "mmn/default.yaml", "span/cet.yaml", "span/bet.yaml"):
        shutil.copy(ROOT / "src/momentsearch/configs" / name, root / ("config_" + name.replace("/", "_")))
    _FIXTURES["root"] = root
    return root


def _scan_fixture(root: Path) -> None:
    """A ``scan`` first stage built over a 300-video index (its arrays beside it), with its int8 tier."""
    from momentsearch.search.first_stage import build_first_stage
    from test_scan_stage import retriever, structured

    index, _ = structured(300)
    index.save(root / "arrays")
    build_first_stage(retriever(index), index, "scan", root / "stage", {"rows": "int8"}).close()


def _sharded_fixture(root: Path) -> None:
    """The served index split into 2 shards (``momentsearch shard``)."""
    from momentsearch.serving.shards import split_index

    split_index(root / "served/index", 2, root / "sharded")


# ---- what a user runs -----------------------------------------------------------------------------

def _features(path: Path) -> None:
    from momentsearch.data.features import FeatureStore

    with FeatureStore(path) as store:
        _ = store.visual.dim, len(store.visual)
        for vid in store.visual.keys():
            store.get(vid)
        store.check_covers(["v1", "v2"])


def _checkpoint(folder: Path) -> None:
    from momentsearch.serving.checkpoint import load_checkpoint
    from momentsearch.training.checkpoint import train_config_of

    ck = load_checkpoint(folder / "served/index/model.pt")
    _ = ck.fingerprint, ck.features, ck.search_settings(), ck.dataset(), train_config_of(ck)  # search and evaluate read these


def _config(folder: Path) -> None:
    from momentsearch.api.training import load_train_config
    from momentsearch.models.family import InputDims
    from momentsearch.models.registry import create_family

    cfg = load_train_config(folder / "config.yaml")
    family = create_family(cfg.model)
    family.build(InputDims(8, 0, 384))


def _index_folder(folder: Path) -> None:
    from momentsearch.serving.indexing import IndexFolder

    idx = IndexFolder.open(folder / "served/index").index
    videos = np.arange(len(idx))
    for name in idx.arrays:
        idx.padded(name, videos)
    for a in idx.video_arrays.values():
        np.asarray(a[videos], np.float32)


def _scan_stage(folder: Path) -> None:
    """What a search over the index does with a stage folder it finds: load it (None: built for other
    videos, so built anew), then answer a query."""
    import torch

    from momentsearch.search.first_stage.scan import ScanFirstStage, layout_key
    from momentsearch.search.index import VideoIndex
    from momentsearch.search.stages import Queries
    from test_scan_stage import retriever

    index = VideoIndex.load(folder / "scan/arrays")
    (stage_dir,) = (folder / "scan/stage").glob("scan_*")
    stage = ScanFirstStage.load(stage_dir, retriever(index), layout_key(index), threads=1)
    if stage is not None:
        q = torch.ones(1, 2, 32)
        stage.retrieve(Queries(q, torch.ones(1, 2, dtype=torch.bool)), 10)
        stage.close()


def _scan_rows8(folder: Path) -> None:
    """What a search does with the int8 tier it finds: load it (None: built for other videos), then rank videos."""
    from momentsearch.search.first_stage.scan import layout_key
    from momentsearch.search.first_stage.scan_rows8 import Rows8
    from momentsearch.search.index import VideoIndex
    from test_scan_stage import retriever

    index = VideoIndex.load(folder / "scan/arrays")
    (tier_dir,) = (folder / "scan/stage").glob("rows8_*")
    tier = Rows8.load(tier_dir, retriever(index), layout_key(index))
    if tier is not None:
        tier.top(np.ones((2, 32), np.float32), np.arange(len(index)), 10)


def _shard_manifest(folder: Path) -> None:
    """What ``load``/``serve`` read of a sharded index before any shard loads: the manifest and every shard's
    index.json, checked against it."""
    from momentsearch.serving.shards import check_sharded

    check_sharded(folder / "sharded")


def _relevance(folder: Path) -> None:
    from momentsearch.data.relevance import MomentRelevance

    rel = MomentRelevance.load(folder / "relevance.npz")
    rel.threshold(0.5)
    rel.video_relevance()
    rel.dense_video_relevance()
    rel.select(rel.query_ids[:1])


def _mvmr(folder: Path) -> None:
    from momentsearch.data.mvmr import load_mvmr_pools

    pools = load_mvmr_pools(folder / "mvmr_pools.json", folder / "mvmr_annotations.json")
    pools.stats()
    pools.relevance()


def _corpus_folder(folder: Path) -> None:
    from momentsearch.data.corpus_folder import CorpusFolder

    c = CorpusFolder.open(folder / "served/corpus")
    _ = c.videos, c.clip_lengths, c.fingerprint, c.failures
    with c.features() as store:
        for vid in c.video_ids:
            store.get(vid)
            c.video_path(vid)


def _dataset_corpus_fixture(root: Path) -> None:
    from momentsearch.data.corpus_folder import write_dataset_corpus
    from momentsearch.data.dataset import DatasetConfig, open_dataset

    write_dataset_corpus(open_dataset(DatasetConfig(benchmark=str(root / "synthetic"))), "val", root / "dataset_corpus")


def _corpus_notes(folder: Path) -> None:
    """What the service does to label results: each video's annotated moments, from the captions' files."""
    from momentsearch.data.corpus_folder import CorpusFolder

    c = CorpusFolder.open(folder / "dataset_corpus")
    for vid in c.video_ids:
        c.annotations(vid)


def _subtitles(name: str) -> Callable[[Path], Any]:
    def run(folder: Path) -> None:
        from momentsearch.data.subtitles import clip_texts, read_subtitles

        clip_texts(read_subtitles(folder / name), 6, 1.0)
    return run


WHISPER_JSON = json.dumps({"text": " hello there general", "language": "en", "segments": [
    {"id": 0, "start": 0.0, "end": 1.5, "text": " hello there", "avg_logprob": -0.3},
    {"id": 1, "start": 1.5, "end": 3.25, "text": " general", "words": [{"word": "general", "start": 1.5}]}]})
STORED_TRANSCRIPT = json.dumps({"source": "a.srt", "kind": "srt", "cues": [[0.5, 2.0, "who left the milk out"],
                                                                           [3.0, 5.5, "the kettle"]]})


def _transcript(folder: Path) -> None:
    from momentsearch.data.subtitles import clip_texts
    from momentsearch.data.transcripts import cue_spans, read_transcript_json

    cues = read_transcript_json(folder / "whisper.json")
    clip_texts(cues, 6, 1.0)
    cue_spans(cues, 6, 1.0)


def _stored_transcript(folder: Path) -> None:
    from momentsearch.data.transcripts import cue_spans, read_stored_transcript

    cue_spans(read_stored_transcript(folder / "stored_transcript.json").cues, 6, 1.0)


def _queries(folder: Path) -> None:
    from momentsearch.text.query_file import read_query_file

    read_query_file(folder / "queries.txt")


def _history(folder: Path) -> None:
    from momentsearch.experiments.continuation import read_history, run_trends

    run_trends(read_history(folder / "history.json"), {"model": {"name": "xml"}}, window=3)


def _inputs_cfg(folder: Path) -> dict[str, Any]:
    return {"dataset": {"benchmark": str(folder / "synthetic")}, "model": {}}


def _inputs_fixture(root: Path) -> None:
    """A run folder whose ``inputs.json`` records the synthetic benchmark it was trained on."""
    from momentsearch.experiments.inputs import check_inputs

    check_inputs(root / "run", _inputs_cfg(root), record=True)


def _inputs(folder: Path) -> None:
    from momentsearch.experiments.inputs import check_inputs

    check_inputs(folder / "run", _inputs_cfg(folder), record=False)


def _synthetic(folder: Path) -> None:
    from momentsearch.data.synthetic import SyntheticBenchmark

    b = SyntheticBenchmark.load(folder / "synthetic")
    with b.features() as store:
        store.get(next(iter(b.corpus.videos)))
    b.oracle("test")


class BadResponse(Exception):
    """The service answered a malformed body with a server error or a body that is not the error JSON."""


_CLIENT: dict[str, Any] = {}


def _charades_actions(folder: Path) -> None:
    """The actions CSV, then the classes of the Charades-STA queries over it and the relevance table."""
    from momentsearch.data.loaders.charades_actions import load_charades_actions
    from momentsearch.data.loaders.charades_sta import load_charades_sta
    from momentsearch.relevance.action_classes import action_relevance

    table = load_charades_actions(folder / "Charades_v1_test.csv")
    action_relevance(load_charades_sta(folder / "charades_sta_test.txt"), table)  # durations: the same CSV


def _search_body(folder: Path, route: str = "/search", body: str = "search_body.json") -> None:
    if "client" not in _CLIENT:
        from fastapi.testclient import TestClient

        from momentsearch.service.app import create_app
        from momentsearch.serving.loader import load

        _CLIENT["client"] = TestClient(create_app(load(folder / "served/index", device="cpu")))
    r = _CLIENT["client"].post(route, content=(folder / body).read_bytes(),
                               headers={"content-type": "application/json"})
    body = r.json() if r.headers.get("content-type", "").startswith("application/json") else None
    if r.status_code >= 500 or not isinstance(body, dict) or (r.status_code >= 400 and "error" not in body):
        raise BadResponse(f"HTTP {r.status_code}: {r.text[:200]}")
    if r.status_code >= 400:  # the service's own error, as JSON: the project's error for this reader
        from momentsearch.errors import QueryError

        raise QueryError(f"HTTP {r.status_code}: {body['error']}")


TARGETS: dict[str, Target] = {t.name: t for t in [
    Target("features-hdf5", "visual.h5", lambda d: _features(d / "visual.h5"), _h5_mutant, text=False),
    Target("features-npy", "npy", lambda d: _features(d / "npy"), _npy_mutant, text=False),
    Target("checkpoint", "served/index/model.pt", _checkpoint, _checkpoint_mutant, text=False),
    Target("config-yaml", "config.yaml", _config, _yaml_mutant),
    Target("index-folder", "served/index", _index_folder, _index_mutant, text=False),
    Target("relevance-npz", "relevance.npz", _relevance, _npz_mutant, text=False),
    Target("scan-stage", "scan/stage", _scan_stage, _scan_mutant, text=False),
    Target("scan-rows8", "scan/stage", _scan_rows8, _rows8_mutant, text=False),
    Target("shard-manifest", "sharded/shards.json", _shard_manifest),
    Target("mvmr-pools", "mvmr_pools.json", _mvmr),
    Target("corpus-json", "served/corpus/corpus.json", _corpus_folder),
    Target("corpus-notes", "dataset_corpus/annotations.jsonl", _corpus_notes),
    Target("corpus-notes-offsets", "dataset_corpus/annotations.offsets.npy", _corpus_notes, text=False),
    Target("subtitles-srt", "subtitles.srt", _subtitles("subtitles.srt")),
    Target("subtitles-vtt", "subtitles.vtt", _subtitles("subtitles.vtt")),
    Target("transcript-json", "whisper.json", _transcript),
    Target("stored-transcript", "stored_transcript.json", _stored_transcript),
    Target("query-file", "queries.txt", _queries),
    Target("training-history", "history.json", _history),
    Target("run-inputs", "run/inputs.json", _inputs),
    Target("synthetic-folder", "synthetic/benchmark.yaml", _synthetic),
    Target("search-body", "search_body.json", _search_body),
    Target("v1-search-body", "v1_body.json", lambda d: _search_body(d, "/v1/search", "v1_body.json")),
    Target("charades-actions", "Charades_v1_test.csv", _charades_actions),
    *heard_targets(Target),
    *keep_targets(Target),
]}
