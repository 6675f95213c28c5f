"""One trainer per run folder, and an experiment's workers end with it.

Found 2026-12-04: `kill` of a running `momentsearch experiment` left its two pool workers training on (re-parented to
init), and nothing stopped the same command started again from training the very runs they were still writing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from momentsearch.training.lock import RunBusyError, lock_path, run_lock


def _holder(folder: Path, ready: Path) -> subprocess.Popen:
    """Another process that takes ``folder``'s lock, says so in ``ready`` and holds it until killed."""
    code = textwrap.dedent(f"""
        import pathlib, time
        from momentsearch.training.lock import run_lock
        with run_lock({str(folder)!r}):
            pathlib.Path({str(ready)!r}).write_text("held")
            time.sleep(120)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code])
    _wait_for(ready, proc)
    return proc


def _wait_for(path: Path, proc: subprocess.Popen, seconds: float = 60) -> None:
    end = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, f"the helper process ended ({proc.returncode}) before writing {path}"
        assert time.monotonic() < end, f"{path} not written within {seconds} s"
        time.sleep(0.05)


def test_a_second_process_is_refused_while_the_first_trains_and_let_in_once_it_is_killed(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "xml"
    holder = _holder(run, tmp_path / "ready")
    try:
        with pytest.raises(RunBusyError, match=rf"{run} is being trained by another process \(pid {holder.pid} on "):
            with run_lock(run):
                pass
        assert lock_path(run) == tmp_path / "runs" / ".xml.lock"  # beside the folder: replacing it keeps the lock
    finally:
        holder.send_signal(signal.SIGKILL)  # killed, not released: the kernel drops the lock
        holder.wait()
    with run_lock(run):
        with run_lock(run):  # re-entrant within a process
            assert f"pid {os.getpid()} on " in lock_path(run).read_text()
        other = subprocess.run([sys.executable, "-c", f"from momentsearch.training.lock import run_lock\n"
                                f"with run_lock({str(run)!r}): pass"], capture_output=True, text=True)
        assert other.returncode == 1 and f"RunBusyError: {run} is being trained by another process (pid " \
            f"{os.getpid()} on " in other.stderr  # and exclusive across processes while held
    with run_lock(run):  # released at the end of the block
        pass


@pytest.mark.slow
def test_training_a_folder_another_process_trains_stops_before_touching_it(tiny_benchmark: Path,
                                                                            tmp_path: Path) -> None:
    """`momentsearch.train` (and so `momentsearch train`) and an experiment's run refuse a folder in training,
    before writing anything into it."""
    from momentsearch.api import train
    from momentsearch.experiments.runner import run_one

    run = tmp_path / "run"
    cfg = {"epochs": 1, "batch_size": 32, "lr": 0.001, "val_split": "test", "val_max_queries": 20, "num_threads": 1,
           "model": {"name": "xml", "hidden": 32}, "out_dir": str(run),
           "dataset": {"benchmark": str(tiny_benchmark)}}
    holder = _holder(run, tmp_path / "ready")
    try:
        with pytest.raises(RunBusyError, match=f"pid {holder.pid}"):
            train(_yaml(tmp_path, cfg), progress=False)
        with pytest.raises(RunBusyError, match=f"pid {holder.pid}"):
            run_one(cfg, "test")
        assert not run.exists()
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert (train(_yaml(tmp_path, cfg), progress=False).ckpt_dir / "last.pt").is_file()


def _yaml(tmp_path: Path, cfg: dict) -> Path:
    import yaml

    p = tmp_path / "train.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


@pytest.mark.parametrize("watched", [True, False], ids=["die_with_parent", "without: the control"])
def test_a_pool_worker_ends_with_its_parent(tmp_path: Path, watched: bool) -> None:
    """The parent (here a process standing in for `momentsearch experiment`) is killed while its worker runs a
    task: a worker started with `die_with_parent` ends within seconds; without it the worker lives on."""
    pid_file = tmp_path / "worker.pid"
    code = textwrap.dedent(f"""
        import os, pathlib, time
        from concurrent.futures import ProcessPoolExecutor
        from multiprocessing import get_context
        from momentsearch.processes import die_with_parent

        def task():
            pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))
            time.sleep(120)

        if __name__ == "__main__":
            kw = dict(initializer=die_with_parent, initargs=(os.getpid(),)) if {watched} else {{}}
            with ProcessPoolExecutor(1, mp_context=get_context("spawn"), **kw) as pool:
                pool.submit(task).result()
    """)
    script = tmp_path / "parent.py"
    script.write_text(code)
    quiet = {**os.environ, "PYTHONWARNINGS": "ignore::UserWarning"}  # the killed parent's semaphores
    parent = subprocess.Popen([sys.executable, str(script)], env=quiet)
    _wait_for(pid_file, parent)
    worker = int(pid_file.read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    try:
        end = time.monotonic() + (10 if watched else 3)  # the watch polls once a second
        while _alive(worker) and time.monotonic() < end:
            time.sleep(0.1)
        assert _alive(worker) is not watched
    finally:
        if _alive(worker):
            os.kill(worker, signal.SIGKILL)


def _alive(pid: int) -> bool:
    """Running (a zombie is not: it has ended and waits for init to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
