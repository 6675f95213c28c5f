"""Every registered visual encoder and first-stage backend, by name from its registry: a new one is tested
without editing a list (families: tests/test_contract.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from momentsearch.errors import EncoderError
from momentsearch.search.first_stage import ExactFirstStage, build_first_stage
from momentsearch.search.first_stage.base import backend_names
from momentsearch.video.encoders import create_encoder, describe, encoder_names

pytest.importorskip("faiss")

from test_first_stage import _index, _queries, _retriever  # noqa: E402

# what a bare name needs before it builds (a weights folder, an architecture): the error must say so
NEEDS = {"hf_clip": "--encoder-weights DIR", "open_clip": "open_clip:NAME", "torchvision": "torchvision:NAME"}
# how each backend is named as a first stage with its defaults, and the recall@50 against exact it must reach
SPECS = {"exact": ("exact", {}, 1.0), "scan": ("scan", {"rescore": "200"}, 0.95), "faiss": ("faiss:Flat", {}, 1.0),
         "milvus": ("milvus", {}, 1.0)}


@pytest.mark.parametrize("name", encoder_names())
def test_every_encoder_builds_and_encodes_or_says_what_it_needs(name: str) -> None:
    try:
        enc = create_encoder(name)
    except EncoderError as e:
        assert name in NEEDS, f"{name} does not build bare: say what it needs in NEEDS ({e})"
        assert NEEDS[name] in str(e)
        return
    ident = enc.identity()
    assert ident["name"] == name and ident["dim"] > 0 and isinstance(ident["version"], int)
    assert name in describe(ident)
    w, h = enc.frame_size
    rng = np.random.default_rng(0)
    clips = [rng.integers(0, 256, size=(3, h, w, 3), dtype=np.uint8) for _ in range(2)]
    feats = enc.encode(clips)
    assert feats.shape == (2, ident["dim"]) and np.isfinite(feats).all()
    assert np.array_equal(enc.encode(clips), feats) and not np.allclose(feats[0], feats[1])  # deterministic, not constant


@pytest.mark.parametrize("name", backend_names())
def test_every_first_stage_backend_finds_the_exact_top_videos(name: str, tmp_path: Path) -> None:
    assert name in SPECS, f"a new first-stage backend {name!r}: give it a spec and a recall bar in SPECS"
    spec, params, bar = SPECS[name]
    index = _index(n_videos=300)
    retriever = _retriever(index, cosine=True)
    tokens, mask = _queries()
    _, want = ExactFirstStage(retriever).retrieve(tokens, mask, 50)
    stage = build_first_stage(retriever, index, spec, tmp_path / "fs", params=dict(params), family="test")
    scores, got = stage.retrieve(tokens, mask, 50)
    recall = np.mean([len(set(g) & set(w)) / 50 for g, w in zip(got, want, strict=True)])
    assert recall >= bar, (name, recall)
    assert torch.all(scores[:, :-1] >= scores[:, 1:])  # best first
    if hasattr(stage, "close"):
        stage.close()
