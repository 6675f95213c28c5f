"""Search what is said (issue 40): the seen/said moment rule by hand, speech-only search of a new user's folder
offline (SRT, whisper JSON, subtitle streams in MP4 and MKV), fused with a (random) CLIP, and the full path of
real footage: ingest with a speech stream, pack, index, search, serve, play."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import momentsearch
from clip_models import tiny_hf_clip
from conftest import SHARED_DATA
from momentsearch.cli.main import app
from momentsearch.errors import ConfigError, SearchIndexError
from momentsearch.models.clip.spans import video_spans
from momentsearch.serving.checkpoint import load_checkpoint
from momentsearch.serving.indexing import build_index
from momentsearch.serving.packing import pack
from momentsearch.video.ingest import ingest
from video_files import write_user_folder

CHARADES = SHARED_DATA / "examples" / "charades.mp4"
run = CliRunner().invoke


def test_seen_and_said_spans_by_hand() -> None:
    """4 clips of 2 s (the video 7.5 s). Seen c = [0, .1, 0, .5]: mean .15, std .206, threshold (kappa .5) .253:
    clip 3 -> 6.0-7.5 s. Said s = [0, .6, .2, 0] on clips 1-2 (cue A 2.5-3.5 s in clip 1, cue B 4.2-5.0 s in
    clip 2): mean .4, std .2, threshold .5: clip 1 -> cue A, 2.5-3.5 s; each spoken clip's cues are candidates
    too (cue B). Fused scores (V + S) / 2: the seen span ((1 + .5) / 2 + (1 + 0) / 2) / 2 = .625, cue A
    ((1 + .1) / 2 + (1 + .6) / 2) / 2 = .675, cue B ((1 + 0) / 2 + (1 + .2) / 2) / 2 = .55."""
    c = np.array([0.0, 0.1, 0.0, 0.5])
    s = np.array([0.0, 0.6, 0.2, 0.0])
    cues = np.array([[-1, -1], [2.5, 3.5], [4.2, 5.0], [-1, -1]])
    st, ed, sc = video_spans(c, s, cues, 2.0, 7.5, 0.5, 16, 1)
    assert np.allclose(st, [2.5, 6.0, 4.2]) and np.allclose(ed, [3.5, 7.5, 5.0])
    assert np.allclose(sc, [0.675, 0.625, 0.55])
    st, ed, sc = video_spans(c, None, cues, 2.0, 7.5, 0.5, 16, 1)  # seen only: V
    assert np.allclose([st[0], ed[0], sc[0]], [6.0, 7.5, 0.75]) and len(st) == 1
    st, ed, sc = video_spans(None, s, cues, 2.0, 7.5, 0.5, 16, 1)  # said only: S = (1 + .6) / 2, (1 + .2) / 2
    assert np.allclose(st, [2.5, 4.2]) and np.allclose(ed, [3.5, 5.0]) and np.allclose(sc, [0.8, 0.6])
    # cues that run on: both spoken clips at the threshold -> one moment from A's start to B's end, first (longest)
    st, ed, sc = video_spans(None, np.array([0, 0.6, 0.6, 0]), cues, 2.0, 7.5, 0.5, 16, 1)
    assert np.allclose([st[0], ed[0], sc[0]], [2.5, 5.0, 0.8]) and len(st) == 3
    st, ed, _ = video_spans(None, np.array([0, 0.6, 0.6, 0]), cues, 2.0, 7.5, 0.5, 1, 1)  # max_clips 1: cut
    assert sorted(zip(st, ed)) == [(2.5, 3.5), (4.2, 5.0)]  # no merged moment
    # nothing said in the video: no said moment
    assert len(video_spans(None, np.zeros(4), np.full((4, 2), -1.0), 2.0, 7.5, 0.5, 16, 1)[0]) == 0


@pytest.fixture(scope="module")
def said_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("said")
    write_user_folder(root / "videos")
    ingest(root / "videos", root / "corpus", progress=False)
    r = run(app, ["pack", "clip", "--speech", "--out", str(root / "said.pt")])
    assert r.exit_code == 0 and "searches what is said" in r.output, r.output
    r = run(app, ["index", str(root / "said.pt"), "--corpus", str(root / "corpus"), "--out", str(root / "index")])
    assert r.exit_code == 0, r.output
    return root


@pytest.mark.parametrize("query, video, start, end", [
    ("the kettle is boiling over", "kitchen_h264", 3.0, 5.5),  # the second cue of an SRT
    ("who left the milk out", "kitchen_h264", 0.5, 2.0),
    ("happy birthday to you", "phone_movtext", 2.0, 3.5),  # mov_text inside an MP4
    ("the derivative of a constant", "lecture_subrip", 0.5, 2.5),  # SubRip inside an MKV
    ("flying over a lake", "drone_hevc", 1.0, 3.5),  # a whisper JSON transcript
])
def test_a_speech_query_finds_where_it_is_said_offline(said_index: Path, query, video, start, end) -> None:
    r = run(app, ["search", str(said_index / "index"), query, "-k", "3", "--json"])
    assert r.exit_code == 0, r.output
    top = json.loads(r.stdout)[0]["moments"][0]
    assert (top["video_id"], top["start"], top["end"]) == (video, start, end)
    assert top["score"] > 0.75  # (1 + cosine) / 2 of MiniLM: the said text against the query


def test_said_only_needs_a_corpus_with_speech(said_index: Path, tmp_path: Path) -> None:
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "a.mov").write_bytes((said_index / "videos" / "phone_mjpeg.mov").read_bytes())
    ingest(tmp_path / "v", tmp_path / "c", progress=False)
    with pytest.raises(SearchIndexError, match="holds nothing said .*put VIDEO.srt, VIDEO.vtt or a whisper VIDEO.json"):
        build_index(said_index / "said.pt", tmp_path / "c", tmp_path / "i", progress=False)
    with pytest.raises(ConfigError, match="give --encoder .* --speech to search what is said"):
        pack("clip", tmp_path / "x.pt")
    info = load_checkpoint(said_index / "said.pt").family.text_encoder
    assert info["name"] == "said:all-MiniLM-L6-v2" and info["speech"]["config"]["max_tokens"] == 128


def test_fused_with_a_random_clip_scores_seen_and_said(tmp_path: Path) -> None:
    """Fused: the said moment still comes first for a speech query, its score is (V + S) / 2 with S its
    said score, and the video's retrieval score bounds every moment ((1 + s_vr) / 2)."""
    hf = tiny_hf_clip(tmp_path / "clip")
    write_user_folder(tmp_path / "videos")
    ingest(tmp_path / "videos", tmp_path / "corpus", encoder="hf_clip", encoder_options={"weights": str(hf)},
           progress=False)
    pack("clip", tmp_path / "fused.pt", "hf_clip", hf, speech=True)
    pack("clip", tmp_path / "said.pt", speech=True)
    for name in ("fused", "said"):
        build_index(tmp_path / f"{name}.pt", tmp_path / "corpus", tmp_path / name, progress=False)
    fused, said = momentsearch.load(tmp_path / "fused"), momentsearch.load(tmp_path / "said")
    q = "the kettle is boiling over"
    f_top, s_top = fused.search(q, k=5)[0], said.search(q, k=5)[0]
    assert (f_top.video_id, f_top.start, f_top.end) == ("kitchen_h264", 3.0, 5.5) == (s_top.video_id, s_top.start, s_top.end)
    seen = fused.index.arrays["img"]  # (clips, 2, width): seen row 0, said row 1
    assert seen.shape[1] == 2 and fused.index.arrays["cues"].shape == (len(seen), 2)
    v = fused.index.video_ids.index("kitchen_h264")
    a = int(fused.index.offsets[v])
    tokens = fused.queries.encode_many([q])[0]  # (2, width): the CLIP and MiniLM query vectors
    img = np.asarray(seen[a + 1: a + 3, 0], np.float32)  # clips 1-2 hold 3.0-5.5 s
    cos = img @ tokens[0] / np.linalg.norm(img, axis=1) / np.linalg.norm(tokens[0])
    v_score = (1 + cos.mean()) / 2
    assert f_top.score == pytest.approx((v_score + s_top.score) / 2, abs=1e-3)
    for h in fused.search(q, k=20):
        vs = fused.video_scores([q])[0, fused.index.video_ids.index(h.video_id)]
        assert h.score <= (1 + vs) / 2 + 1e-4


@pytest.mark.skipif(not CHARADES.is_file(), reason=f"needs {CHARADES} (the real video; set MOMENTSEARCH_SHARED_DATA)")
def test_real_footage_full_path_ingest_index_search_serve_play(said_index: Path, tmp_path: Path) -> None:
    """examples/charades.mp4 with an SRT of what is said, beside the rendered user folder: ingest, pack, index,
    search (CLI), serve (/v1/search), play (/videos range request) and the said text beside the moment."""
    from fastapi.testclient import TestClient

    from momentsearch.service.app import create_app

    videos = tmp_path / "videos"
    videos.mkdir()
    (videos / "charades.mp4").symlink_to(CHARADES)
    (videos / "charades.srt").write_text("1\n00:00:03,000 --> 00:00:07,500\nI am going to open the wardrobe now\n\n"
                                         "2\n00:00:12,000 --> 00:00:15,000\nwhere did I put my shoes\n")
    for f in ("kitchen_h264.mp4", "kitchen_h264.srt", "phone_movtext.mp4"):
        (videos / f).write_bytes((said_index / "videos" / f).read_bytes())
    r = run(app, ["ingest", str(videos), "--out", str(tmp_path / "c")])
    assert r.exit_code == 0 and "3 video(s) encoded" in r.output, r.output
    r = run(app, ["index", str(said_index / "said.pt"), "--corpus", str(tmp_path / "c"), "--out", str(tmp_path / "i")])
    assert r.exit_code == 0, r.output
    r = run(app, ["search", str(tmp_path / "i"), "looking for my shoes", "--json"])
    top = json.loads(r.stdout)[0]["moments"][0]
    assert (top["video_id"], top["start"], top["end"]) == ("charades", 12.0, 15.0)
    searcher = momentsearch.load(tmp_path / "i")
    with TestClient(create_app(searcher, access_log=False)) as client:
        got = client.post("/v1/search", json={"query": "open the wardrobe", "k": 2}).json()
        m = got["moments"][0]
        assert (m["video_id"], m["start"], m["end"]) == ("charades", 3.0, 7.5)
        assert "open the wardrobe" in (m.get("annotation") or "")
        part = client.get(m["video_url"], headers={"Range": "bytes=0-1023"})
        assert part.status_code == 206 and len(part.content) == 1024
        assert part.content[4:8] == b"ftyp"  # the real MP4's first box: the browser gets the file itself


def test_arrange_by_hand() -> None:
    """Time range: moments overlapping [3, 6) s; grouping: videos by their best moment, 2 moments each."""
    from momentsearch.search.ranked import Hit
    from momentsearch.serving.filters import arrange, check_arrange

    hits = [Hit("a", 0, 2, .9), Hit("b", 4, 5, .8), Hit("a", 5, 9, .7), Hit("a", 2.5, 3, .6), Hit("b", 7, 8, .5),
            Hit("c", 1, 3.5, .4), Hit("a", 10, 12, .3)]
    assert [(h.video_id, h.start) for h in arrange(hits, 3.0, 6.0)] == [("b", 4), ("a", 5), ("c", 1)]
    assert [(h.video_id, h.start) for h in arrange(hits, per_video=2)] == [
        ("a", 0), ("a", 5), ("b", 4), ("b", 7), ("c", 1)]
    assert [(h.video_id, h.start) for h in arrange(hits, time_from=6.0, per_video=1)] == [("a", 5), ("b", 7)]
    for bad, message in (((5.0, 2.0, None), "time_to .* must be after time_from"), ((None, None, 0), "per_video"),
                         ((-1.0, None, None), "time_from must be a number of seconds >= 0"),
                         ((True, None, None), "time_from must be a number"), ((None, 10**400, None), "time_to must be")):
        with pytest.raises(Exception, match=message):
            check_arrange(*bad)


def test_time_range_and_grouping_alike_in_python_cli_and_service(said_index: Path) -> None:
    from fastapi.testclient import TestClient

    from momentsearch.service.app import create_app

    s = momentsearch.load(said_index / "index")
    q = "the milk and the kettle"
    inside = s.search(q, k=5, videos=["kitchen_h264"], time_from=0.0, time_to=2.5)
    assert [(h.start, h.end) for h in inside] == [(0.5, 2.0)]  # the 3.0-5.5 cue does not overlap [0, 2.5)
    grouped = s.search(q, k=4, per_video=2)
    assert [h.video_id for h in grouped][:2] == ["kitchen_h264", "kitchen_h264"]
    assert len({h.video_id for h in grouped}) == 3 and len(grouped) == 4
    r = run(app, ["search", str(said_index / "index"), q, "--json", "-k", "4", "--group-by-video", "--per-video", "2"])
    assert [(m["video_id"], m["start"]) for m in json.loads(r.stdout)[0]["moments"]] == [
        (h.video_id, h.start) for h in grouped]
    r = run(app, ["search", str(said_index / "index"), q, "--json", "--video", "kitchen_h264", "--from", "0",
                  "--to", "2.5"])
    assert [(m["start"], m["end"]) for m in json.loads(r.stdout)[0]["moments"]] == [(0.5, 2.0)]
    r = run(app, ["search", str(said_index / "index"), q, "--json", "--modified-before", "2000-01-01"])
    assert json.loads(r.stdout)[0]["moments"] == []  # every file was written today
    r = run(app, ["search", str(said_index / "index"), q, "--json", "-k", "4", "--group-by-video", "--per-video", "2",
                  "--modified-after", "2000-01-01"])
    assert [(m["video_id"], m["start"]) for m in json.loads(r.stdout)[0]["moments"]] == [
        (h.video_id, h.start) for h in grouped]
    with TestClient(create_app(s, access_log=False)) as client:
        got = client.post("/v1/search", json={"query": q, "k": 4, "group_by_video": True, "per_video": 2}).json()
        assert [(m["video_id"], m["start"]) for m in got["moments"]] == [(h.video_id, h.start) for h in grouped]
        got = client.post("/v1/search", json={"query": q, "videos": ["kitchen_h264"], "time_from": 0,
                                              "time_to": 2.5}).json()
        assert [(m["start"], m["end"]) for m in got["moments"]] == [(0.5, 2.0)]
        bad = client.post("/v1/search", json={"query": q, "time_from": 5, "time_to": 2})
        assert bad.status_code == 400 and "time_to (2) must be after time_from (5)" in bad.json()["error"]


def test_an_index_behind_its_corpus_says_so_everywhere(said_index: Path, tmp_path: Path) -> None:
    """More videos ingested after the index was built: load warns, search prints it on stderr, /health counts."""
    import shutil
    import warnings

    from fastapi.testclient import TestClient

    from momentsearch.service.app import create_app
    from momentsearch.serving.freshness import StaleIndexWarning

    videos = tmp_path / "videos"
    shutil.copytree(said_index / "videos", videos)
    ingest(videos, tmp_path / "corpus", progress=False)
    build_index(said_index / "said.pt", tmp_path / "corpus", tmp_path / "index", progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert momentsearch.load(tmp_path / "index").stale is None  # current: no warning
    (videos / "kitchen_h264.srt").write_text("1\n00:00:01,000 --> 00:00:02,000\nthe toast is burning\n")
    (videos / "voice_memo.m4a").unlink()
    shutil.copy(videos / "kitchen_h264.mp4", videos / "kitchen2.mp4")
    (videos / "phone_mjpeg.mov").unlink()
    ingest(videos, tmp_path / "corpus", progress=False)
    with pytest.warns(StaleIndexWarning, match=r"behind its corpus .*: 1 new, 1 changed and 1 removed video\(s\)"):
        s = momentsearch.load(tmp_path / "index")
    assert (s.stale.new, s.stale.changed, s.stale.removed) == (["kitchen2"], ["kitchen_h264"], ["phone_mjpeg"])
    r = CliRunner().invoke(app, ["search", str(tmp_path / "index"), "toast", "--json"])
    assert r.exit_code == 0 and "warning: the index" in r.stderr and "momentsearch index" in r.stderr
    json.loads(r.stdout)  # stdout stays the results
    with TestClient(create_app(s, access_log=False)) as client:
        assert client.get("/health").json()["behind_corpus"] == {"new": 1, "changed": 1, "removed": 1}
    build_index(tmp_path / "index" / "model.pt", tmp_path / "corpus", tmp_path / "index", progress=False)
    assert momentsearch.load(tmp_path / "index").search("the toast is burning", k=1)[0].video_id in (
        "kitchen_h264", "kitchen2")


def test_said_needs_minilm_vectors_not_any_384_d_stream(said_index: Path, tmp_path: Path) -> None:
    """A corpus whose subtitle stream is 384-d but made by another encoder (a dataset's own features) is refused
    by name, not searched with the wrong vectors."""
    import shutil

    from momentsearch.data.corpus_folder import CorpusFolder

    shutil.copytree(said_index / "corpus", tmp_path / "c")
    man = CorpusFolder.open(tmp_path / "c").manifest
    man.streams["subtitle"]["encoder"] = {"name": "dataset:subtitle"}
    man.write(tmp_path / "c")
    with pytest.raises(SearchIndexError, match="subtitle stream was made by dataset:subtitle"):
        build_index(said_index / "said.pt", tmp_path / "c", tmp_path / "i", progress=False)
