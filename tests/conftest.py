from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_DATA = Path(os.environ.get("MOMENTSEARCH_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
REPO = Path(__file__).resolve().parents[1]


_missing_real_data: list[str] = []


def shared(rel: str) -> Path:
    p = SHARED_DATA / rel
    if not p.exists():
        _missing_real_data.append(rel)
        pytest.skip(f"real annotation file {p} not present (set MOMENTSEARCH_SHARED_DATA)")
    return p


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say out loud when the real-data tests did not run, and why."""
    if _missing_real_data:
        terminalreporter.write_sep("!", f"{len(_missing_real_data)} real-data test(s) SKIPPED: {SHARED_DATA} does not "
                                        f"hold {sorted(set(_missing_real_data))[:3]}...; set MOMENTSEARCH_SHARED_DATA to "
                                        "the folder with TVR, Charades-STA, DiDeMo, ActivityNet Captions and TACoS")


@pytest.fixture(scope="session")
def tiny_benchmark(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from momentsearch.data.synthetic import generate, load_preset

    root = tmp_path_factory.mktemp("tiny")
    ready = os.environ.get("MOMENTSEARCH_TINY_BENCHMARK")  # a generated tiny preset, queries cached (GPU runs)
    if ready:
        import shutil

        shutil.copytree(ready, root, dirs_exist_ok=True)
        return root
    generate(load_preset("tiny"), root, progress=False)
    return root
