"""Own videos in: decoding (codecs, containers, rotation, variable frame rate), ingest (broken files,
ids, a kill and a resume, a grown folder), subtitles, corpus folders."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import SHARED_DATA
from momentsearch.data.corpus_folder import CorpusFolder
from momentsearch.data.subtitles import clip_texts, read_subtitles
from momentsearch.errors import CorpusFolderError, SubtitleError, VideoDecodeError
from momentsearch.video.decode import DecodeStats, clip_frames
from momentsearch.video.encoders import create_encoder
from momentsearch.video.encoders.builtin import frame_stats
from momentsearch.video.ingest import ingest, scan
from video_files import frame, rotate_mp4, write_audio_only, write_video

EXAMPLE = SHARED_DATA / "examples" / "charades.mp4"


@pytest.mark.parametrize("fmt,codec,suffix", [("mp4", "libx264", "mp4"), ("matroska", "libx264", "mkv"),
                                              ("webm", "libvpx-vp9", "webm"), ("avi", "mpeg4", "avi"),
                                              ("mov", "mjpeg", "mov")])
def test_every_container_decodes_to_the_same_grid(tmp_path, fmt, codec, suffix):
    p = write_video(tmp_path / f"v.{suffix}", fmt, codec, seconds=3.0, rate=10)
    st = DecodeStats()
    clips = list(clip_frames(p, 1.0, 2.0, (16, 16), st))
    assert [c for c, _ in clips] == [0, 1, 2]
    assert [len(f) for _, f in clips] == [2, 2, 2]  # 2 fps sampled out of 10
    assert st.n_frames == 30 and st.duration == pytest.approx(3.0, abs=0.01)
    left, right = clips[0][1][0][8:, :8].mean(), clips[0][1][0][8:, 8:].mean()
    assert left > 200 and right < 60  # the white left half survives every codec


def test_rotation_metadata_is_applied(tmp_path):
    rotated = rotate_mp4(write_video(tmp_path / "v.mp4", w=48, h=32), tmp_path / "r.mp4")
    st = DecodeStats()
    (_, frames), *_ = list(clip_frames(rotated, 1.0, 2.0, (16, 24), st))
    assert st.rotation == 270 and (st.width, st.height) == (32, 48)  # shown turned: portrait
    img = frames[0].astype(float)
    assert img.shape == (24, 16, 3)
    assert img[:10].mean() > 200 and img[14:, :12].mean() < 100  # the left half is now on top
    assert img[:, -2:, 0].mean() > 150  # the red top band is now on the right (turned clockwise)


def test_variable_frame_rate_is_sampled_by_timestamps(tmp_path):
    times = [0.0, 0.1, 0.2, 0.3, 2.6, 2.7, 5.2]  # a gap over clips 1 and 3 of 1 s
    p = write_video(tmp_path / "vfr.mkv", "matroska", "libx264", times=times)
    st = DecodeStats()
    clips = list(clip_frames(p, 1.0, 2.0, (8, 8), st))
    assert [c for c, _ in clips] == list(range(6))
    # sample times 0, 0.5, 1.0, ...: frames 0.0, 2.6 (the first at or after 0.5) and 5.2 are taken; 2.7 is
    # before the next sample time (3.0); clips 1, 3 and 4 have no frame and repeat the last one taken
    assert [len(f) for _, f in clips] == [1, 1, 1, 1, 1, 1]
    assert np.array_equal(clips[1][1], clips[0][1]) and np.array_equal(clips[3][1], clips[2][1])
    assert not np.array_equal(clips[2][1], clips[0][1]) and st.n_sampled == 3
    assert st.duration == pytest.approx(5.3, abs=0.05)


def test_builtin_encoder_features_by_hand():
    white = np.full((1, 8, 8, 3), 255, np.uint8)
    red = np.zeros((1, 8, 8, 3), np.uint8)
    red[..., 0] = 255
    fw, fr = frame_stats(white, None)[0], frame_stats(red, white[0])[0]
    assert fw[:48] == pytest.approx(np.ones(48))  # colour layout: every cell white
    assert fw[48:60].sum() == pytest.approx(0.0)  # no saturation: no hue
    assert fr[48] == pytest.approx(1.0)  # pure red: all weight in hue bin 0
    luma_change = 1 - 0.299
    assert fr[-16:] == pytest.approx(np.full(16, 4 * luma_change), rel=1e-5)  # motion: |luma diff| x 4 per cell
    enc = create_encoder("builtin", size=16)
    assert enc.identity() == {"name": "builtin", "version": 1, "config": {"size": 16}, "dim": 96}
    clips = [np.stack([frame(i, 16, 16) for i in range(3)]), np.stack([frame(i, 16, 16) for i in range(3, 5)])]
    out = enc.encode(clips)
    assert out.shape == (2, 96) and out.dtype == np.float32
    assert np.allclose(out[1], frame_stats(clips[1], clips[0][-1]).mean(0))  # motion continues across clips


def test_unknown_encoder_is_a_clear_error():
    with pytest.raises(Exception, match="unknown visual encoder 'clipz'.*builtin"):
        create_encoder("clipz")


def _folder(tmp_path: Path) -> Path:
    d = tmp_path / "videos"
    (d / "sub").mkdir(parents=True)
    write_video(d / "a.mp4", seconds=4.0)
    write_video(d / "a.mkv", "matroska", seconds=3.0)  # the same stem: both keep their extension
    write_video(d / "sub" / "b.webm", "webm", "libvpx-vp9", seconds=2.5)
    (d / "empty.mp4").write_bytes(b"")
    (d / "notes.txt").write_text("not a video")
    good = (d / "a.mp4").read_bytes()
    (d / "truncated.mp4").write_bytes(good[: len(good) // 3])
    write_audio_only(d / "song.m4a")
    (d / "b.srt").write_text("1\n00:00:00,500 --> 00:00:01,000\nhello\n")  # a subtitle with no video: skipped
    if EXAMPLE.is_file():
        shutil.copy(EXAMPLE, d / "charades.mp4")
    return d


def test_ingest_reports_broken_files_and_keeps_the_rest(tmp_path):
    d = _folder(tmp_path)
    assert sorted(scan(d)) == sorted(["a.mp4", "a.mkv", "sub/b", "empty", "notes", "truncated", "song"]
                                     + (["charades"] if EXAMPLE.is_file() else []))
    rep = ingest(d, tmp_path / "corpus", clip_seconds=1.0, fps=2.0, progress=False)
    why = {f["path"]: f["error"] for f in rep.failures}
    assert set(why) == {"empty.mp4", "notes.txt", "truncated.mp4", "song.m4a"}
    assert "zero-length" in why["empty.mp4"] and "no video stream" in why["song.m4a"]
    assert "not a video" in why["notes.txt"] and "truncated.mp4" in why["truncated.mp4"]
    c = CorpusFolder.open(tmp_path / "corpus")
    want = {"a.mp4": 4, "a.mkv": 3, "sub/b": 3}
    if EXAMPLE.is_file():
        want["charades"] = 31  # the real 30.7 s example at 1 s clips
    assert {v: c.entry(v)["n_clips"] for v in c.video_ids} == want
    with c.features() as store:
        assert store["sub/b"].shape == (3, 96)
    assert "skipped" in rep.summary() and len(c.failures) == 4


@pytest.mark.slow
def test_ingest_killed_then_resumed_gives_the_same_corpus(tmp_path):
    d = tmp_path / "videos"
    d.mkdir()
    for i in range(14):
        write_video(d / f"v{i:02d}.mp4", seconds=20.0, rate=10, w=64, h=64)
    ingest(d, tmp_path / "whole", clip_seconds=2.0, fps=5.0, progress=False)
    code = (f"from momentsearch.video.ingest import ingest; ingest({str(d)!r}, {str(tmp_path / 'cut')!r}, "
            "clip_seconds=2.0, fps=5.0, progress=False)")
    proc = subprocess.Popen([sys.executable, "-c", code])
    journal = tmp_path / "cut" / "ingest.journal.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and not (journal.is_file() and journal.read_text().count("\n") >= 2):
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "cut" / "corpus.json").exists(), "the ingest finished before the kill"
    with pytest.raises(CorpusFolderError, match="interrupted"):
        CorpusFolder.open(tmp_path / "cut")
    rep = ingest(d, tmp_path / "cut", clip_seconds=2.0, fps=5.0, progress=False)
    assert len(rep.kept) >= 2 and len(rep.encoded) == 14 - len(rep.kept)
    a, b = CorpusFolder.open(tmp_path / "whole"), CorpusFolder.open(tmp_path / "cut")
    assert a.fingerprint == b.fingerprint  # the same features, checksum for checksum


def test_grown_folder_encodes_only_what_changed(tmp_path):
    d = tmp_path / "videos"
    d.mkdir()
    for name in ("x", "y", "z"):
        write_video(d / f"{name}.mp4", seconds=2.0)
    ingest(d, tmp_path / "c", clip_seconds=1.0, fps=2.0, progress=False)
    before = CorpusFolder.open(tmp_path / "c")
    write_video(d / "w.mp4", seconds=3.0)  # new
    write_video(d / "y.mp4", seconds=5.0)  # changed
    (d / "z.mp4").unlink()  # gone
    rep = ingest(d, tmp_path / "c", clip_seconds=1.0, fps=2.0, progress=False)
    assert (sorted(rep.encoded), rep.kept, rep.removed) == (["w", "y"], ["x"], ["z"])
    after = CorpusFolder.open(tmp_path / "c")
    assert after.video_ids == ["w", "x", "y"] and after.entry("y")["n_clips"] == 5
    assert after.entry("x") == before.entry("x")
    assert not (tmp_path / "c" / "features" / "visual" / "z.npy").exists()
    with pytest.raises(CorpusFolderError, match="made by builtin v1.*asks for builtin v1 .*size=32"):
        ingest(d, tmp_path / "c", encoder_options={"size": 32}, clip_seconds=1.0, fps=2.0, progress=False)


def test_subtitles_srt_and_webvtt(tmp_path):
    srt = tmp_path / "a.srt"
    srt.write_text("1\n00:00:00,500 --> 00:00:02,500\n<i>Hello</i> there\n\n2\n00:00:04,000 --> 00:00:04,900\nBye\n")
    vtt = tmp_path / "a.vtt"
    vtt.write_text("WEBVTT\n\nNOTE a comment\n\ncue-1\n00:01.000 --> 00:02.000 align:start\n<v Bob>Hi</v>\n")
    subs = read_subtitles(srt)
    assert [(s.start, s.end, s.text) for s in subs] == [(0.5, 2.5, "Hello there"), (4.0, 4.9, "Bye")]
    assert [(s.start, s.end, s.text) for s in read_subtitles(vtt)] == [(1.0, 2.0, "Hi")]
    assert clip_texts(subs, 4, 2.0) == ["Hello there", "Hello there", "Bye", ""]  # [0,2) [2,4) [4,6) [6,8)
    bad = tmp_path / "b.srt"
    bad.write_text("1\n00:00:01,000 --> 00:00:03,000\nok\n\n2\n00:00:05,000 -> 00:00:06,000\nbroken\n")
    with pytest.raises(SubtitleError, match=r"b.srt:6: malformed timing line"):
        read_subtitles(bad)
    back = tmp_path / "c.vtt"
    back.write_text("WEBVTT\n\n00:05.000 --> 00:04.000\nx\n")
    with pytest.raises(SubtitleError, match=r"c.vtt:3: the cue ends"):
        read_subtitles(back)
    (tmp_path / "d.vtt").write_bytes(b"WEBVTT\n\n00:01.000 --> 00:02.000\n\xff\n")
    with pytest.raises(SubtitleError, match=r"d.vtt:4: not valid UTF-8"):
        read_subtitles(tmp_path / "d.vtt")


def test_decode_errors_name_the_file(tmp_path):
    (tmp_path / "x.mp4").write_bytes(b"\x00" * 100)
    with pytest.raises(VideoDecodeError, match=r"x.mp4: not a video ffmpeg can open"):
        list(clip_frames(tmp_path / "x.mp4", 1.0, 1.0, (8, 8)))


def test_probing_and_stopping_early_never_hang(tmp_path):
    """Regression: with PyAV's Python log callback installed, closing a frame-threaded decoder deadlocked
    (a decoder thread logging waits for the GIL that avcodec_free_context holds); probe hung in 3 of 5
    runs. Each run is a fresh process, as the hang was."""
    video = write_video(tmp_path / "a.mp4", seconds=6.0, rate=25, w=320, h=240)
    code = ("import sys\nfrom momentsearch.video.decode import clip_frames, probe\n"
            "for _ in range(3):\n    probe(sys.argv[1])\n    next(iter(clip_frames(sys.argv[1], 1.0, 4.0, (32, 32))))\n")
    for _ in range(6):
        subprocess.run([sys.executable, "-c", code, str(video)], timeout=60, check=True, capture_output=True)
