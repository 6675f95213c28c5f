"""Index folders: one model over one corpus, searched through load(INDEX_DIR) and the CLI; refusals that
name both encoders; a grown corpus; a two-hour video ingested and searched with bounded memory."""

from __future__ import annotations

import gc
import json
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch

import momentsearch
from momentsearch.errors import SearchIndexError
from momentsearch.models.family import InputDims
from momentsearch.models.registry import create_family
from momentsearch.serving.checkpoint import load_checkpoint, pack_checkpoint
from momentsearch.serving.indexing import IndexFolder, build_index
from momentsearch.video.encoders import create_encoder
from momentsearch.video.ingest import ingest
from video_files import write_video


def packed_xml(path: Path, features: dict, dim: int = 96, max_clips: int = 16) -> Path:
    """An XML network as built (random weights): enough to test indexing and search mechanics."""
    torch.manual_seed(0)
    fam = create_family({"name": "xml", "hidden": 16, "max_clips": max_clips, "n_max": 8})
    model = fam.build(InputDims(dim, 0, 384))
    return pack_checkpoint(path, fam, model, features)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("own")
    d = root / "videos"
    d.mkdir()
    for i, secs in enumerate((6.0, 9.0, 4.0)):
        write_video(d / f"clip{i}.mp4", seconds=secs, rate=8)
    ingest(d, root / "corpus", clip_seconds=1.0, fps=2.0, progress=False)
    return root


def test_index_then_search_from_python_and_the_cli(corpus, tmp_path):
    ckpt = packed_xml(tmp_path / "xml.pt", create_encoder("builtin").identity())
    rep = build_index(ckpt, corpus / "corpus", tmp_path / "index", device="cpu", progress=False)
    assert sorted(rep.encoded) == ["clip0", "clip1", "clip2"]
    info = json.loads((tmp_path / "index" / "index.json").read_text())
    assert info["model_fingerprint"] == load_checkpoint(ckpt).fingerprint
    assert info["corpus"]["encoder"]["name"] == "builtin" and info["text_encoder"]["name"] == "all-MiniLM-L6-v2"
    hits = momentsearch.load(tmp_path / "index", device="cpu").search("a white square", k=5)
    assert 1 <= len(hits) <= 5 and {h.video_id for h in hits} <= {"clip0", "clip1", "clip2"}
    for h in hits:
        assert 0 <= h.start < h.end <= {"clip0": 6.0, "clip1": 9.0, "clip2": 4.0}[h.video_id] + 1e-6
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    from typer.testing import CliRunner

    from momentsearch.cli.main import app

    res = CliRunner().invoke(app, ["search", str(tmp_path / "index"), "a white square", "-k", "2", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [m["video_id"] for m in out[0]["moments"]] == [h.video_id for h in hits[:2]]
    # a second build over the same corpus encodes nothing; a moved pair of folders still searches
    assert build_index(ckpt, corpus / "corpus", tmp_path / "index", progress=False).encoded == []


def test_a_model_of_another_encoder_or_dim_is_refused(corpus, tmp_path):
    other = create_encoder("builtin", size=32).identity()
    with pytest.raises(SearchIndexError, match=r"trained on features of builtin v1 \(dim 96, size=32\) and the corpus "
                                               r"was made by builtin v1 \(dim 96, size=64\)"):
        build_index(packed_xml(tmp_path / "a.pt", other), corpus / "corpus", tmp_path / "i1", progress=False)
    with pytest.raises(SearchIndexError, match="reads 100-d visual features and the corpus holds 96-d ones"):
        build_index(packed_xml(tmp_path / "b.pt", {**other, "dim": 100}, dim=100), corpus / "corpus", tmp_path / "i2",
                    progress=False)


def test_a_grown_corpus_encodes_only_new_videos(corpus, tmp_path):
    ckpt = packed_xml(tmp_path / "xml.pt", create_encoder("builtin").identity())
    build_index(ckpt, corpus / "corpus", tmp_path / "index", progress=False)
    before = IndexFolder.open(tmp_path / "index").index
    write_video(corpus / "videos" / "clip3.mp4", seconds=5.0, rate=8)
    ingest(corpus / "videos", corpus / "corpus", clip_seconds=1.0, fps=2.0, progress=False)
    rep = build_index(ckpt, corpus / "corpus", tmp_path / "index", progress=False)
    assert rep.encoded == ["clip3"] and sorted(rep.kept) == ["clip0", "clip1", "clip2"]
    after = IndexFolder.open(tmp_path / "index").index
    assert after.video_ids == ["clip0", "clip1", "clip2", "clip3"]
    assert np.array_equal(after.arrays["h1"][: before.offsets[-1]], before.arrays["h1"])


def test_index_folder_refuses_a_swapped_model(corpus, tmp_path):
    ckpt = packed_xml(tmp_path / "xml.pt", create_encoder("builtin").identity())
    build_index(ckpt, corpus / "corpus", tmp_path / "index", progress=False)
    packed_xml(tmp_path / "other.pt", create_encoder("builtin").identity(), max_clips=20)
    (tmp_path / "other.pt").replace(tmp_path / "index" / "model.pt")
    with pytest.raises(SearchIndexError, match="not the model the index was built with"):
        momentsearch.load(tmp_path / "index")


@pytest.mark.slow
def test_two_hour_video_ingests_and_searches_with_bounded_memory(tmp_path):
    d = tmp_path / "videos"
    d.mkdir()
    write_video(d / "long.mp4", seconds=7200.0, rate=1, w=32, h=32)
    tracemalloc.start()
    rep = ingest(d, tmp_path / "corpus", clip_seconds=2.0, fps=0.5, progress=False)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert rep.encoded == ["long"] and rep.video_seconds == pytest.approx(7200, abs=1)
    whole = 3600 * 64 * 64 * 3  # the sampled frames at the encoder's size: what holding the video would cost
    assert peak < whole / 4, f"ingest peak {peak / 2**20:.1f} MiB"
    ckpt = packed_xml(tmp_path / "xml.pt", create_encoder("builtin").identity(), max_clips=128)
    build_index(ckpt, tmp_path / "corpus", tmp_path / "index", progress=False)
    searcher = momentsearch.load(tmp_path / "index", device="cpu")
    assert searcher.index.n_clips[0] == 3600
    searcher.search("a black square", k=10)  # the query encoder loaded (its packed weights, 42.5 MB, are not a query's)
    tracemalloc.start()
    hits = searcher.search("a white square", k=10)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(hits) == 10 and all(h.end - h.start <= 8 * 2.0 + 1e-6 for h in hits)  # n_max 8 clips of 2 s
    assert peak < 3600 * 3600 * 4 / 4, f"search peak {peak / 2**20:.1f} MiB: a start x end map would be 49 MiB"


def test_subtitle_models_xml_and_minute_index_and_search_an_ingested_corpus(corpus, tmp_path):
    """SRT beside the videos -> a 384-d subtitle stream; XML with subtitles and MINUTE (both streams) index and
    search it as they do TVR; the same models over a corpus without subtitles are refused."""
    videos = tmp_path / "videos"
    videos.mkdir()
    for i, secs in enumerate((6.0, 8.0)):
        write_video(videos / f"talk{i}.mp4", seconds=secs, rate=8)
        (videos / f"talk{i}.srt").write_text("1\n00:00:01,000 --> 00:00:03,500\nhe opens the fridge\n\n"
                                             "2\n00:00:04,000 --> 00:00:05,000\nshe laughs\n", encoding="utf-8")
    ingest(videos, tmp_path / "c", clip_seconds=1.0, fps=2.0, progress=False)
    ident = create_encoder("builtin").identity()
    torch.manual_seed(0)
    models = {"xml": {"name": "xml", "hidden": 16, "max_clips": 16, "n_max": 8, "use_subtitle": True},
              "minute": {"name": "minute", "hidden": 16, "max_clips": 16, "n_max": 8, "localizer_layers": 1}}
    for name, cfg in models.items():
        fam = create_family(cfg)
        ckpt = pack_checkpoint(tmp_path / f"{name}.pt", fam, fam.build(InputDims(96, 384, 384)), ident)
        build_index(ckpt, tmp_path / "c", tmp_path / f"i_{name}", progress=False)
        hits = momentsearch.load(tmp_path / f"i_{name}", device="cpu").search("he opens the fridge", k=3)
        assert 1 <= len(hits) <= 3 and all(h.video_id in ("talk0", "talk1") and h.start < h.end for h in hits)
        with pytest.raises(SearchIndexError, match="reads a 384-d subtitle stream and the corpus has none"):
            build_index(ckpt, corpus / "corpus", tmp_path / f"j_{name}", progress=False)


def test_an_index_is_built_part_by_part_with_the_same_arrays(corpus, tmp_path, monkeypatch):
    """``momentsearch index`` encodes and writes PART_VIDEOS videos at a time into memory-mapped files: with
    parts of one video, and over a grown corpus (reused rows and new ones in one part), the arrays equal a
    one-part build's (up to one float16 step where batches of another shape round differently); an encoding
    whose row count disagrees with the corpus is refused, naming the video."""
    import momentsearch.serving.indexing as indexing
    from momentsearch.search.index import IndexWriter, VideoIndex

    ckpt = packed_xml(tmp_path / "xml.pt", create_encoder("builtin").identity())
    build_index(ckpt, corpus / "corpus", tmp_path / "whole", progress=False)
    monkeypatch.setattr(indexing, "PART_VIDEOS", 1)
    build_index(ckpt, corpus / "corpus", tmp_path / "parts", progress=False)
    whole, parts = (IndexFolder.open(tmp_path / n).index for n in ("whole", "parts"))
    assert parts.video_ids == whole.video_ids and np.array_equal(parts.offsets, whole.offsets)
    for name in whole.arrays:
        a, b = parts.arrays[name], whole.arrays[name]
        assert isinstance(a, np.memmap) and a.shape == b.shape and a.dtype == b.dtype
        # encoded in batches of another shape, a float32 value can round to the next float16: at most one float16
        # step apart, and rarely (on an AVX-512 CPU 1 of 304 entries of h2 differed, by 2**-9 at 2.4)
        assert np.allclose(a.astype(np.float32), b.astype(np.float32), rtol=2**-9, atol=2**-14), name
        assert np.mean(a != b) < 0.02, name
    assert parts.meta == whole.meta
    writer = IndexWriter(tmp_path / "w", ["a", "b"], [4.0, 2.0], [1.0, 1.0], [4, 2])
    wrong = VideoIndex(["a"], np.array([4.0]), np.array([1.0]), np.array([0, 3]), {"h": np.zeros((3, 2), np.float16)})
    with pytest.raises(SearchIndexError, match=r"video 'a': encoded into 3 clip rows, its corpus entry says 4 clips"):
        writer.write(0, wrong)
    writer.write(0, VideoIndex(["a"], np.array([4.0]), np.array([1.0]), np.array([0, 4]), {"h": np.ones((4, 2), np.float16)}))
    with pytest.raises(SearchIndexError, match="1 video\\(s\\) were never written"):
        writer.close({})


def test_an_index_built_for_another_query_encoder_is_refused(tmp_path) -> None:
    """The query encoder's identity is stored in index.json and checked against the model when the index opens;
    the spelling written before the registry (no ``encoder`` key) still opens."""
    import json
    import shutil

    from momentsearch.errors import SearchIndexError
    from momentsearch.serving.indexing import IndexFolder
    from served_index import build_served_index

    index = build_served_index(tmp_path)
    info = json.loads((index / "index.json").read_text())
    assert info["text_encoder"] == {"name": "all-MiniLM-L6-v2", "kind": "tokens", "dim": 384, "max_tokens": 32,
                                    "encoder": "minilm"}
    legacy = tmp_path / "legacy"
    shutil.copytree(index, legacy)
    (legacy / "index.json").write_text(json.dumps({**info, "text_encoder": {
        k: v for k, v in info["text_encoder"].items() if k != "encoder"}}))
    IndexFolder.open(legacy)
    (legacy / "index.json").write_text(json.dumps({**info, "text_encoder": {**info["text_encoder"], "max_tokens": 64}}))
    with pytest.raises(SearchIndexError, match=r"built for queries encoded by all-MiniLM-L6-v2 \(minilm, tokens, 64 "
                                               r"tokens\), and its model reads .*32 tokens.*build it again"):
        IndexFolder.open(legacy)


def test_index_json_is_one_typed_record_read_and_written_by_one_class(tmp_path) -> None:
    from momentsearch.errors import SearchIndexError
    from momentsearch.serving.index_info import CorpusRef, IndexInfo

    info = IndexInfo("xml", "abc", CorpusRef("/c", "../c", "f00", {"name": "builtin"}), {"v1": "[1.0]"},
                     "/m.pt", {"name": "all-MiniLM-L6-v2", "kind": "tokens"}, {"name": "builtin"}, 1, 5)
    info.write(tmp_path)
    assert IndexInfo.read(tmp_path) == info
    d = json.loads((tmp_path / "index.json").read_text())
    assert d["format"] == "momentsearch-index" and d["version"] == 1 and d["corpus"]["relative"] == "../c"
    for bad, message in ((dict(d, n_clips=-1), "n_videos and n_clips must be integers >= 0"),
                         (dict(d, corpus={**d["corpus"], "fingerprint": 7}), "corpus.fingerprint must be strings"),
                         (dict(d, text_encoder="minilm"), "'text_encoder' must be an object or null"),
                         (dict(d, version=2), "index folder version 2")):
        (tmp_path / "index.json").write_text(json.dumps(bad))
        with pytest.raises(SearchIndexError, match=message):
            IndexInfo.read(tmp_path)


def _vm_flags(path: Path) -> list[str]:
    """The VmFlags of this process's mappings of ``path`` (/proc/self/smaps)."""
    flags, inside = [], False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        if line[:1].isalnum() and "-" in line.split(" ", 1)[0]:  # a mapping's header line
            inside = line.rstrip().endswith(str(path))
        elif inside and line.startswith("VmFlags:"):
            flags.append(line)
    return flags


def test_a_served_index_reads_its_rows_at_random_where_they_exceed_memory(corpus, tmp_path, monkeypatch):
    """Past the page cache a fault's read-around filled memory with rows no query asked for (a served query at 1M:
    p50 1.45 s, 0.25 s once the rows were advised random); the kernel marks the advised mapping ``rr``. Exact search,
    which reads every row in order, and rows that fit in memory (100k: a cold start faulted 2,100-2,600 pages a query
    advised, 28 not) keep the read-around."""
    import momentsearch.search.index as index_module

    ckpt = packed_xml(tmp_path / "xml.pt", create_encoder("builtin").identity())
    build_index(ckpt, corpus / "corpus", tmp_path / "index", device="cpu", progress=False)
    h1 = (tmp_path / "index" / "arrays" / "clip.h1.npy").resolve()
    exact = momentsearch.load(tmp_path / "index", device="cpu", first_stage="exact")
    assert exact.search("a white square", k=2) and _vm_flags(h1) and all(" rr" not in f for f in _vm_flags(h1))
    del exact
    gc.collect()  # its mapping goes with it
    fits = momentsearch.load(tmp_path / "index", device="cpu", first_stage="faiss:Flat")  # (scan needs 256 clips)
    assert fits.search("a white square", k=2) and all(" rr" not in f for f in _vm_flags(h1))
    del fits
    gc.collect()
    monkeypatch.setattr(index_module, "memory_bytes", lambda: 1024)  # a machine the rows do not fit in
    scan = momentsearch.load(tmp_path / "index", device="cpu", first_stage="faiss:Flat")
    assert scan.search("a white square", k=2)
    assert _vm_flags(h1) and all(" rr" in f for f in _vm_flags(h1))
    assert scan.index.advise_random() == len(scan.index.arrays) == 2  # h1 and h2


def test_an_interrupted_build_goes_on_from_its_last_part(corpus, tmp_path, monkeypatch, capsys):
    """A build killed part-way (a million videos take 20 min here) resumes: only the parts it had not written are
    encoded again (the last written one too), and the index equals one built in one go. Each step says what it
    keeps, resumes or discards (a million videos' partial folder holds 33 GB)."""
    import momentsearch.serving.indexing as indexing
    from momentsearch.data.corpus_folder import CorpusFolder

    ckpt = packed_xml(tmp_path / "xml.pt", create_encoder("builtin").identity())
    monkeypatch.setattr(indexing, "PART_VIDEOS", 1)
    family = type(load_checkpoint(ckpt).family)
    real, calls = family.encode_corpus, []

    def counted(self, model, store, videos, *a, **k):
        calls.append([v.video_id for v in videos])
        if len(calls) == 3 and fail:
            raise KeyboardInterrupt  # killed while encoding the third video
        return real(self, model, store, videos, *a, **k)

    monkeypatch.setattr(family, "encode_corpus", counted)
    fail = True
    with pytest.raises(KeyboardInterrupt):
        build_index(ckpt, corpus / "corpus", tmp_path / "index", device="cpu", progress=False)
    assert not (tmp_path / "index").exists() and (tmp_path / ".index.partial" / indexing.PROGRESS).is_file()
    said = capsys.readouterr().out
    assert f"the videos written so far are kept in {tmp_path / '.index.partial'}" in said
    assert "Run the same command again to go on from there, or delete that folder" in said
    fail, calls[:] = False, []
    report = build_index(ckpt, corpus / "corpus", tmp_path / "index", device="cpu", progress=False)
    ids = CorpusFolder.open(corpus / "corpus").video_ids  # (other tests of the module grow this corpus)
    assert len(ids) >= 3 and calls == [[v] for v in ids[2:]]  # the first two were on disk
    assert f"resuming the interrupted build in .index.partial: 2 of {len(ids)} videos on disk" in capsys.readouterr().out
    assert report.resumed == 2 and "resumed an interrupted build at video 2" in report.summary()
    assert not (tmp_path / ".index.partial").exists()
    stale = tmp_path / ".whole.partial"  # another build's leftovers (other weights): replaced, and said so
    stale.mkdir()
    (stale / indexing.PROGRESS).write_text(json.dumps({"key": "another", "videos": 2, "meta": {}}))
    (stale / "rows.npy").write_bytes(bytes(3 * 2**20))
    report = build_index(ckpt, corpus / "corpus", tmp_path / "whole", device="cpu", progress=False)
    assert report.resumed == 0 and calls == [[v] for v in ids[2:] + ids]
    assert "discarding .whole.partial, an interrupted build of other weights, corpus or videos (3.0 MiB)" in \
        capsys.readouterr().out
    a, b = IndexFolder.open(tmp_path / "index").index, IndexFolder.open(tmp_path / "whole").index
    assert a.video_ids == b.video_ids == ids and a.meta == b.meta
    for name in a.arrays:
        np.testing.assert_array_equal(np.asarray(a.arrays[name]), np.asarray(b.arrays[name]))
    with open(tmp_path / ".whole.partial.lock", "a") as held:  # a second build of the same folder waits its turn
        import fcntl

        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(SearchIndexError, match="another `momentsearch index` is writing this index"):
            build_index(ckpt, corpus / "corpus", tmp_path / "whole", device="cpu", progress=False)
