"""An index of the training-free ``clip`` family whose query side costs what CLIP ViT-B/32's does, for
``query_cost.py``: no CLIP weights can be had offline here, so the text tower is ViT-B/32's shape (12 layers,
width 512, 8 heads, 77 positions, 512-d embeddings) with random weights, in Hugging Face's layout, packed by
``momentsearch pack clip --encoder hf_clip``. The corpus has the clip counts and time grids of ``--like``'s
videos (e.g. the demo's index) and random unit image embeddings. Its rankings mean nothing; its cost per
query is that of the real thing, but for tokenizing: a word-level tokenizer stands in for CLIP's BPE.

    python benchmarks/clip_cost_index.py --like runs/demo/index --out runs/clip_cost
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from service_load import QUERIES  # noqa: E402


def hf_clip_b32(folder: Path, words: list[str]) -> Path:
    """A CLIP folder (Hugging Face layout) whose text tower has ViT-B/32's shape, random weights."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from clip_models import tiny_hf_clip

    return tiny_hf_clip(folder, words=words, projection_dim=512, text=dict(
        vocab_size=49408, hidden_size=512, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=8,
        max_position_embeddings=77))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--like", type=Path, required=True, help="an index folder whose videos' time grids to copy")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    from momentsearch.data.corpus_folder import CorpusManifest
    from momentsearch.data.features import checksum
    from momentsearch.search.index import VideoIndex
    from momentsearch.serving.indexing import build_index
    from momentsearch.serving.packing import pack

    like = VideoIndex.load(args.like / "arrays" if (args.like / "arrays").is_dir() else args.like)
    print(f"{len(like):,} videos, {int(like.offsets[-1]):,} clips of random {512}-d image embeddings", flush=True)
    words = sorted({w for q in QUERIES + ["ready?", "warm up the text encoder"] for w in q.lower().split()})
    folder = hf_clip_b32(args.out / "hf_clip_b32", words)
    ckpt = pack("clip", args.out / "clip.pt", "hf_clip", folder)
    from momentsearch.serving.checkpoint import load_checkpoint

    identity = load_checkpoint(ckpt).family.cfg.image_encoder
    corpus = args.out / "corpus"
    feats = corpus / "features" / "visual"
    feats.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    videos = []
    for vid, n, length in zip(like.video_ids, like.n_clips, like.clip_lengths, strict=True):
        arr = rng.standard_normal(size=(int(n), int(identity["dim"])), dtype=np.float32)
        arr = (arr / np.linalg.norm(arr, axis=1, keepdims=True)).astype(np.float16)  # fp16: half the disk at 100k
        np.save(feats / f"{vid}.npy", arr)
        videos.append({"id": vid, "path": None, "duration": float(n) * float(length), "clip_length": float(length),
                       "n_clips": int(n), "crc32": {"visual": checksum(arr)}})
    streams = {"visual": {"path": str(feats.resolve()), "kind": "npy", "dim": int(identity["dim"]), "encoder": identity}}
    CorpusManifest(identity, streams, videos, "clip_cost", None, float(like.clip_lengths[0]), 1.0).write(corpus)
    build_index(ckpt, corpus, args.out / "index", device="cpu", progress=True)
    print(f"wrote {args.out / 'index'}: {len(videos)} videos, clip family (ViT-B/32-shaped text tower, random weights)")


if __name__ == "__main__":
    main()
