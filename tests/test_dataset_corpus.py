"""``corpus-from-dataset`` streamed: a generated benchmark is written as a corpus folder video by video (its
corpus never read whole), with its captions beside the manifest (``annotations.jsonl`` + offsets), and the
result is the corpus the in-memory path writes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from momentsearch.data.corpus_folder import CorpusFolder, CorpusManifest, write_dataset_corpus
from momentsearch.data.corpus_notes import NOTES, OFFSETS
from momentsearch.data.dataset import DatasetConfig, open_dataset
from momentsearch.data.loaders.jsonl import iter_jsonl_videos, jsonl_corpus_name
from momentsearch.errors import AnnotationError, CorpusFolderError, DatasetError, MissingFeatureError


def test_a_benchmark_is_written_video_by_video_and_equals_the_in_memory_corpus(tiny_benchmark: Path, tmp_path: Path):
    streamed = open_dataset(DatasetConfig(benchmark=str(tiny_benchmark)))
    a = write_dataset_corpus(streamed, "test", tmp_path / "streamed")
    assert streamed._corpus is None  # walked line by line, never loaded
    whole = open_dataset(DatasetConfig(benchmark=str(tiny_benchmark)))
    test = whole.corpus.split("test")  # read whole first: iter_videos then walks the Corpus
    b = write_dataset_corpus(whole, "test", tmp_path / "whole")
    assert a.fingerprint == b.fingerprint and a.video_ids == b.video_ids == list(test.videos)
    assert a.manifest.name == b.manifest.name == f"{whole.name}:test" == "synthetic-tiny:test"
    by_video = test.moments_by_video()
    for v in a.video_ids:  # each video's captions, as [start, end, text] rounded to the millisecond
        want = [[round(m.spans[0][0], 3), round(m.spans[0][1], 3), m.text] for m in by_video.get(v, [])]
        assert a.annotations(v) == b.annotations(v) == want
    assert sum(len(a.annotations(v)) for v in a.video_ids) == len(test.moments) > 0
    raw = json.loads((tmp_path / "streamed" / "corpus.json").read_text())
    assert "annotations" not in raw["videos"][0] and raw["annotations"]["count"] == len(a.video_ids)


def test_a_corpus_with_inline_annotations_still_reads(tiny_benchmark: Path, tmp_path: Path):
    """Corpora written before the captions moved out kept them in each video's entry."""
    c = write_dataset_corpus(open_dataset(DatasetConfig(benchmark=str(tiny_benchmark))), "val", tmp_path / "c")
    man = CorpusManifest.read(tmp_path / "c")
    notes = {v: c.annotations(v) for v in c.video_ids}
    for v in man.videos:
        v["annotations"] = notes[v["id"]]
    man.annotations = None
    man.write(tmp_path / "c")
    (tmp_path / "c" / NOTES).unlink()
    old = CorpusFolder.open(tmp_path / "c")
    assert {v: old.annotations(v) for v in old.video_ids} == notes and old.fingerprint == c.fingerprint


def test_the_captions_file_is_read_into_memory_only_where_it_fits(tiny_benchmark: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch):
    """A service labels each result with its video's captions, one line of annotations.jsonl each: read cold
    they cost a 100k index's served query about 3 ms. At start the service reads the whole file once in a
    background thread (posix_fadvise WILLNEED read 8 MB of 56 here) when it is at most a tenth of memory; never a
    larger one. What is read afterwards is unchanged."""
    from momentsearch.data.corpus_notes import CorpusNotes
    from momentsearch.service import app as service_app

    c = write_dataset_corpus(open_dataset(DatasetConfig(benchmark=str(tiny_benchmark))), "test", tmp_path / "c")
    size = (tmp_path / "c" / NOTES).stat().st_size
    before = {v: c.annotations(v) for v in c.video_ids}
    read: list[int] = []
    real_open = Path.open

    def counting_open(self: Path, *a, **k):  # counts the bytes the warming thread reads from the captions file
        fh = real_open(self, *a, **k)
        if self.name != NOTES or "b" not in (a[0] if a else k.get("mode", "r")):
            return fh
        inner = fh.readinto

        class Counting:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                fh.close()

            def readinto(self, buf):
                n = inner(buf)
                read.append(n)
                return n
        return Counting()

    monkeypatch.setattr(Path, "open", counting_open)
    threads: list = []
    real_need = CorpusNotes.read_in_background
    monkeypatch.setattr(CorpusNotes, "read_in_background", lambda self: threads.append(real_need(self)) or threads[-1])
    assert c.warm_annotations(size - 1) == 0 and threads == []  # larger than the limit: not read
    assert c.warm_annotations(size) == size
    threads[0].join(10)
    assert not threads[0].is_alive() and sum(read) == size and read[-1] == 0  # read to the end, once
    monkeypatch.setattr(Path, "open", real_open)
    assert {v: c.annotations(v) for v in c.video_ids} == before

    class Searcher:  # what create_app reads of a searcher before serving
        corpus, video_ids, folder = CorpusFolder.open(tmp_path / "c"), c.video_ids, None

    threads.clear()
    monkeypatch.setattr(service_app, "memory_bytes", lambda: service_app.WARM_FRACTION * size)
    service_app.create_app(Searcher()).state.batcher.close()  # type: ignore[arg-type]
    assert len(threads) == 1
    threads[0].join(10)
    threads.clear()
    monkeypatch.setattr(service_app, "memory_bytes", lambda: service_app.WARM_FRACTION * size - 1)
    service_app.create_app(Searcher()).state.batcher.close()  # type: ignore[arg-type]
    assert threads == []


def test_damaged_annotations_are_named(tiny_benchmark: Path, tmp_path: Path):
    c = write_dataset_corpus(open_dataset(DatasetConfig(benchmark=str(tiny_benchmark))), "val", tmp_path / "c")
    first, second = c.video_ids[:2]
    offsets = np.load(tmp_path / "c" / OFFSETS)
    path = tmp_path / "c" / NOTES
    raw = bytearray(path.read_bytes())
    raw[int(offsets[1])] = ord("{")  # the second video's line no longer parses
    path.write_bytes(bytes(raw))
    c = CorpusFolder.open(tmp_path / "c")
    assert c.annotations(first)  # the others still read
    with pytest.raises(CorpusFolderError, match=rf"line of video '{second}'.*write the corpus again"):
        c.annotations(second)
    path.write_bytes(bytes(raw[:-5]))  # cut short: the offsets no longer index the file
    with pytest.raises(CorpusFolderError, match=r"annotations.offsets.npy: does not index .*write the corpus again"):
        CorpusFolder.open(tmp_path / "c").annotations(first)
    man = json.loads((tmp_path / "c" / "corpus.json").read_text())
    man["annotations"]["count"] += 1
    (tmp_path / "c" / "corpus.json").write_text(json.dumps(man))
    with pytest.raises(CorpusFolderError, match=r"annotations must be .*one line per video"):
        CorpusFolder.open(tmp_path / "c")


def test_a_video_without_features_fails_before_anything_is_written(tiny_benchmark: Path, tmp_path: Path):
    import shutil

    import h5py

    bench = tmp_path / "bench"
    shutil.copytree(tiny_benchmark, bench)
    ds = open_dataset(DatasetConfig(benchmark=str(bench)))
    gone = next(v for v, _ in ds.iter_videos("test")).video_id
    with h5py.File(bench / "features" / "visual.h5", "a") as f:
        del f[gone]
    with pytest.raises(MissingFeatureError, match=rf"visual.h5: 1 video\(s\) have no features, e.g. \['{gone}'\]"):
        write_dataset_corpus(open_dataset(DatasetConfig(benchmark=str(bench))), "test", tmp_path / "c")
    assert not (tmp_path / "c").exists()
    with pytest.raises(DatasetError, match=r"no split 'nope'; it has \['train', 'val', 'test'\]"):
        write_dataset_corpus(open_dataset(DatasetConfig(benchmark=str(bench))), "nope", tmp_path / "c")


def test_videos_are_read_with_their_moments_and_out_of_order_moments_are_refused(tmp_path: Path):
    lines = [{"record": "header", "format": "momentsearch-corpus", "version": 1, "name": "mine"},
             {"record": "video", "video_id": "a", "duration": 10.0, "split": "test"},
             {"record": "moment", "query_id": "q1", "text": "a dog runs", "video_id": "a", "spans": [[1.0, 12.0]]},
             {"record": "video", "video_id": "b", "duration": 5.0, "split": "test"},
             {"record": "moment", "query_id": "q2", "text": "a cat sits", "video_id": "b", "spans": [[0.0, 2.0]]}]
    f = tmp_path / "c.jsonl"
    f.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    got = [(v.video_id, [(m.query_id, m.spans) for m in ms]) for v, ms in iter_jsonl_videos(f)]
    assert got == [("a", [("q1", ((1.0, 10.0),))]), ("b", [("q2", ((0.0, 2.0),))])]  # clamped to the video
    assert jsonl_corpus_name(f) == "mine"
    f.write_text("\n".join(json.dumps(x) for x in [lines[0], lines[1], lines[3], lines[2]]) + "\n")
    with pytest.raises(AnnotationError, match=r"c.jsonl:4: moment 'q1' of video 'a' does not follow its video"):
        list(iter_jsonl_videos(f))
    f.write_text("\n".join(json.dumps(x) for x in [lines[0], lines[1], lines[1]]) + "\n")
    with pytest.raises(AnnotationError, match=r"c.jsonl:3: video 'a' appears twice"):
        list(iter_jsonl_videos(f))
