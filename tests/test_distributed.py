"""Training over 2 processes (torchrun, gloo on the CPU) equals 1 process with the same global batch:
every family's loss and gradients on a batch, XML's loss curve, and a resume after the processes are killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from ddp_worker import cases, one_batch
from momentsearch.config import from_dict
from momentsearch.training.config import TrainConfig
from momentsearch.training.trainer import Trainer

TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


@pytest.mark.slow
def test_every_familys_batch_loss_and_gradients_match_one_process(tiny_benchmark: Path, tmp_path: Path) -> None:
    """In-batch negatives (XML, MINUTE's InfoNCE, MMN), hard negatives drawn inside the batch (XML) or mined
    per epoch (MINUTE's Shared-Norm candidates, RMMN's CM-ANS) see the whole global batch on both ranks."""
    subprocess.run([*TORCHRUN, str(Path(__file__).with_name("ddp_worker.py")), str(tiny_benchmark), str(tmp_path)],
                   check=True, env=ENV, capture_output=True, timeout=300)
    ranks = [np.load(tmp_path / f"rank{r}.npz") for r in (0, 1)]
    for name, (cfg, epoch) in cases(tiny_benchmark, tmp_path / "one").items():
        loss, grads = one_batch(cfg, epoch)
        for r in ranks:
            assert float(r[f"{name}/loss"]) == pytest.approx(loss, rel=1e-6), name
            g = r[f"{name}/grads"]
            # measured when written: at most 2.4e-6 apart, gradients up to 9.6 (float32 sums in another order)
            assert np.abs(g - grads).max() <= 1e-5 * max(1.0, np.abs(grads).max()), name
        assert np.array_equal(ranks[0][f"{name}/grads"], ranks[1][f"{name}/grads"]), name  # the ranks step alike


def _config(bench: Path, out: Path, epochs: int) -> dict:
    return {"dataset": {"benchmark": str(bench)}, "out_dir": str(out), "epochs": epochs, "batch_size": 32,
            "lr": 1e-3, "val_split": "test", "val_max_queries": 40, "num_threads": 1,
            "model": {"name": "xml", "hidden": 32, "dropout": 0.0, "hard_negative_start_epoch": 2, "lambda_tl": 0.1}}


def _torchrun_train(config: Path, **kw: object) -> subprocess.Popen:
    return subprocess.Popen([*TORCHRUN, "-m", "momentsearch", "train", str(config)], env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True, **kw)


@pytest.mark.slow
def test_torchrun_training_matches_one_process_and_resumes_after_a_kill(tiny_benchmark: Path, tmp_path: Path) -> None:
    epochs = 4
    one = Trainer(from_dict(TrainConfig, _config(tiny_benchmark, tmp_path / "one", epochs)), progress=False)
    one.fit()
    config = tmp_path / "two.yaml"
    config.write_text(yaml.safe_dump(_config(tiny_benchmark, tmp_path / "two", epochs)))
    history = tmp_path / "two" / "history.json"
    proc = _torchrun_train(config)
    deadline = time.monotonic() + 240
    while not (history.exists() and len(json.loads(history.read_text())) >= 1):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read() if proc.stdout else ""
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the launcher and both ranks, mid-run
    proc.wait()
    done_before = len(json.loads(history.read_text()))
    assert done_before < epochs
    proc = _torchrun_train(config)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    # resumed: the finished epochs' progress bars ("epoch 1/4: ...") do not come again
    assert f"epoch {done_before + 1}/{epochs}:" in out and f"epoch {done_before}/{epochs}:" not in out
    two = json.loads(history.read_text())
    assert [h["epoch"] for h in two] == list(range(1, epochs + 1))
    for a, b in zip(one.history, two, strict=True):  # the same loss curve and validation, within float tolerance
        # measured: losses 3e-8 apart (relative) with transformer layers, up to 1.3e-6 by epoch 4 with the
        # attention layers (issue 23; attention kernels round differently on half the rows); the same
        # validation recall at every epoch
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5), (a["epoch"], a["loss"], b["loss"])
        for task in ("VCMR", "VR"):
            for k, v in a["val"][task].items():
                assert b["val"][task][k] == pytest.approx(v, abs=1.0), (a["epoch"], task, k)
    # (weights are not compared one by one: parameters whose exact gradient is 0 -- attention's key bias and the
    # modular pooling's bias, under a shift-invariant softmax -- follow Adam-normalised float noise in any run)
    assert not list((tmp_path / "two").glob("**/*.tmp*"))  # only rank 0 wrote, atomically
