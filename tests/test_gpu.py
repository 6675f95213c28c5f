"""The CUDA path: the same calls as on the CPU, run where a GPU exists (skipped elsewhere).

Run on a machine with CUDA: ``pytest -m gpu tests/test_gpu.py``. It trains XML with autocast (bf16)
and DataLoader workers with pinned memory, evaluates on the GPU, and checks that a CPU-trained
checkpoint ranks the same on the GPU (fp32) as on the CPU."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from momentsearch.api import evaluate, train
from momentsearch.data.dataset import DatasetConfig
from momentsearch.models.xml import XMLConfig
from momentsearch.training.config import TrainConfig

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]


def _cfg(bench: Path, out: Path, device: str, amp: str = "none", workers: int = 0) -> TrainConfig:
    return TrainConfig(dataset=DatasetConfig(benchmark=str(bench)), out_dir=str(out), epochs=2, batch_size=32,
                       lr=1e-3, val_split="test", device=device, amp=amp, num_workers=workers,
                       model=XMLConfig(hidden=64, lambda_tl=0.1, hard_negative_start_epoch=1))


def test_cuda_training_with_autocast_and_workers(tiny_benchmark: Path, tmp_path: Path) -> None:
    trainer = train(_cfg(tiny_benchmark, tmp_path / "gpu", "cuda", amp="bf16", workers=2), progress=False)
    assert next(trainer.model.parameters()).is_cuda and trainer.amp == torch.bfloat16
    assert all(math.isfinite(h["loss"]) for h in trainer.history)
    ev = evaluate(trainer.ckpt_dir / "best.pt", "test", progress=False, device="cuda")
    assert 0 <= ev.row["VR r10"] <= 100


def test_a_cpu_checkpoint_ranks_the_same_on_the_gpu(tiny_benchmark: Path, tmp_path: Path) -> None:
    trainer = train(_cfg(tiny_benchmark, tmp_path / "cpu", "cpu"), progress=False)
    ckpt = trainer.ckpt_dir / "best.pt"
    cpu = evaluate(ckpt, "test", progress=False, device="cpu")
    gpu = evaluate(ckpt, "test", progress=False, device="cuda")
    assert np.array_equal(cpu.ranked["VR"].video_idx[:, :5], gpu.ranked["VR"].video_idx[:, :5]) or \
        np.mean(cpu.ranked["VR"].video_idx[:, 0] == gpu.ranked["VR"].video_idx[:, 0]) > 0.97
    for k in ("VR r10", "VCMR 0.5-r10", "SVMR 0.5-r5"):
        assert abs(cpu.row[k] - gpu.row[k]) <= 2.0, (k, cpu.row[k], gpu.row[k])


def test_exact_search_on_the_gpu_ranks_as_on_the_cpu() -> None:
    """ClipMaxRetriever on CUDA (clips on the device, each video's max taken there) against the CPU path."""
    from momentsearch.search.clipmax import ClipMaxRetriever, as_read
    from momentsearch.search.index import VideoIndex, concat_ragged
    from momentsearch.search.stages import Queries

    rng = np.random.default_rng(0)
    parts = [rng.normal(size=(int(rng.integers(1, 41)), 2, 32)).astype(np.float16) for _ in range(2000)]
    rows, offsets = concat_ragged(parts)
    index = VideoIndex([f"v{i}" for i in range(2000)], np.full(2000, 60.0), np.full(2000, 2.0), offsets, {"h1": rows})
    q = torch.from_numpy(rng.normal(size=(8, 2, 32)).astype(np.float32))
    mask = torch.ones(8, 2, dtype=torch.bool)
    for cosine in (True, False):
        cpu = ClipMaxRetriever(as_read, index, "h1", cosine).score_videos(Queries(q, mask))
        gpu = ClipMaxRetriever(as_read, index, "h1", cosine, device=torch.device("cuda")).score_videos(Queries(q, mask))
        assert gpu.device.type == "cpu" and gpu.shape == (8, 2000)
        assert torch.allclose(cpu, gpu, atol=1e-4), (cpu - gpu).abs().max()
        assert np.array_equal(cpu.topk(10).indices.numpy(), gpu.topk(10).indices.numpy())
    # the exact stage takes its top k on the device, and only (B, k) comes back
    from momentsearch.search.first_stage import ExactFirstStage
    on_gpu = ExactFirstStage(ClipMaxRetriever(as_read, index, "h1", True, device=torch.device("cuda")))
    top, idx = on_gpu.retrieve(Queries(q, mask), 10)
    cpu_top, cpu_idx = ExactFirstStage(ClipMaxRetriever(as_read, index, "h1", True)).retrieve(Queries(q, mask), 10)
    assert top.device.type == "cpu" and idx.shape == (8, 10) and np.array_equal(idx, cpu_idx)
    assert torch.allclose(top, cpu_top, atol=1e-4)
    # in pieces that cut videos (2,400 scores: 256 clips a piece at 8 queries), as 2^29 scores do at 1M videos
    pieced = ClipMaxRetriever(as_read, index, "h1", True, device=torch.device("cuda"))
    pieced.piece_elems = 8 * 300
    whole = ClipMaxRetriever(as_read, index, "h1", True).score_videos(Queries(q, mask))
    assert torch.allclose(pieced.score_videos(Queries(q, mask)), whole, atol=1e-4)
    assert list(pieced._pieces) == [256] and len(pieced._pieces[256]) == -(-int(offsets[-1]) // 256)


def test_auto_serves_a_large_index_exactly_on_the_gpu(tmp_path: Path) -> None:
    """Above 200,000 clips ``auto`` scans codes on the CPU but searches every clip on a GPU (it fits)."""
    from momentsearch.search.clipmax import ClipMaxRetriever, as_read
    from momentsearch.search.first_stage import ExactFirstStage, build_first_stage
    from momentsearch.search.index import VideoIndex
    from momentsearch.search.stages import Queries

    n = 10_000
    offsets = np.arange(0, 25 * n + 1, 25, dtype=np.int64)  # 250,000 clips
    rows = np.random.default_rng(0).normal(size=(25 * n, 2, 16)).astype(np.float16)
    index = VideoIndex([f"v{i}" for i in range(n)], np.full(n, 50.0), np.full(n, 2.0), offsets, {"h1": rows})
    retriever = ClipMaxRetriever(as_read, index, "h1", True, device=torch.device("cuda"))
    stage = build_first_stage(retriever, index, "auto", tmp_path)
    assert isinstance(stage, ExactFirstStage)
    q = torch.from_numpy(rows[25 * 7: 25 * 7 + 1].astype(np.float32))  # video 7's first clip as the query
    top, idx = stage.retrieve(Queries(q, torch.ones(1, 2, dtype=torch.bool)), 5)
    assert idx[0, 0] == 7 and abs(float(top[0, 0]) - 1.0) < 1e-3
