from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED_DATA = Path(os.environ.get("MOMENTSEARCH_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
REPO = Path(__file__).resolve().parents[1]


def shared(rel: str) -> Path:
    p = SHARED_DATA / rel
    if not p.exists():
        pytest.skip(f"real annotation file {p} not present (set MOMENTSEARCH_SHARED_DATA)")
    return p


@pytest.fixture(scope="session")
def tiny_benchmark(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from momentsearch.data.synthetic import generate, load_preset

    root = tmp_path_factory.mktemp("tiny")
    generate(load_preset("tiny"), root, progress=False)
    return root
