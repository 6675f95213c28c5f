"""A new user's folder of ordinary files, ingested as they come (issue 40): every real video is kept, a bad
sidecar costs only itself (reported with file and line), a photo is not a video, and what is said is read
from SRT, WebVTT, whisper JSON and subtitle streams inside MP4 and MKV."""

from __future__ import annotations

import json

import pytest

from momentsearch.data.corpus_folder import CorpusFolder
from momentsearch.data.transcripts import read_transcript_json
from momentsearch.errors import SubtitleError
from momentsearch.video.ingest import ingest
from video_files import write_user_folder

pytestmark = pytest.mark.slow  # the folder's 12 files are written and ingested once for the module: ~5 s on 2 cores

REAL_VIDEOS = ["cat", "drone_hevc", "garden_vp9", "kitchen_h264", "lecture_subrip", "old_camcorder", "phone_mjpeg",
               "phone_movtext", "screen_vfr"]


@pytest.fixture(scope="module")
def user_corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("user")
    videos = write_user_folder(root / "videos")
    report = ingest(videos, root / "corpus", progress=False)
    return videos, report, CorpusFolder.open(root / "corpus")


def test_every_real_video_is_ingested_and_the_rest_is_skipped_with_a_reason(user_corpus):
    _, report, corpus = user_corpus
    assert corpus.video_ids == REAL_VIDEOS
    why = {f["path"]: f["error"] for f in report.failures}
    assert sorted(why) == ["broken.mp4", "photo.jpg", "voice_memo.m4a"]
    assert "a still image (mjpeg, read by ffmpeg's jpeg_pipe demuxer), not a video" in why["photo.jpg"]
    assert "--stills" in why["photo.jpg"]
    assert "holds no video stream (streams: audio)" in why["voice_memo.m4a"]
    assert corpus.entry("cat")["codec"] == "gif" and corpus.entry("cat")["n_clips"] == 1  # 12 frames at 0.1 s
    assert corpus.entry("old_camcorder")["fps"] == 12.5 and corpus.entry("drone_hevc")["codec"] == "hevc"


def test_a_malformed_vtt_costs_only_the_subtitles_and_says_where(user_corpus):
    _, report, corpus = user_corpus
    assert [w["path"] for w in report.warnings] == ["garden_vp9.webm"]
    w = report.warnings[0]["warning"]
    assert "garden_vp9.vtt:3: malformed timing line '00:00:01.000 -> 00:00:02.000'" in w
    assert "garden_vp9.webm was ingested without it" in w
    assert corpus.entry("garden_vp9")["transcript"] is None and corpus.transcript("garden_vp9") == []
    assert corpus.manifest.warnings == report.warnings  # recorded in corpus.json too
    assert "1 warning(s)" in report.summary() and "warning garden_vp9.webm" in report.summary()


def test_what_is_said_comes_from_every_kind_of_source(user_corpus):
    _, _, corpus = user_corpus
    kinds = {v: (corpus.entry(v)["transcript"] or {}).get("kind") for v in REAL_VIDEOS}
    assert kinds == {"cat": None, "drone_hevc": "whisper-json", "garden_vp9": None, "kitchen_h264": "srt",
                     "lecture_subrip": "stream:srt", "old_camcorder": None, "phone_mjpeg": None,
                     "phone_movtext": "stream:mov_text", "screen_vfr": None}
    said = {v: [(c.start, c.end, c.text) for c in corpus.transcript(v)] for v in REAL_VIDEOS}
    assert said["kitchen_h264"] == [(0.5, 2.0, "who left the milk out"), (3.0, 5.5, "the kettle is boiling over")]
    assert said["drone_hevc"] == [(1.0, 3.5, "flying over the lake")]
    assert said["lecture_subrip"] == [(0.5, 2.5, "the derivative of a constant is zero")]
    assert said["phone_movtext"] == [(2.0, 3.5, "happy birthday to you")]
    assert set(corpus.streams) == {"visual", "subtitle"}  # the per-clip MiniLM stream from the same cues


def test_stills_taken_on_request_as_one_clip_items(user_corpus, tmp_path):
    videos, _, _ = user_corpus
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "photo.jpg").write_bytes((videos / "photo.jpg").read_bytes())
    (tmp_path / "v" / "cat.gif").write_bytes((videos / "cat.gif").read_bytes())
    report = ingest(tmp_path / "v", tmp_path / "c", stills=True, progress=False)
    assert report.failures == [] and report.encoded == ["cat", "photo"]
    photo = CorpusFolder.open(tmp_path / "c").entry("photo")
    assert (photo["n_clips"], photo["duration"], photo["frames_decoded"]) == (1, 2.0, 1)


def test_a_fixed_sidecar_is_read_on_the_next_ingest(user_corpus, tmp_path):
    videos, _, _ = user_corpus
    (tmp_path / "v").mkdir()
    for name in ("garden_vp9.webm", "garden_vp9.vtt"):
        (tmp_path / "v" / name).write_bytes((videos / name).read_bytes())
    assert ingest(tmp_path / "v", tmp_path / "c", progress=False).warnings
    (tmp_path / "v" / "garden_vp9.vtt").write_text("WEBVTT\n\n00:00:01.000 --> 00:00:02.000\nthe roses need water\n")
    again = ingest(tmp_path / "v", tmp_path / "c", progress=False)
    assert again.encoded == ["garden_vp9"] and again.warnings == []
    c = CorpusFolder.open(tmp_path / "c")
    assert [x.text for x in c.transcript("garden_vp9")] == ["the roses need water"] and c.manifest.warnings == []


@pytest.mark.parametrize("body, message", [
    ('{"text": "x"}', "not a transcript: expected whisper's JSON"),
    ('{"segments": [{"start": 2, "end": 1, "text": "x"}]}', "segments[0]: start 2 and end 1"),
    ('{"segments": [{"start": "0", "end": 1, "text": "x"}]}', "segments[0]: start and end must be finite numbers"),
    ('[{"start": 0, "end": 1, "text": 3}]', "segments[0]: text must be a string"),
    ('{"segments": [', "transcript.json:1: invalid JSON"),
])
def test_transcript_json_errors_name_the_file_and_segment(tmp_path, body, message):
    f = tmp_path / "transcript.json"
    f.write_text(body)
    with pytest.raises(SubtitleError, match="transcript.json") as e:
        read_transcript_json(f)
    assert message in str(e.value)


def test_whisper_and_faster_whisper_layouts(tmp_path):
    f = tmp_path / "a.json"
    segs = [{"start": 0.0, "end": 1.5, "text": "  hello   world "}, {"start": 1.5, "end": 2.0, "text": " "}]
    f.write_text(json.dumps({"segments": segs, "language": "en"}))
    assert [(c.start, c.end, c.text) for c in read_transcript_json(f)] == [(0.0, 1.5, "hello world")]
    f.write_text(json.dumps(segs))
    assert [(c.start, c.end, c.text) for c in read_transcript_json(f)] == [(0.0, 1.5, "hello world")]
