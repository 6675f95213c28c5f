"""Writers that claim atomicity, killed with SIGKILL at random moments in a subprocess: what is on
disk afterwards is the old version or the new one in full, never a mix, and the next write removes
the dead writer's temporaries. Written files get the umask's mode, not 0600."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from momentsearch.fileio import atomic_open, remove_stale_temporaries

# each writer: a loop writing version 0, 1, 0, 1, ... of its target, and a check that returns the
# version it finds on disk (raising if the target is a mix or unreadable)
WRITERS = {
    "submission": ("""
        from momentsearch.evaluation import RankedMoments, Submission
        rng = np.random.default_rng(0)
        def make(v):
            lists = [[(int(j % 50), 1.0 * j, 2.0 * j, float(v)) for j in range(100)] for _ in range(3000)]
            return Submission.from_ranked({"VCMR": RankedMoments.from_lists([str(i) for i in range(3000)],
                                                                            [f"v{j}" for j in range(50)], lists)})
        subs = [make(0), make(1)]
        def write(v): subs[v].write(target)
        """, """
        from momentsearch.evaluation import Submission
        s = Submission.read(target).tasks["VCMR"].score
        assert s.shape == (3000, 100) and len(set(s.ravel().tolist())) == 1
        return int(s[0, 0])
        """),
    "features": ("""
        from momentsearch.data.feature_writers import HDF5FeatureWriter
        def write(v):
            with HDF5FeatureWriter(target, 64) as w:
                for i in range(300):
                    w.add(f"vid{i}", np.full((40, 64), v, np.float32))
        """, """
        from momentsearch.data.features import FeatureStore
        with FeatureStore(target) as store:
            vals = {float(store[f"vid{i}"][0, 0]) for i in range(300)}
        assert len(vals) == 1, vals
        return int(vals.pop())
        """),
    "index": ("""
        from momentsearch.search.index import VideoIndex
        def write(v):
            n = 2000
            VideoIndex([f"v{i}" for i in range(n)], np.full(n, 10.0), np.full(n, 1.0), np.arange(n + 1) * 10,
                       {"a": np.full((n * 10, 64), v, np.float16), "b": np.full((n * 10, 8), v, np.float32)},
                       {"m": np.full((n, 16), v, np.float32)}, {"family": "xml", "version": v}).save(target)
        """, """
        from momentsearch.search.index import VideoIndex
        idx = VideoIndex.load(target)
        vals = {float(idx.arrays["a"][-1, 0]), float(idx.arrays["b"][0, 0]), float(idx.video_arrays["m"][-1, -1]),
                float(idx.meta["version"])}
        assert len(vals) == 1, vals
        return int(vals.pop())
        """),
    "checkpoint": ("""
        import torch
        from momentsearch.models import registry
        from momentsearch.training.checkpoint import save_checkpoint
        from momentsearch.training.config import TrainConfig
        from momentsearch.data.dataset import DatasetConfig
        from momentsearch.models.family import InputDims
        cfg = TrainConfig(dataset=DatasetConfig(benchmark="b"), model={"name": "xml", "hidden": 256})
        family = registry.create_family(cfg.model)
        model = family.build(InputDims(1024, 768, 384))
        def write(v):
            with torch.no_grad():
                for p in model.parameters():
                    p.fill_(v)
            save_checkpoint(target, family, model, None, v, cfg, [])
        """, """
        from momentsearch.serving.checkpoint import load_checkpoint
        ck = load_checkpoint(target)
        vals = {float(p.detach().flatten()[0]) for p in ck.model.parameters()} | {float(ck.header.epoch)}
        assert len(vals) == 1, vals
        return int(vals.pop())
        """),
    "benchmark": ("""
        import dataclasses
        from momentsearch.data.synthetic import generate, load_preset
        cfgs = [dataclasses.replace(load_preset("tiny"), seed=s, n_videos=400) for s in (0, 1)]
        def write(v): generate(cfgs[v], target, progress=False)
        """, """
        from momentsearch.data.synthetic import SyntheticBenchmark
        b = SyntheticBenchmark.load(target)
        with b.features() as store:
            for v in b.corpus.videos.values():  # every feature file matches the corpus written with it
                n = len(store[v.video_id])
                assert abs(n * b.config.clip_length - v.duration) <= b.config.clip_length, (v.video_id, n, v.duration)
        return b.config.seed
        """),
}

SCRIPT = """
import sys, numpy as np
from pathlib import Path
target = Path(sys.argv[1])
{setup}
write(0)
print("ready", flush=True)
v = 1
while True:
    write(v)
    v = 1 - v
"""


def _check(name: str, target: Path) -> int:
    ns: dict[str, object] = {"np": np, "target": target}
    exec("def check():\n" + textwrap.indent(textwrap.dedent(WRITERS[name][1]), "    "), ns)  # noqa: S102
    return ns["check"]()  # type: ignore[operator]


def _leftovers(target: Path) -> list[str]:
    return sorted(p.name for p in target.parent.iterdir() if p.name.startswith(f".{target.name}."))


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in ("checkpoint", "index", "benchmark", "submission") else n
                                  for n in WRITERS])  # checkpoint: 8 s, index: 6.4 s, benchmark: 5.9 s, submission: 6.0 s
def test_a_writer_killed_at_random_leaves_one_whole_version(name: str, tmp_path: Path) -> None:
    target = tmp_path / {"submission": "sub.json", "features": "visual.h5", "index": "index",
                         "checkpoint": "last.pt", "benchmark": "bench"}[name]
    script = tmp_path / "writer.py"
    script.write_text(SCRIPT.format(setup=textwrap.dedent(WRITERS[name][0])))
    rng = random.Random(0)
    seen = set()
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, str(script), str(target)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.05, 0.6))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        seen.add(_check(name, target))  # loads, and is one whole version
    assert seen <= {0, 1}
    # the next write (here a plain atomic write of the same name, as any writer does) removes what the
    # killed writers left behind
    if target.is_file():
        with atomic_open(target, "ab"):
            pass
    else:
        remove_stale_temporaries(target)
    assert _leftovers(target) == []


def test_atomic_files_get_the_umask_mode_and_only_dead_writers_temporaries_go(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        with atomic_open(tmp_path / "a.txt") as fh:
            fh.write("x")
        assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644  # as open(..., "w") would, not 0600
    finally:
        os.umask(old)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f".a.txt.pid{dead.stdout.strip()}.abc.tmp"
    live = tmp_path / f".a.txt.pid{os.getpid()}.def.tmp"
    stale.write_text("half"), live.write_text("in progress")
    assert remove_stale_temporaries(tmp_path / "a.txt") == [stale]
    assert not stale.exists() and live.exists()


def test_generate_refuses_a_folder_that_is_not_a_benchmark_and_keeps_a_benchmarks_cache(tmp_path: Path) -> None:
    import dataclasses

    from momentsearch.data.synthetic import SyntheticBenchmark, generate, load_preset
    from momentsearch.errors import MomentSearchError

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    cfg = dataclasses.replace(load_preset("tiny"), n_videos=12)
    with pytest.raises(MomentSearchError, match="not a synthetic benchmark"):
        generate(cfg, tmp_path / "mine", progress=False)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"
    b = generate(cfg, tmp_path / "b", progress=False)
    (b / "features" / "queries_minilm.h5").write_bytes(b"cache")
    generate(dataclasses.replace(cfg, seed=5), b, progress=False)
    assert SyntheticBenchmark.load(b).config.seed == 5
    assert (b / "features" / "queries_minilm.h5").read_bytes() == b"cache"  # the query cache survives


@pytest.mark.skipif(sys.platform != "linux", reason="renameat2 RENAME_EXCHANGE is Linux's")
def test_a_folder_is_swapped_in_one_step_never_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (a CI run lost an index this way): the old folder was renamed aside and then the new one
    renamed in, so a writer killed between the two renames left no folder at all. Now the two are
    exchanged in one renameat2 call; a 'kill' at any os.replace (simulated) cannot strike between."""
    import momentsearch.fileio as fileio

    target = tmp_path / "index"
    with fileio.atomic_dir(target) as tmp:
        (tmp / "v").write_text("0")

    def killed(*args: object) -> None:
        raise SystemExit("killed")

    monkeypatch.setattr(fileio.os, "replace", killed)
    with fileio.atomic_dir(target) as tmp:
        (tmp / "v").write_text("1")
    assert (target / "v").read_text() == "1" and sorted(p.name for p in tmp_path.iterdir()) == ["index"]
