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
