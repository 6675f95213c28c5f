"""Ingest on a local Ray (2 actors) writes the same corpus folder as the serial ingest: the same features,
failures and manifest; an actor that dies on a file costs that file alone; the serial path never imports Ray.
(The Ray tests live in this one module: `make test`'s two workers take a module each, so one local Ray runs at
a time.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from momentsearch.cli.main import _optional_values
from momentsearch.data.corpus_folder import CorpusFolder
from momentsearch.errors import ConfigError
from momentsearch.video.ingest import ingest
from test_damaged_videos import write_good
from test_ingest import _folder
from video_files import write_video

pytest.importorskip("ray")


@pytest.mark.slow
def test_ray_ingest_equals_the_serial_ingest(tmp_path):
    d = _folder(tmp_path)
    (d / "sub" / "b.srt").write_text("1\n00:00:00,500 --> 00:00:01,800\na dog runs\n")  # a subtitle stream too
    # one torch thread per encoding process in both: MiniLM's subtitle vectors depend on the thread count
    serial = ingest(d, tmp_path / "serial", clip_seconds=1.0, fps=2.0, progress=False, threads=1)
    on_ray = ingest(d, tmp_path / "ray", clip_seconds=1.0, fps=2.0, progress=False, ray_address="local",
                    ray_workers=2, threads=1)
    assert on_ray.encoded == serial.encoded and len(serial.encoded) >= 3
    assert on_ray.failures == serial.failures and len(serial.failures) == 4  # the broken files, same errors
    a, b = CorpusFolder.open(tmp_path / "serial"), CorpusFolder.open(tmp_path / "ray")
    assert a.fingerprint == b.fingerprint and a.video_ids == b.video_ids
    def same(e: dict) -> dict:  # all but when each was ingested
        assert isinstance(e["ingested_at"], str)
        return {k: x for k, x in e.items() if k != "ingested_at"}

    assert [same(a.entry(v)) for v in a.video_ids] == [same(b.entry(v)) for v in b.video_ids]
    with a.features() as fa, b.features() as fb:
        for v in a.video_ids:
            assert np.array_equal(fa[v], fb[v]), v  # bit-identical features
    assert "subtitle" in a.entry("sub/b")["crc32"]
    again = ingest(d, tmp_path / "ray", clip_seconds=1.0, fps=2.0, progress=False, ray_address="local",
                   ray_workers=2)  # nothing changed: nothing sent to Ray
    assert again.encoded == [] and sorted(again.kept) == sorted(serial.encoded)


def test_ray_options_and_errors(tmp_path):
    assert _optional_values(["ingest", "v", "--ray", "--out", "c"]) == ["ingest", "v", "--ray", "local", "--out", "c"]
    assert _optional_values(["ingest", "v", "--out", "c", "--ray"])[-2:] == ["--ray", "local"]
    assert _optional_values(["ingest", "--ray", "ray://head:10001", "v"])[1:3] == ["--ray", "ray://head:10001"]
    assert _optional_values(["ingest", "--ray", "auto", "v"])[1:3] == ["--ray", "auto"]
    d = _folder(tmp_path)
    with pytest.raises(ConfigError, match="--ray-workers must be >= 1"):
        ingest(d, tmp_path / "c", progress=False, ray_address="local", ray_workers=0)
    with pytest.raises(ConfigError, match=r"--ray 127.0.0.1:1: no Ray cluster answers there"):  # not minutes of retries
        ingest(d, tmp_path / "c", progress=False, ray_address="127.0.0.1:1")


def test_the_serial_ingest_does_not_import_ray(tmp_path):
    d = tmp_path / "v"
    d.mkdir()
    code = (f"import sys; from momentsearch.video.ingest import ingest; ingest({str(d)!r}, {str(tmp_path / 'c')!r}, "
            "progress=False); print('ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "False"


class _SlowRay:
    """A stand-in for the ray module whose local node times out ``fails`` times before it starts."""

    def __init__(self, fails: int, message: str = "The current node timed out during startup. This could happen"):
        self.fails, self.message, self.inits, self.shutdowns = fails, message, 0, 0

    def init(self, **kwargs):
        self.inits += 1
        if self.inits <= self.fails:
            raise Exception(self.message)

    def shutdown(self):
        self.shutdowns += 1


def test_a_local_ray_that_times_out_at_startup_is_started_again():
    from momentsearch.video.ray_ingest import start_local

    ray = _SlowRay(fails=2)
    start_local(ray, workers=2, tries=3)
    assert (ray.inits, ray.shutdowns) == (3, 2)  # each half-started node shut down before the next try
    ray = _SlowRay(fails=3)
    with pytest.raises(ConfigError, match=r"did not start within Ray's 30 s, 3 times .*ray start --head"):
        start_local(ray, workers=2, tries=3)
    assert (ray.inits, ray.shutdowns) == (3, 3)
    # the GCS server's port file not written in time (seen under make test on 2 loaded cores): started again too
    ray = _SlowRay(fails=1, message="Timed out waiting for file /tmp/ray/session_x/gcs_server_port_3249f5")
    start_local(ray, workers=2, tries=3)
    assert (ray.inits, ray.shutdowns) == (2, 1)
    ray = _SlowRay(fails=1, message="some other failure")  # any other error is Ray's own, raised at once
    with pytest.raises(Exception, match="some other failure"):
        start_local(ray, workers=2)
    assert ray.inits == 1 and ray.shutdowns == 0


@pytest.mark.slow
def test_a_ray_actor_that_dies_on_a_file_costs_that_file_alone(tmp_path) -> None:
    """On Ray, an actor that dies inside a video (here the encoder exits the process on an all-black
    clip, as a crash inside a codec would) is reported for that file and replaced; the rest is ingested."""
    import ray.cloudpickle

    import dying_encoder

    ray.cloudpickle.register_pickle_by_value(dying_encoder)
    d = tmp_path / "v"
    d.mkdir()
    for name in ("mp4", "webm", "avi"):  # the good files of test_damaged_videos' folder
        write_good(d, name)
    write_video(d / "black.mp4", seconds=2.0, w=48, h=48, black=True)
    rep = ingest(d, tmp_path / "c", encoder=dying_encoder.DyingEncoder(), clip_seconds=1.0, fps=2.0, progress=False,
                 ray_address="local", ray_workers=2)
    assert rep.encoded == ["good_avi", "good_mp4", "good_webm"]
    (f,) = rep.failures
    assert f["path"] == "black.mp4" and "black.mp4: the Ray worker decoding it died" in f["error"]
    c = CorpusFolder.open(tmp_path / "c")
    with c.features() as store:
        assert np.isfinite(store["good_avi"]).all()
    assert json.loads((tmp_path / "c" / "corpus.json").read_text())["failures"][0]["path"] == "black.mp4"
    assert not os.path.exists(tmp_path / "c" / "ingest.journal.jsonl")


@pytest.mark.slow
def test_ray_ingest_recognises_speech_and_reads_text_as_the_serial_ingest(tmp_path):
    """--speech and --read-text on Ray actors: the same transcripts, text on screen and features as in this
    process (each video's recogniser starts afresh, so the order the actors take the videos in does not matter)."""
    from voices import write_talking_video

    d = tmp_path / "v"
    d.mkdir()
    write_talking_video(d / "talk.mp4", 4, said=[(0.5, "the red door opens")], shown=[(0.0, 4.0, "Fire drill")])
    write_talking_video(d / "walk.mp4", 4, said=[(0.5, "a dog runs in the garden")], colour=(20, 90, 40))
    write_talking_video(d / "slide.mp4", 4, shown=[(2.0, 4.0, "Exit")], with_audio=False)
    heard = {"speech": "pocketsphinx", "read_text": True, "threads": 1, "progress": False}
    ingest(d, tmp_path / "serial", **heard)
    ingest(d, tmp_path / "ray", ray_address="local", ray_workers=2, **heard)
    a, b = CorpusFolder.open(tmp_path / "serial"), CorpusFolder.open(tmp_path / "ray")
    assert a.fingerprint == b.fingerprint
    assert [(a.transcript(v), a.written(v)) for v in a.video_ids] == [(b.transcript(v), b.written(v)) for v in b.video_ids]
    assert a.entry("talk")["transcript"]["kind"] == "asr:pocketsphinx" and a.written("talk")[0].text == "Fire drill"
    assert [(c.start, c.end, c.text) for c in b.written("slide")] == [(2.0, 4.0, "Exit")]


@pytest.mark.slow  # a Ray node starts (5-10 s)
def test_ray_local_starts_its_own_node_where_another_cluster_is_announced(monkeypatch):
    """`--ray local` with RAY_ADDRESS (or a `ray start` cluster's /tmp/ray/ray_current_cluster, as a Ray cluster in
    another test process writes) pointing elsewhere: Ray would connect there and refuse num_cpus ("When connecting to
    an existing cluster, num_cpus and num_gpus must not be provided"); the local node is started anyway."""
    import ray

    from momentsearch.video.ray_ingest import start_local

    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    start_local(ray, 1)
    try:
        assert ray.is_initialized() and ray.cluster_resources().get("CPU") == 1
    finally:
        ray.shutdown()
