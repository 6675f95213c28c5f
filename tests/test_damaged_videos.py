"""Damaged videos never cost a good one: per-file isolation in ingest (serial, CLI; on Ray
in tests/test_ray_ingest.py), the decoding
budget (DecodeLimits), files that change while read, and thumbnails of damaged files."""

from __future__ import annotations

import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from benchmarks.fuzz_video_mutations import damage, elements

from momentsearch.data.corpus_folder import CorpusFolder
from momentsearch.errors import VideoDecodeError
from momentsearch.video.decode import DecodeLimits, clip_frames, frame_at
from momentsearch.video.encoders import create_encoder
from momentsearch.video.ingest import ingest
from video_files import write_audio_only, write_video

# (PyAV format, codec, element kind, suffix, size): HEVC at 64x64, since libx265 corrupts the heap when it
# encodes 48x32 frames after libvpx-vp9 encoded in the same process (seen with this PyAV build)
CONTAINERS = {"mp4": ("mp4", "libx264", "mp4", 48), "webm": ("webm", "libvpx-vp9", "ebml", 48),
              "mkv": ("matroska", "libx265", "ebml", 64), "avi": ("avi", "mpeg4", "riff", 48),
              "mov": ("mov", "mjpeg", "mp4", 48)}


def write_good(d: Path, name: str) -> Path:
    """The good file of one container: 3 s at 10 fps, the container's size."""
    fmt, codec, _, size = CONTAINERS[name]
    return write_video(d / f"good_{name}.{name}", fmt, codec, seconds=3.0, rate=10, w=size, h=size)


def _no_decoder(src: Path, dst: Path) -> Path:
    """The issue's crash: the MP4's sample entry (stsd/avc1) renamed, so PyAV's stream has no codec context."""
    b = bytearray(src.read_bytes())
    at = b.find(b"avc1", b.find(b"stsd"))
    b[at: at + 4] = b"zzz1"
    dst.write_bytes(bytes(b))
    return dst


def _damaged(seed: Path, kind: str, dst: Path, how: str, salt: int = 0) -> Path:
    """A mutant of ``seed`` by the fuzz run's mutation ``how`` (the first of a fixed random sequence)."""
    rng = random.Random(f"{dst.name}:{salt}")
    for _ in range(2000):
        data, done = damage(seed.read_bytes(), kind, rng)
        if done == how:
            dst.write_bytes(data)
            return dst
    raise AssertionError(f"no {how} mutation drawn")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Good files of each container, and damaged ones of each: the no-decoder MP4, and for every container
    a truncated file, a size field, a codec id and a timestamp changed."""
    root = tmp_path_factory.mktemp("damaged")
    d, seeds = root / "videos", root / "seeds"
    d.mkdir()
    seeds.mkdir()
    for name, (_, _, kind, _) in CONTAINERS.items():
        seed = shutil.copy(write_good(d, name), seeds / f"seed.{name}")
        for how in ("truncate", "size", "codec", "timestamp"):
            _damaged(Path(seed), kind, d / f"bad_{how}_{name}.{name}", how)
    _no_decoder(d / "good_mp4.mp4", d / "bad_no_decoder.mp4")
    write_audio_only(d / "song.m4a")
    _damaged(d / "song.m4a", "mp4", d / "bad_song.m4a", "size")
    return d


def test_a_damaged_file_of_each_container_never_costs_a_good_one(folder: Path, tmp_path: Path) -> None:
    """Through the command a user runs: exit 0, every good file in corpus.json, each damaged file either
    ingested or reported by name with a reason, none of them reported as an unexpected error."""
    out = tmp_path / "corpus"
    r = subprocess.run([sys.executable, "-m", "momentsearch", "ingest", str(folder), "--out", str(out),
                        "--clip-seconds", "1", "--fps", "2"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    corpus = CorpusFolder.open(out)
    good = {f"good_{n}" for n in CONTAINERS}
    assert good <= set(corpus.video_ids)
    for v in good:
        assert corpus.entry(v)["n_clips"] == 3, v
    files = sorted(p.name for p in folder.iterdir())
    failures = {f["path"]: f for f in corpus.failures}
    ingested = {corpus.entry(v)["path"] for v in corpus.video_ids}
    assert set(files) == set(failures) | ingested  # every file accounted for, once
    assert not any(f.get("unexpected") for f in failures.values()), failures
    assert "bad_no_decoder.mp4: its video stream has no decoder" in failures["bad_no_decoder.mp4"]["error"]
    assert "no video stream" in failures["song.m4a"]["error"]
    assert len(failures) >= 8  # most damage is caught (which ones decode anyway is the codec's business)
    for path, f in failures.items():
        assert path in f["error"] and f"skipped {path}: " in r.stdout
    assert "Traceback" not in r.stderr


def test_an_error_nobody_foresaw_in_one_file_is_that_files_failure(folder: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Any exception inside one video (here a KeyError from the decoder) is that video's failure, marked
    unexpected and named; the rest is ingested and written."""
    import momentsearch.video.worker as ing

    real = ing.clip_frames

    def flaky(path, *a, **k):  # noqa: ANN001, ANN002, ANN003
        if Path(path).name == "good_avi.avi":
            raise KeyError("codec state")
        return real(path, *a, **k)

    monkeypatch.setattr(ing, "clip_frames", flaky)
    d = tmp_path / "v"
    d.mkdir()
    for n in ("good_avi.avi", "good_mp4.mp4"):
        shutil.copy(folder / n, d / n)
    rep = ingest(d, tmp_path / "c", clip_seconds=1.0, fps=2.0, progress=False)
    assert rep.encoded == ["good_mp4"]
    (f,) = rep.failures
    assert f["unexpected"] is True and f["path"] == "good_avi.avi"
    assert "good_avi.avi: could not be read as a video (KeyError at test_damaged_videos.py:" in f["error"]
    assert CorpusFolder.open(tmp_path / "c").video_ids == ["good_mp4"]


def test_a_file_that_changes_while_read_is_reported_and_kept_out(folder: Path, tmp_path: Path) -> None:
    d = tmp_path / "v"
    d.mkdir()
    for n in ("good_mp4.mp4", "good_webm.webm"):
        shutil.copy(folder / n, d / n)
    enc = create_encoder("builtin")
    real = enc.encode

    def growing(clips, previous=None):  # noqa: ANN001 - the file grows while it is read, as a copy in progress
        with open(d / "good_webm.webm", "ab") as fh:
            fh.write(b"\0" * 10)
        return real(clips, previous)

    enc.encode = growing  # type: ignore[method-assign]
    rep = ingest(d, tmp_path / "c", encoder=enc, clip_seconds=1.0, fps=2.0, progress=False)
    why = {f["path"]: f["error"] for f in rep.failures}
    assert list(why) == ["good_webm.webm"] and rep.encoded == ["good_mp4"]  # the webm grew from the first file on
    assert "good_webm.webm: changed while it was read (size 1" in why["good_webm.webm"]
    assert "run ingest again once it is complete" in why["good_webm.webm"]
    enc.encode = real  # type: ignore[method-assign]
    again = ingest(d, tmp_path / "c", encoder=enc, clip_seconds=1.0, fps=2.0, progress=False)
    assert again.encoded == ["good_webm"] and again.kept == ["good_mp4"] and again.failures == []


def test_the_decoding_budget(folder: Path, tmp_path: Path) -> None:
    """Each limit, hit on a real file, is that file's error naming the limit; bad limits are refused."""
    good = folder / "good_mp4.mp4"  # 30 frames, 48x48, 3 s
    assert len(list(clip_frames(good, 1.0, 2.0, (8, 8), limits=DecodeLimits(max_frames=30)))) == 3
    with pytest.raises(VideoDecodeError, match=r"good_mp4.mp4: over 29 frames decoded \(DecodeLimits.max_frames\)"):
        list(clip_frames(good, 1.0, 2.0, (8, 8), limits=DecodeLimits(max_frames=29)))
    with pytest.raises(VideoDecodeError, match=r"the stream header says 48x48 pixels, over the limit of 2,000"):
        list(clip_frames(good, 1.0, 2.0, (8, 8), limits=DecodeLimits(max_pixels=2000)))
    with pytest.raises(VideoDecodeError, match=r"stamped at 2 s .*past the limit of 2 s .*damaged timestamps"):
        list(clip_frames(good, 1.0, 2.0, (8, 8), limits=DecodeLimits(max_duration=2.0)))
    with pytest.raises(VideoDecodeError, match=r"decoding took over 0 s \(DecodeLimits.max_seconds\)"):
        list(clip_frames(good, 1.0, 2.0, (8, 8), limits=DecodeLimits(max_seconds=1e-9)))
    b = bytearray(good.read_bytes())  # the sample table's frame duration set to 2^31 ticks: 58 h a frame
    at = b.find(b"stts") + 16
    b[at: at + 4] = (2**31 - 1).to_bytes(4, "big")
    (tmp_path / "jump.mp4").write_bytes(bytes(b))
    with pytest.raises(VideoDecodeError, match=r"jump.mp4: frame \d is stamped at \d+ s .*past the limit of 172800 s"):
        list(clip_frames(tmp_path / "jump.mp4", 1.0, 2.0, (8, 8)))
    m = b.find(b"mdhd") + 16  # the track's timescale: ticks a second
    b[at: at + 4] = (1000 * int.from_bytes(b[m: m + 4], "big")).to_bytes(4, "big")  # 1,000 s a frame
    (tmp_path / "gap.mp4").write_bytes(bytes(b))
    with pytest.raises(VideoDecodeError, match=r"gap.mp4: 1000 s without a frame .*\(DecodeLimits.max_gap\)"):
        list(clip_frames(tmp_path / "gap.mp4", 1.0, 2.0, (8, 8)))
    assert len(list(clip_frames(tmp_path / "gap.mp4", 100.0, 0.01, (8, 8), limits=DecodeLimits(max_gap=1001)))) >= 10
    for bad in ({"max_frames": 0}, {"max_seconds": float("nan")}, {"max_pixels": True}, {"max_duration": -1},
                {"max_gap": 10**400}):
        with pytest.raises(ValueError, match="must be a positive number") as e:
            DecodeLimits(**bad)
        assert len(str(e.value)) < 120, str(e.value)  # 10**400 is not printed in its 401 digits
    r = subprocess.run([sys.executable, "-m", "momentsearch", "ingest", str(folder), "--out", str(tmp_path / "x"),
                        "--max-frames", "0"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--max-frames must be a positive number" in r.stderr
    d = tmp_path / "v"
    d.mkdir()
    shutil.copy(folder / "good_mp4.mp4", d)
    rep = ingest(d, tmp_path / "c", clip_seconds=1.0, fps=2.0, progress=False, limits=DecodeLimits(max_frames=10))
    assert rep.encoded == [] and "over 10 frames decoded" in rep.failures[0]["error"]


def test_thumbnails_of_damaged_files_are_the_projects_error(folder: Path) -> None:
    """What GET /thumbnails runs: a damaged file gives a VideoDecodeError naming it, never anything else."""
    assert frame_at(folder / "good_mov.mov", 1.0, 32).shape == (32, 32, 3)
    with pytest.raises(VideoDecodeError, match=r"bad_no_decoder.mp4: its video stream has no decoder"):
        frame_at(folder / "bad_no_decoder.mp4", 1.0)
    outcomes = {}
    for p in sorted(folder.glob("bad_*")):
        try:
            frame_at(p, 1.0, 32)
            outcomes[p.name] = "made"
        except VideoDecodeError as e:
            assert p.name in str(e)
            outcomes[p.name] = "refused"
    assert "refused" in outcomes.values()


def test_the_mutations_follow_each_containers_structure(folder: Path) -> None:
    """The fuzz run's element parsers on real files: the top-level elements, the file's end, the codec ids."""
    tops = {"mp4": [b"ftyp", b"free", b"mdat", b"moov"], "mkv": [b"\x1a\x45\xdf\xa3", b"\x18\x53\x80\x67"],
            "avi": [b"RIFF"]}
    for name, want in tops.items():
        data = (folder / f"good_{name}.{name}").read_bytes()
        els = elements(data, CONTAINERS[name][2])
        assert els[0].start == 0 and [e.kind for e in els if e.kind in want][: len(want)] == want, name
        assert max(e.end for e in els) == len(data), name
    mp4 = {e.kind for e in elements((folder / "good_mp4.mp4").read_bytes(), "mp4")}
    assert {b"stsd", b"avc1", b"avcC", b"stts"} <= mp4  # inside the sample table and its sample entry
    mkv = {e.kind for e in elements((folder / "good_mkv.mkv").read_bytes(), "ebml")}
    assert {b"\x86", b"\xa3", b"\xe7"} <= mkv  # CodecID, SimpleBlock, Cluster Timestamp
    avi = {e.kind for e in elements((folder / "good_avi.avi").read_bytes(), "riff")}
    assert {b"avih", b"strh", b"strf", b"00dc"} <= avi
