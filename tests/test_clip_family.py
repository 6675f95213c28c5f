"""The training-free ``clip`` family: the moment rule by hand, the text and image towers against
transformers' CLIP, pack -> index -> search on a planted corpus and on ingested pixels, and refusals
(a corpus of another encoder, training it, packing a trained family)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import momentsearch
from clip_models import tiny_hf_clip
from momentsearch.data.corpus_folder import CorpusManifest
from momentsearch.data.features import checksum
from momentsearch.errors import ConfigError, EncoderError, SearchIndexError
from momentsearch.models.clip.moments import similarity_moments, smoothed
from momentsearch.serving.checkpoint import load_checkpoint
from momentsearch.serving.indexing import build_index
from momentsearch.serving.packing import pack
from momentsearch.video.encoders import create_encoder
from momentsearch.video.ingest import ingest
from video_files import write_video


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory) -> Path:
    return tiny_hf_clip(tmp_path_factory.mktemp("hfclip") / "clip")


def test_the_moment_rule_by_hand() -> None:
    c = np.array([0.1, 0.2, 0.8, 0.9, 0.7, 0.1, 0.0, 0.6, 0.1])
    # mean 0.3889, std 0.3348: theta = 0.5563 at kappa 0.5 -> runs [2, 4] and [7, 7]
    st, ed, sc = similarity_moments(c, 0.5, 32)
    assert st.tolist() == [2, 7] and ed.tolist() == [4, 7]
    np.testing.assert_allclose(sc, [(1 + 0.8) / 2, (1 + 0.6) / 2], rtol=1e-6)
    st, ed, sc = similarity_moments(c, 0.5, 2)  # the long run is cut into pieces of 2 clips
    assert list(zip(st.tolist(), ed.tolist())) == [(2, 3), (4, 4), (7, 7)]
    np.testing.assert_allclose(sc, [0.925, 0.85, 0.8], rtol=1e-6)
    st, ed, sc = similarity_moments(c, 3.0, 32)  # nothing above mean + 3 std: the best clip alone
    assert (st.tolist(), ed.tolist()) == ([3], [3]) and sc[0] == pytest.approx(0.95)
    np.testing.assert_allclose(smoothed(np.array([1.0, 2, 3, 4]), 3), [1.5, 2, 3, 3.5])


def test_towers_match_transformers_clip_and_survive_the_checkpoint(hf_folder: Path, tmp_path: Path) -> None:
    from transformers import AutoTokenizer, CLIPModel

    texts = ["a red ball rolls across the floor", "dog runs", "Person opens the FRIDGE in park"]
    ref_model = CLIPModel.from_pretrained(str(hf_folder)).eval()
    enc = AutoTokenizer.from_pretrained(str(hf_folder))(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        ref = ref_model.get_text_features(**enc)
        ref = torch.nn.functional.normalize(ref if torch.is_tensor(ref) else ref.pooler_output, dim=-1)
    ckpt = load_checkpoint(pack("clip", tmp_path / "clip.pt", "hf_clip", hf_folder))
    assert ckpt.run is None and ckpt.dataset() is None and ckpt.features["name"] == "hf_clip"
    got = ckpt.model.encode_text(texts)  # tokenizer and weights from the checkpoint file alone
    assert got.shape == (3, 16) and float((got - ref).abs().max()) < 1e-5
    # the image tower: a clip's vector is the normalised mean of its frames' normalised embeddings
    enc_img = create_encoder("hf_clip", weights=str(hf_folder))
    frames = np.random.default_rng(0).integers(0, 256, (3, 32, 32, 3), dtype=np.uint8)
    mean = torch.tensor((0.48145466, 0.4578275, 0.40821073)).view(1, 3, 1, 1)
    std = torch.tensor((0.26862954, 0.26130258, 0.27577711)).view(1, 3, 1, 1)
    with torch.no_grad():
        px = (torch.from_numpy(frames).permute(0, 3, 1, 2).float() / 255 - mean) / std
        f = ref_model.get_image_features(pixel_values=px)
        f = torch.nn.functional.normalize(f if torch.is_tensor(f) else f.pooler_output, dim=-1).mean(0)
    want = (f / f.norm()).numpy()
    np.testing.assert_allclose(enc_img.encode([frames])[0], want, atol=1e-5)
    assert enc_img.identity() == ckpt.family.cfg.image_encoder


def _planted_corpus(root: Path, identity: dict, vectors: dict[str, np.ndarray], clip_length: float = 2.0) -> Path:
    """A corpus folder whose clips hold given image embeddings (as if ingested by ``identity``)."""
    feats = root / "features" / "visual"
    feats.mkdir(parents=True)
    videos = []
    for vid, arr in vectors.items():
        np.save(feats / f"{vid}.npy", arr.astype(np.float32))
        videos.append({"id": vid, "path": None, "duration": len(arr) * clip_length, "clip_length": clip_length,
                       "n_clips": len(arr), "crc32": {"visual": checksum(arr.astype(np.float32))}})
    streams = {"visual": {"path": str(feats), "kind": "npy", "dim": int(identity["dim"]), "encoder": identity}}
    CorpusManifest(identity, streams, videos, "planted", None, clip_length, 1.0).write(root)
    return root


def test_pack_index_search_finds_the_planted_moment_across_videos(hf_folder: Path, tmp_path: Path) -> None:
    ckpt_path = pack("clip", tmp_path / "clip.pt", "hf_clip", hf_folder, kappa=1.0)
    ckpt = load_checkpoint(ckpt_path)
    query = "a red ball rolls across the floor"
    q = ckpt.model.encode_text([query])[0].numpy()
    rng = np.random.default_rng(0)
    vectors = {f"v{i}": rng.normal(size=(20, 16)) for i in range(6)}
    for vid in vectors:  # unrelated content: orthogonal to the query
        vectors[vid] -= (vectors[vid] @ q)[:, None] * q[None]
    vectors["v3"][5:9] = q + 0.05 * rng.normal(size=(4, 16))  # clips 5-8 show it: 10 s to 18 s
    vectors["v1"][12:14] = 0.6 * q + 0.8 * vectors["v1"][12:14] / np.linalg.norm(vectors["v1"][12:14], axis=1)[:, None]
    corpus = _planted_corpus(tmp_path / "corpus", ckpt.family.cfg.image_encoder, vectors)
    build_index(ckpt_path, corpus, tmp_path / "index", device="cpu", progress=False)
    hits = momentsearch.load(tmp_path / "index", device="cpu").search(query, k=5)
    assert (hits[0].video_id, hits[0].start, hits[0].end) == ("v3", 10.0, 18.0)
    assert hits[0].score > 0.95  # (1 + cos) / 2 with cos ~ 0.99
    assert (hits[1].video_id, hits[1].start, hits[1].end) == ("v1", 24.0, 28.0)  # the weaker one, cos 0.6
    assert 0.75 < hits[1].score < 0.85 and all(h.score < 0.6 for h in hits[2:])


def test_pixels_through_the_cli_and_a_corpus_of_another_encoder_refused(hf_folder: Path, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from momentsearch.cli.main import app

    videos = tmp_path / "videos"
    videos.mkdir()
    for i, secs in enumerate((5.0, 8.0)):
        write_video(videos / f"film{i}.mp4", seconds=secs, rate=8)
    run = CliRunner().invoke
    r = run(app, ["ingest", str(videos), "--out", str(tmp_path / "c"), "--encoder", "hf_clip",
                  "--encoder-weights", str(hf_folder), "--clip-seconds", "1", "--fps", "2"])
    assert r.exit_code == 0, r.output
    r = run(app, ["pack", "clip", "--encoder", "hf_clip", "--encoder-weights", str(hf_folder), "--out",
                  str(tmp_path / "clip.pt"), "--set", "max_clips=3"])
    assert r.exit_code == 0, r.output
    assert load_checkpoint(tmp_path / "clip.pt").family.cfg.max_clips == 3
    r = run(app, ["index", str(tmp_path / "clip.pt"), "--corpus", str(tmp_path / "c"), "--out", str(tmp_path / "i")])
    assert r.exit_code == 0, r.output
    r = run(app, ["search", str(tmp_path / "i"), "a white square moves", "-k", "4", "--json"])
    assert r.exit_code == 0, r.output
    moments = json.loads(r.stdout)[0]["moments"]
    assert 1 <= len(moments) <= 4 and {m["video_id"] for m in moments} <= {"film0", "film1"}
    for m in moments:
        assert 0 <= m["start"] < m["end"] <= {"film0": 5.0, "film1": 8.0}[m["video_id"]] + 1e-6
        assert m["end"] - m["start"] <= 3.0 + 1e-6  # max_clips = 3 one-second clips
    # a corpus made by the builtin encoder has no CLIP image embeddings: refused, naming both
    ingest(videos, tmp_path / "b", clip_seconds=1.0, fps=2.0, progress=False)
    with pytest.raises(SearchIndexError, match=r"image embeddings of hf_clip v1 .*corpus was made by builtin"):
        build_index(tmp_path / "clip.pt", tmp_path / "b", tmp_path / "i2", progress=False)


def test_clip_is_packed_not_trained_and_trained_families_are_not_packed(hf_folder: Path, tmp_path: Path,
                                                                        tiny_benchmark: Path) -> None:
    from momentsearch.api import train
    from momentsearch.data.dataset import DatasetConfig
    from momentsearch.training.config import TrainConfig

    with pytest.raises(ConfigError, match="needs no training: pack it with `momentsearch pack clip"):
        train(TrainConfig(dataset=DatasetConfig(benchmark=str(tiny_benchmark)), model={"name": "clip"},
                          out_dir=str(tmp_path / "run"), epochs=1), progress=False)
    with pytest.raises(ConfigError, match="'xml' is trained, not packed"):
        pack("xml", tmp_path / "x.pt", "hf_clip", hf_folder)
    with pytest.raises(ConfigError, match="come from the encoder"):
        pack("clip", tmp_path / "x.pt", "hf_clip", hf_folder, image_encoder={})
    with pytest.raises(ConfigError, match="unexpected keyword argument 'kapa'"):
        pack("clip", tmp_path / "x.pt", "hf_clip", hf_folder, kapa=1.0)
    with pytest.raises(EncoderError, match="not a Hugging Face CLIP folder"):
        pack("clip", tmp_path / "x.pt", "hf_clip", tmp_path)
    with pytest.raises(EncoderError, match="reads hf_clip or open_clip:ARCH corpora, not 'builtin'"):
        pack("clip", tmp_path / "x.pt", "builtin")
    assert not (tmp_path / "x.pt").exists()
