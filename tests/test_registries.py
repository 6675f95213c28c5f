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
from momentsearch.search.stages import Queries
from momentsearch.video.encoders import create_encoder, describe, encoder_names

pytest.importorskip("faiss")

from test_first_stage import _index, _queries, _retriever  # noqa: E402

# what a bare name needs before it builds (a weights folder, an architecture): the error must say so
NEEDS = {"hf_clip": "--encoder-weights DIR", "open_clip": "open_clip:NAME", "torchvision": "torchvision:NAME"}
# how each backend is named as a first stage with its defaults, and the recall@50 against exact it must reach
SPECS = {"exact": ("exact", {}, 1.0), "scan": ("scan", {"rescore": "200"}, 0.95), "faiss": ("faiss:Flat", {}, 1.0),
         "milvus": ("milvus", {}, 1.0)}


def built_or_says_what_it_needs(make, name: str, needs: dict[str, str], error: type[Exception]):  # noqa: ANN001,ANN201
    """``make(name)``, or None when it refuses to build by name alone with an ``error`` that says what it needs
    (the needs a registered name may have are listed in ``needs``; any other refusal fails the test)."""
    try:
        return make(name)
    except error as e:
        assert name in needs, f"{name} does not build by name alone: say what it needs in the test's list ({e})"
        assert needs[name] in str(e)
        return None


@pytest.mark.parametrize("name", encoder_names())
def test_every_encoder_builds_and_encodes_or_says_what_it_needs(name: str) -> None:
    enc = built_or_says_what_it_needs(create_encoder, name, NEEDS, EncoderError)
    if enc is None:
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
    _, want = ExactFirstStage(retriever).retrieve(Queries(tokens, mask), 50)
    stage = build_first_stage(retriever, index, spec, tmp_path / "fs", params=dict(params), family="test")
    scores, got = stage.retrieve(Queries(tokens, mask), 50)
    recall = np.mean([len(set(g) & set(w)) / 50 for g, w in zip(got, want, strict=True)])
    assert recall >= bar, (name, recall)
    assert torch.all(scores[:, :-1] >= scores[:, 1:])  # best first
    if hasattr(stage, "close"):
        stage.close()


# ---- query encoders ---------------------------------------------------------------------------------------------
from momentsearch.models.registry import family_names  # noqa: E402
from momentsearch.text.query_encoders import create_query_encoder, query_encoder_names, same_query_encoder  # noqa: E402

family_names()  # the families register theirs (clip)
NEEDS_QUERY = {"clip": "the text tower inside a clip checkpoint"}


@pytest.mark.parametrize("name", query_encoder_names())
def test_every_query_encoder_encodes_and_is_made_again_from_its_identity(name: str) -> None:
    from momentsearch.errors import QueryError

    enc = built_or_says_what_it_needs(create_query_encoder, name, NEEDS_QUERY, QueryError)
    if enc is None:
        return
    texts = ["a person opens the fridge and takes out a bottle of milk", "dog"]
    out = enc.encode(texts)
    assert len(out) == 2 and all(o.dtype == np.float32 and o.ndim == 2 and o.shape[1] == enc.dim for o in out)
    ident = enc.identity()
    assert ident["encoder"] == name and ident["kind"] == enc.kind and ident["dim"] == enc.dim
    if enc.kind == "tokens":
        assert 2 < len(out[1]) < len(out[0]) <= ident["max_tokens"]  # [CLS] dog [SEP]; cut at max_tokens
    else:
        assert all(len(o) == 1 and abs(float(np.linalg.norm(o[0])) - 1) < 1e-5 for o in out)
    again = create_query_encoder(ident)
    assert again.identity() == ident and same_query_encoder(ident, again.identity())
    assert all(np.array_equal(a, o) for a, o in zip(again.encode(texts), out, strict=True))  # the same batch: the same bits
    # alone instead of beside "dog", the GEMMs change shape: equal up to float rounding (1.9e-6 on an AVX-512 CPU)
    assert np.allclose(again.encode(texts[:1])[0], out[0], rtol=0, atol=1e-5)
    with pytest.raises(QueryError, match="query 1 is empty"):
        enc.encode(["ok", "  "])


def test_identities_written_before_the_registry_still_match() -> None:
    legacy = {"name": "all-MiniLM-L6-v2", "kind": "tokens", "dim": 384, "max_tokens": 32}  # index.json before
    assert same_query_encoder(legacy, create_query_encoder("minilm", max_tokens=32).identity())
    assert not same_query_encoder(legacy, create_query_encoder("minilm", max_tokens=16).identity())
    assert create_query_encoder(legacy).identity()["max_tokens"] == 32
