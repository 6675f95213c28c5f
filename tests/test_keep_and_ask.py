"""Keep a moment as a file (momentsearch export, search --export, GET /v1/clips) and ask with a picture or a
found moment (search(image=), search(like=), the CLI, /v1/search), on real files: the cut's frames against the
request on every codec the ingest tests use, and each bad input's answer."""

from __future__ import annotations

import base64
import io
import json
import os
from pathlib import Path

import av
import numpy as np
import pytest

import momentsearch
from example_index import build_example_index, scene
from momentsearch.errors import QueryError, VideoChangedError, VideoDecodeError
from momentsearch.serving.query import MomentRef, Query
from momentsearch.video.export import check_span, clip_name, export_moment, moment_cues, stream_moment
from momentsearch.video.images import ImageError, read_image
from video_files import write_video

CODECS = [("mp4", "libx264", "mp4"), ("matroska", "libx264", "mkv"), ("webm", "libvpx-vp9", "webm"),
          ("avi", "mpeg4", "avi"), ("mov", "mjpeg", "mov")]


def frame_times(path: Path) -> tuple[list[float], float]:
    """(the video frames' times, seconds of audio) of a file."""
    with av.open(str(path)) as c:
        times = [float(f.time) for f in c.decode(video=0)]
    with av.open(str(path)) as c:
        audio = sum(f.samples / f.sample_rate for f in c.decode(audio=0)) if c.streams.audio else 0.0
    return times, audio


@pytest.mark.parametrize("fmt,codec,suffix", CODECS)
def test_the_cut_is_exact_to_the_frame_on_every_codec(tmp_path: Path, fmt: str, codec: str, suffix: str) -> None:
    src = write_video(tmp_path / f"v.{suffix}", fmt, codec, seconds=6.0, rate=10)
    got = export_moment(src, 1.25, 3.5, tmp_path / "out.mp4")
    # the frame shown at 1.25 s is the one of 1.2 s; the last one starting before 3.5 s is 3.4 s: 23 frames
    assert (got.frames, got.first_frame, got.last_frame, got.reencoded) == (23, pytest.approx(1.2), pytest.approx(3.4),
                                                                            "all")
    times, _ = frame_times(tmp_path / "out.mp4")
    assert len(times) == 23 and times[0] == 0.0
    np.testing.assert_allclose(times[1:], np.arange(1.3, 3.45, 0.1) - 1.25, atol=1e-3)  # re-timed from the start


def test_audio_is_trimmed_to_the_sample_and_a_stream_is_a_playable_file(tmp_path: Path) -> None:
    from example_index import write_scenes

    src = write_scenes(tmp_path / "k.mp4", ["red", "blue", "red"], audio=True)
    got = export_moment(src, 2.0, 5.5, tmp_path / "o.mp4")
    assert got.audio_seconds == pytest.approx(3.5, abs=1e-3)
    times, audio = frame_times(tmp_path / "o.mp4")
    assert len(times) == 35 and audio == pytest.approx(3.5, abs=0.03)  # (AAC pads its last frame)
    chunks = list(stream_moment(src, 2.0, 5.5))
    assert len(chunks) > 1  # written as it was encoded
    (tmp_path / "s.mp4").write_bytes(b"".join(chunks))
    s_times, s_audio = frame_times(tmp_path / "s.mp4")
    # a fragmented MP4 has no edit list: the video starts at 0 (no B-frames), the AAC's priming (1,024 samples) shows
    assert s_times[0] == 0.0 and len(s_times) == 35 and s_audio == pytest.approx(3.5 + 1024 / 16000, abs=0.03)


def test_spans_names_and_cues_by_hand() -> None:
    assert check_span(1, 2.5, 10.0) == (1.0, 2.5)
    for bad, why in [((-1, 2), "start must be >= 0"), ((3, 3), "must be after start"), ((11, 12), "past the video"),
                     ((5, 10.2), "end 10.2 s is past"), (("1", 2), "start must be a number"),
                     ((0, float("nan")), "end must be a number"), ((0, 9), "at most 5 s")]:
        with pytest.raises(QueryError, match=why):
            check_span(*bad, duration=10.0, max_seconds=5.0)
    assert clip_name("holiday/beach day.mov", 12.5, 17) == "holiday_beach_day.mov_12.50-17.00.mp4"

    class Cue:
        def __init__(self, start: float, end: float, text: str):
            self.start, self.end, self.text = start, end, text

    cues = [Cue(0.5, 2.0, "before"), Cue(2.5, 4.0, "inside --> here"), Cue(5.0, 9.0, "runs past")]
    assert moment_cues(cues, 3.0, 6.0) == ("1\n00:00:00,000 --> 00:00:01,000\ninside -> here\n\n"
                                           "2\n00:00:02,000 --> 00:00:03,000\nruns past\n\n")
    assert moment_cues(cues, 3.0, 6.0, "vtt").startswith("WEBVTT\n\n00:00:00.000 --> 00:00:01.000\n")
    assert moment_cues(cues, 10.0, 12.0) == ""


def test_bad_pictures_and_moments_are_refused_with_the_reason(tmp_path: Path) -> None:
    buf = io.BytesIO()
    from PIL import Image

    Image.fromarray(scene("blue")).save(buf, format="PNG")
    assert read_image(buf.getvalue()).shape == (48, 64, 3)
    cases = [(b"", "empty"), (b"GIF89a not really", "not a picture|damaged"), (buf.getvalue()[:60], "damaged"),
             (b"hello", "not a picture"), (np.zeros((4, 4, 2), np.uint8), "RGB"),
             (np.full((4, 4, 3), 2.0), "uint8, or floats"), (tmp_path / "none.jpg", "no such picture"), (3, "not int")]
    for data, why in cases:
        with pytest.raises(ImageError, match=why):
            read_image(data)
    big = io.BytesIO()
    Image.new("L", (9000, 5000)).save(big, format="PNG")  # 45 M pixels: refused from the header
    with pytest.raises(ImageError, match="at most 40,000,000"):
        read_image(big.getvalue())
    for bad in ["x", "v:1", "v:3-2", ("v", 1), ("", 1, 2), ("v", True, 2)]:
        with pytest.raises(QueryError):
            MomentRef.of(bad)
    assert MomentRef.of("a:b:1-2.5") == MomentRef("a:b", 1.0, 2.5)
    with pytest.raises(QueryError, match="not both"):
        Query(image=scene("red"), like=("v", 0, 1))
    with pytest.raises(QueryError, match="needs words"):
        Query()


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_example_index(tmp_path_factory.mktemp("example"))


def test_a_picture_finds_its_scene_and_a_moment_finds_itself_first(example: Path) -> None:
    s = momentsearch.load(example, device="cpu")
    for name, want in [("blue", ("kitchen", 3.0, 6.0)), ("checker", ("garden", 3.0, 6.0)),
                       ("stripes", ("street", 3.0, 6.0)), ("green", ("garden", 0.0, 3.0))]:
        top = s.search(image=scene(name, 120, 160), k=3)[0]  # another size than the videos: scaled as frames are
        assert (top.video_id, top.start, top.end) == want, name
        assert 0.72 < top.score <= 0.75 + 1e-5  # seen (1 + cos) / 2 with cos ~ 1, said 0.5 (a picture says nothing)
    hits = s.search(like=("garden", 3.0, 6.0), k=3)
    assert (hits[0].video_id, hits[0].start, hits[0].end) == ("garden", 3.0, 6.0) and hits[0].score > 0.749
    # words and a picture: the spoken line about the blue wall, and the blue scene, both count
    both = s.search(Query("the blue wall is painted", image=scene("blue")), k=2)
    words = s.search("the blue wall is painted", k=2)
    assert both[0].video_id == words[0].video_id == "kitchen" and both[0].score > words[0].score + 0.1
    with pytest.raises(QueryError, match="no video 'nowhere'"):
        s.search(like=("nowhere", 0, 1))
    with pytest.raises(QueryError, match="past the end"):
        s.search(like=("street", 7.0, 8.0))
    with pytest.raises(QueryError, match="not text"):  # the fuzz run's find: the CLIP tokenizer's TypeError before
        s.search("a \ud800 wall")


def test_export_and_search_with_a_picture_on_the_command_line(example: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from momentsearch.cli.main import app

    run = CliRunner().invoke
    r = run(app, ["export", str(example), "kitchen", "--from", "3", "--to", "6", "--out", str(tmp_path)])
    assert r.exit_code == 0, r.output
    out = tmp_path / "kitchen_3.00-6.00.mp4"
    times, audio = frame_times(out)
    assert len(times) == 30 and audio == pytest.approx(3.0, abs=0.03)
    assert (tmp_path / "kitchen_3.00-6.00.srt").read_text() == ("1\n00:00:00,500 --> 00:00:02,000\n"
                                                                 "the blue wall is painted\n\n")
    r = run(app, ["export", str(example), "kitchen", "--from", "3", "--to", "6", "--out", str(tmp_path)])
    assert r.exit_code != 0 and "exists" in str(r.exception)
    from PIL import Image

    Image.fromarray(scene("checker", 96, 128)).save(tmp_path / "q.png")
    r = run(app, ["search", str(example), "--image", str(tmp_path / "q.png"), "-k", "1", "--json",
                  "--export", str(tmp_path / "hits")])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout.split("\n[", 1)[-1] if not r.stdout.startswith("[") else r.stdout)
    m = got[0]["moments"][0]
    assert got[0]["query"] == "[picture]" and (m["video_id"], m["start"], m["end"]) == ("garden", 3.0, 6.0)
    assert [p.name for p in (tmp_path / "hits").iterdir()] == ["garden_3.00-6.00.mp4"]
    r = run(app, ["search", str(example), "--like", "street:0-3", "-k", "1", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["moments"][0]["video_id"] == "street"


@pytest.fixture(scope="module")
def client(example: Path):
    from fastapi.testclient import TestClient

    from momentsearch.service import create_app

    with TestClient(create_app(momentsearch.load(example, device="cpu"), max_clip_seconds=5.0)) as c:
        yield c


def test_the_service_asks_with_pictures_and_moments_and_keeps_clips(client, example: Path, tmp_path: Path) -> None:
    buf = io.BytesIO()
    from PIL import Image

    Image.fromarray(scene("stripes")).save(buf, format="JPEG")
    r = client.post("/v1/search", json={"image": base64.b64encode(buf.getvalue()).decode(), "k": 2})
    assert r.status_code == 200, r.text
    assert r.json()["query"] == "[picture]" and r.json()["moments"][0]["video_id"] == "street"
    r = client.post("/v1/search", json={"like": {"video_id": "kitchen", "start": 3, "end": 6}, "k": 1})
    top = r.json()["moments"][0]  # its own span (3-6 s), or the line said inside it (3.5-5 s): the same score
    assert r.status_code == 200 and top["video_id"] == "kitchen" and 3.0 <= top["start"] < top["end"] <= 6.0
    assert r.json()["query"] == "like kitchen 3-6"
    for body, status, why in [({"image": "%%%"}, 400, "not base64"), ({"image": base64.b64encode(b"no").decode()}, 400,
                                                                      "not a picture"),
                              ({"like": {"video_id": "nowhere", "start": 0, "end": 1}}, 400, "no video"),
                              ({"like": {"video_id": "kitchen", "start": 0}}, 422, "end"), ({"k": 3}, 400, "give query"),
                              ({"image": "A" * (2 << 20)}, 413, "")]:
        r = client.post("/v1/search", json=body)
        assert r.status_code == status and why in r.text, (body if len(str(body)) < 99 else "big", r.text[:200])
    r = client.post("/v1/search", content=b'{"query": "a \\ud800 wall"}', headers={"content-type": "application/json"})
    assert r.status_code == 422 and "unicode" in r.json()["error"]  # a lone surrogate: refused by the schema
    r = client.get("/v1/clips/kitchen", params={"start": 3, "end": 6})
    assert r.status_code == 200 and r.headers["content-type"] == "video/mp4"
    assert "kitchen_3.00-6.00.mp4" in r.headers["content-disposition"]
    (tmp_path / "c.mp4").write_bytes(r.content)
    times, audio = frame_times(tmp_path / "c.mp4")  # streamed: a fragmented MP4, with the AAC priming
    assert len(times) == 30 and audio == pytest.approx(3.0 + 1024 / 16000, abs=0.03)
    r = client.get("/v1/cues/kitchen", params={"start": 3, "end": 6})
    assert r.status_code == 200 and "00:00:00.500 --> 00:00:02.000\nthe blue wall" in r.text
    for path, params, status, why in [("kitchen", {"start": 3, "end": 9.5}, 400, "past the video"),
                                      ("kitchen", {"start": 0, "end": 6}, 400, "at most 5 s"),
                                      ("kitchen", {"start": 4, "end": 2}, 400, "after start"),
                                      ("nowhere", {"start": 0, "end": 1}, 404, "no video"),
                                      ("kitchen", {"start": "x", "end": 1}, 422, "start")]:
        r = client.get(f"/v1/clips/{path}", params=params)
        assert r.status_code == status and why in r.json()["error"], r.text


def test_a_changed_file_is_a_409_and_a_words_only_family_says_so(example: Path, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from momentsearch.service import create_app
    from served_index import build_served_index

    video = example.parent / "videos" / "street.mp4"
    st = video.stat()
    try:
        os.utime(video, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        with TestClient(create_app(momentsearch.load(example, device="cpu"))) as c:
            r = c.get("/v1/clips/street", params={"start": 0, "end": 1})
            assert r.status_code == 409 and "changed on disk" in r.json()["error"]
        from momentsearch.serving.clips import export_clip, index_corpus

        with pytest.raises(VideoChangedError):
            export_clip(index_corpus(example), "street", 0, 1, tmp_path)
    finally:
        os.utime(video, ns=(st.st_atime_ns, st.st_mtime_ns))
    xml = build_served_index(tmp_path / "xml")
    with TestClient(create_app(momentsearch.load(xml, device="cpu"))) as c:
        r = c.post("/v1/search", json={"like": {"video_id": "clip0", "start": 0, "end": 1}})
        assert r.status_code == 400 and "asked in words only" in r.json()["error"]
    with pytest.raises(VideoDecodeError, match="not a video"):
        (tmp_path / "junk.mp4").write_bytes(b"\0" * 100)
        export_moment(tmp_path / "junk.mp4", 0, 1, tmp_path / "o.mp4")


def test_the_client_asks_with_a_picture_and_a_moment_and_the_key_guards_clips(example: Path, tmp_path: Path) -> None:
    from PIL import Image

    from momentsearch.client import Client
    from momentsearch.service import create_app
    from served_index import run_live

    Image.fromarray(scene("green", 96, 128)).save(tmp_path / "g.png")
    app = create_app(momentsearch.load(example, device="cpu"), api_key="keep-and-ask-key")
    url, srv, thread = run_live(app)
    try:
        c = Client(url, api_key="keep-and-ask-key")
        top = c.search(image=tmp_path / "g.png", k=1)[0]
        assert (top.video_id, top.start, top.end) == ("garden", 0.0, 3.0)
        assert c.search(like=("street", 3.0, 6.0), k=1)[0].video_id == "street"
        with pytest.raises(QueryError, match="needs words"):
            c.search()
        import httpx

        assert httpx.get(url + "/v1/clips/kitchen", params={"start": 0, "end": 1}).status_code == 401
        assert httpx.get(url + "/v1/alerts").status_code == 401
    finally:
        srv.should_exit = True
        thread.join(10)


def test_a_sharded_index_asks_with_a_picture_and_a_moment_as_one_index_does(example: Path, tmp_path: Path) -> None:
    """The moment's vectors come from the shard that holds its video; the picture is encoded at the head."""
    from momentsearch.serving.shards import split_index

    split_index(example, 2, tmp_path / "sharded")
    whole, sharded = momentsearch.load(example, device="cpu"), momentsearch.load(tmp_path / "sharded", device="cpu")
    for q in (Query(like=("street", 3.0, 6.0)), Query(like=("kitchen", 0.0, 3.0)), Query(image=scene("checker")),
              Query("the blue wall is painted", image=scene("blue"))):
        a, b = whole.search(q, k=4), sharded.search(q, k=4)
        assert [(h.video_id, h.start, h.end) for h in a] == [(h.video_id, h.start, h.end) for h in b], q.label
        np.testing.assert_allclose([h.score for h in a], [h.score for h in b], atol=1e-5)
    with pytest.raises(QueryError, match="no video 'nowhere'"):
        sharded.search(like=("nowhere", 0, 1))
