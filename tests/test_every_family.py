"""Every registered model family end to end, so that a new family is tested by being registered: built (or, for a
family that needs no training, packed) over a planted corpus folder with a visual and a said stream, its
checkpoint written and read back (same fingerprint), the corpus encoded into an index folder, the folder opened,
and searched through ``load(INDEX_DIR)`` and the engine's SVMR path, each answer holding real moments (inside
their video, on its time grid) and the same answer from a second load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import momentsearch
from momentsearch.data.corpus_folder import CorpusManifest
from momentsearch.data.features import checksum
from momentsearch.models.family import InputDims
from momentsearch.models.registry import create_family, family_names, get_family
from momentsearch.serving.checkpoint import load_checkpoint, pack_checkpoint
from momentsearch.serving.indexing import IndexFolder, build_index
from momentsearch.serving.packing import pack
from momentsearch.text.encoders import SENTENCE_ENCODER, MiniLMSentenceEncoder
from momentsearch.video.encoders import create_encoder

# sizes that keep a random network small; a family not named here is built with its defaults
SMALL = {"xml": {"hidden": 16, "max_clips": 16, "n_max": 8},
         "minute": {"hidden": 16, "max_clips": 16, "n_max": 8, "localizer_layers": 1}}
CLIPS, DT = 12, 1.0
SAID = {"v2": (3, 6, "he opens the fridge"), "v4": (8, 10, "a dog barks at the door")}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five 12-second videos: builtin-encoder-shaped visual rows (random) and MiniLM sentence vectors where
    something is said (two planted sentences), as ``ingest`` with subtitles would store them."""
    root = tmp_path_factory.mktemp("every") / "corpus"
    ident = create_encoder("builtin").identity()
    rng = np.random.default_rng(0)
    said_vec = dict(zip(SAID, MiniLMSentenceEncoder().encode([t for *_, t in SAID.values()]), strict=True))
    streams = {"visual": root / "features" / "visual", "subtitle": root / "features" / "subtitle"}
    for p in streams.values():
        p.mkdir(parents=True)
    videos = []
    for i in range(5):
        vid = f"v{i}"
        vis = rng.normal(size=(CLIPS, int(ident["dim"]))).astype(np.float32)
        sub = np.zeros((CLIPS, SENTENCE_ENCODER["dim"]), np.float32)
        if vid in SAID:
            a, b, _ = SAID[vid]
            sub[a:b] = said_vec[vid]
        np.save(streams["visual"] / f"{vid}.npy", vis)
        np.save(streams["subtitle"] / f"{vid}.npy", sub)
        videos.append({"id": vid, "path": None, "duration": CLIPS * DT, "clip_length": DT, "n_clips": CLIPS,
                       "crc32": {"visual": checksum(vis), "subtitle": checksum(sub)}})
    CorpusManifest(ident, {"visual": {"path": str(streams["visual"]), "kind": "npy", "dim": int(ident["dim"]),
                                      "encoder": ident},
                           "subtitle": {"path": str(streams["subtitle"]), "kind": "npy", "dim": SENTENCE_ENCODER["dim"],
                                        "encoder": SENTENCE_ENCODER}},
                   videos, "planted", None, DT, 1.0).write(root)
    return root


def _checkpoint(name: str, out: Path) -> Path:
    """Packed when the family needs no training (what is said, offline), else built with random weights."""
    if get_family(name).packable:
        return pack(name, out, speech=True)
    torch.manual_seed(0)
    fam = create_family({"name": name, **SMALL.get(name, {})})
    model = fam.build(InputDims(int(create_encoder("builtin").identity()["dim"]), SENTENCE_ENCODER["dim"], 384))
    return pack_checkpoint(out, fam, model, create_encoder("builtin").identity())


def _moments(hits: list) -> list[tuple[str, float, float]]:
    return [(h.video_id, round(h.start, 6), round(h.end, 6)) for h in hits]


@pytest.mark.slow
@pytest.mark.parametrize("name", family_names())
def test_every_registered_family_packs_indexes_opens_and_searches(name: str, corpus: Path, tmp_path: Path) -> None:
    ckpt_path = _checkpoint(name, tmp_path / f"{name}.pt")
    ckpt = load_checkpoint(ckpt_path)
    assert ckpt.family.name == name and load_checkpoint(ckpt_path).fingerprint == ckpt.fingerprint  # round trip
    build_index(ckpt_path, corpus, tmp_path / "index", device="cpu", progress=False)
    folder = IndexFolder.open(tmp_path / "index")
    assert folder.checkpoint.fingerprint == ckpt.fingerprint and folder.index.video_ids == [f"v{i}" for i in range(5)]
    assert folder.info.search is not None and folder.info.search.k_videos >= 1  # the search settings travel with it

    searcher = momentsearch.load(tmp_path / "index", device="cpu", first_stage="exact")
    hits = searcher.search("he opens the fridge", k=5)
    assert 1 <= len(hits) <= 5
    for h in hits:
        assert h.video_id in folder.index.video_ids and 0 <= h.start < h.end <= CLIPS * DT + 1e-9
        assert np.isfinite(h.score)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    again = momentsearch.load(tmp_path / "index", device="cpu", first_stage="exact").search("he opens the fridge", k=5)
    assert _moments(again) == _moments(hits)

    # SVMR: the moments of one given video per query, through the same proposals
    tokens, mask = _tokens(searcher, ["he opens the fridge", "a dog barks at the door"])
    svmr = searcher.engine.localize_in(["a", "b"], tokens, mask, np.array([2, 4]), n=3)
    for i, v in enumerate((2, 4)):
        n = int((svmr.video_idx[i] >= 0).sum())
        assert n >= 1 and (svmr.video_idx[i, :n] == v).all() and (svmr.start[i, :n] < svmr.end[i, :n]).all()
    if get_family(name).packable:  # what is said, searched without training: the planted sentence's clips
        assert (hits[0].video_id, hits[0].start, hits[0].end) == ("v2", 3.0, 6.0)


def _tokens(searcher: momentsearch.Searcher, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    from momentsearch.data.batching import pad_tokens

    return pad_tokens(searcher.queries.encode_many(texts), searcher.family.max_tokens)
