"""One batch of every family, its loss and its (rank-averaged) gradients: run in one process by
tests/test_distributed.py and under ``torchrun --nproc_per_node 2 tests/ddp_worker.py BENCH OUT``, which
writes each rank's numbers to OUT/rank{R}.npz."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

from momentsearch.data.dataset import DatasetConfig
from momentsearch.device import torch_settings
from momentsearch.models.family import Step
from momentsearch.models.minute.config import MINUTEConfig
from momentsearch.models.mmn.config import MMNConfig
from momentsearch.models.span.config import SpanConfig
from momentsearch.models.xml import XMLConfig
from momentsearch.training.config import TrainConfig
from momentsearch.training.trainer import Trainer


def cases(bench: Path, out: Path) -> dict[str, tuple[TrainConfig, int]]:
    """name -> (config, epoch): every family, at the epoch where its in-batch or mined negatives matter.
    Dropout is 0: masks are drawn per rank (see momentsearch.distributed)."""
    def cfg(model: object, batch_size: int = 24) -> TrainConfig:
        return TrainConfig(dataset=DatasetConfig(benchmark=str(bench)), out_dir=str(out), batch_size=batch_size,
                           val_split="test", num_threads=1, model=model)
    return {
        "xml random negatives": (cfg(XMLConfig(hidden=32, dropout=0.0, hard_negative_start_epoch=5)), 0),
        "xml hard negatives": (cfg(XMLConfig(hidden=32, dropout=0.0, hard_negative_start_epoch=1,
                                             hard_pool_size=5, lambda_tl=0.1)), 1),
        "minute retriever (InfoNCE)": (cfg(MINUTEConfig(hidden=32, dropout=0.0, retriever_epochs=1)), 0),
        "minute localizer (Shared-Norm, mined negatives)": (cfg(MINUTEConfig(
            hidden=32, dropout=0.0, retriever_epochs=1, localizer_batch_size=0, n_negatives=2, negative_pool=10)), 1),
        "rmmn (CM-ANS negatives)": (cfg(MMNConfig(num_clips=8, hidden=32, joint_dim=32, dropout=0.0,
                                                  hard_negative_start_epoch=1, hard_videos=2, hard_queries=2)), 1),
        "cet": (cfg(SpanConfig(name="cet", hidden=32, layers=1, n_heads=2, dropout=0.0), 8), 0),
    }


def one_batch(cfg: TrainConfig, epoch: int) -> tuple[float, np.ndarray]:
    """The first batch of ``epoch`` (after the family's epoch schedule): loss, flattened gradients."""
    tr = Trainer(cfg, progress=False)
    with torch_settings(cfg.num_threads, cfg.deterministic, tr.device):
        tr.world.broadcast_parameters(tr.model)
        gen = torch.Generator().manual_seed(cfg.seed * 100_003 + epoch)
        torch.manual_seed(cfg.seed * 100_003 + epoch)
        step = Step(epoch, gen)
        tr.family.prepare_epoch(tr.model, tr.train_data, step, tr.device)
        tr.model.train()
        batch = tr.train_data.collate(next(iter(tr.train_data.sampler(cfg.batch_size, gen))))
        loss, _ = tr.family.loss(tr.model, batch, step)
        loss.backward()
        tr.world.average_gradients(tr.model)
        grads = torch.cat([p.grad.reshape(-1) for p in tr.model.parameters() if p.grad is not None])
    return float(loss.detach()), grads.numpy()


if __name__ == "__main__":
    bench, out = Path(sys.argv[1]), Path(sys.argv[2])
    results: dict[str, np.ndarray] = {}
    rank = 0
    from momentsearch.distributed import World

    for name, (cfg, epoch) in cases(bench, out / "run").items():
        loss, grads = one_batch(cfg, epoch)
        results[f"{name}/loss"], results[f"{name}/grads"] = np.array(loss), grads
        rank = World.from_env().rank
    World.from_env().close()
    np.savez(out / f"rank{rank}.npz", **results)
