"""The demo's last step: the test split's videos rendered, written as a corpus with those files and the
annotations, indexed by the trained model, and served: cards carry a playable video and the caption."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("av")
pytest.importorskip("fastapi")

from fastapi.testclient import TestClient  # noqa: E402

import momentsearch  # noqa: E402
from momentsearch.cli.demo import serveable_index  # noqa: E402
from momentsearch.data.corpus_folder import CorpusFolder  # noqa: E402
from momentsearch.data.synthetic import SyntheticBenchmark  # noqa: E402
from momentsearch.service.app import create_app  # noqa: E402
from momentsearch.training.trainer import Trainer  # noqa: E402
from test_xml_training import tiny_cfg  # noqa: E402


@pytest.mark.slow
def test_the_demo_index_plays_rendered_moments_with_their_captions(tiny_benchmark: Path, tmp_path: Path) -> None:
    bench_dir = tmp_path / "benchmark"
    shutil.copytree(tiny_benchmark, bench_dir)
    Trainer(tiny_cfg(bench_dir, tmp_path / "xml", 1), progress=False).fit()
    bench = SyntheticBenchmark.load(bench_dir)
    index = serveable_index(tmp_path, bench, tmp_path / "xml" / "checkpoints" / "best.pt")
    test = bench.corpus.split("test")
    rendered = sorted(p.stem for p in (bench_dir / "videos").glob("*.mp4"))
    assert rendered == sorted(test.videos)  # the test split only
    corpus = CorpusFolder.open(tmp_path / "corpus_test")
    assert all(corpus.video_path(v) is not None for v in test.videos)
    notes = corpus.annotations(test.moments[0].video_id)  # annotations.jsonl, beside corpus.json
    assert [test.moments[0].span[0], test.moments[0].span[1], test.moments[0].text] in [
        [pytest.approx(a[0], abs=1e-3), pytest.approx(a[1], abs=1e-3), a[2]] for a in notes]

    exact = momentsearch.load(index, device="cpu", first_stage="exact")
    flat = momentsearch.load(index, device="cpu", first_stage="faiss:Flat")
    texts = [m.text for m in test.moments[:20]]
    for a, b in zip(exact.search_many(texts, k=10), flat.search_many(texts, k=10), strict=True):
        assert [(h.video_id, h.start, h.end) for h in a] == [(h.video_id, h.start, h.end) for h in b]
        np.testing.assert_allclose([h.score for h in a], [h.score for h in b], rtol=1e-4)

    with TestClient(create_app(flat)) as client:
        m = test.moments[0]
        body = client.post("/search", json={"query": m.text, "k": 50, "videos": [m.video_id]}).json()
        assert body["moments"] and all(x["video_url"] == f"/videos/{m.video_id}" for x in body["moments"])
        captions = {a[2] for a in notes}
        overlapping = [x for x in body["moments"] if x["start"] < m.span[1] and x["end"] > m.span[0]]
        assert overlapping and all(x["annotation"] in captions for x in overlapping)
        video = client.get(f"/videos/{m.video_id}", headers={"Range": "bytes=0-15"})
        assert video.status_code == 206 and video.content[4:8] == b"ftyp"  # an MP4
