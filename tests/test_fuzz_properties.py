"""Property-based tests (hypothesis): whatever a malformed file holds, every loader and the prediction
reader either load it or raise the project's own error, never another exception and never a hang.

Each format starts from a small valid file (``benchmarks/fuzz_loaders.py``'s seeds) and hypothesis
(a) puts an arbitrary JSON value (huge integers, NaN, lone surrogates, deep lists...) at an arbitrary
place of it, (b) applies the fuzz script's byte- and text-level mutations with a random generator it
controls. ``make test`` runs a bounded number of examples per format; set
``MOMENTSEARCH_FUZZ_EXAMPLES=10000`` for a long run.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
from benchmarks.fuzz_loaders import SEEDS, mutate, user_actions
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from momentsearch.errors import MomentSearchError

EXAMPLES = int(os.environ.get("MOMENTSEARCH_FUZZ_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(codec=None, exclude_categories=()), max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _nodes(obj: object) -> list[tuple[object, object]]:
    out: list[tuple[object, object]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append((obj, k))
            out.extend(_nodes(v))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.append((obj, i))
            out.extend(_nodes(v))
    return out


def _outcome(fmt: str, folder: Path, content: bytes) -> None:
    for name, text in SEEDS.values():  # companion files valid
        (folder / name).write_text(text, encoding="utf-8")
    path = folder / ("mutant_" + SEEDS[fmt][0])
    path.write_bytes(content)
    try:
        user_actions(fmt, path, folder)()
    except MomentSearchError:
        pass  # the project's own error: fine (any other exception fails the test)


JSON_FORMATS = [f for f, (name, _) in SEEDS.items() if name.endswith((".json", ".jsonl"))]


@pytest.mark.parametrize("fmt", JSON_FORMATS)
def test_any_json_value_anywhere_loads_or_is_the_projects_error(fmt: str, tmp_path: Path) -> None:
    name, text = SEEDS[fmt]
    jsonl = name.endswith(".jsonl")

    @SETTINGS
    @given(value=JSON_VALUES, where=st.integers(min_value=0), line=st.integers(min_value=0))
    def check(value: object, where: int, line: int) -> None:
        lines = [ln for ln in text.split("\n") if ln.strip()] if jsonl else [text]
        i = line % len(lines)
        obj = json.loads(lines[i])
        nodes = _nodes(obj)
        if nodes:
            parent, key = nodes[where % len(nodes)]
            parent[key] = value  # type: ignore[index]
        else:
            obj = value
        lines[i] = json.dumps(obj)
        _outcome(fmt, tmp_path, ("\n".join(lines) + ("\n" if jsonl else "")).encode("utf-8", "surrogatepass"))

    check()


@pytest.mark.parametrize("fmt", list(SEEDS))
def test_any_byte_or_text_mutation_loads_or_is_the_projects_error(fmt: str, tmp_path: Path) -> None:
    data = SEEDS[fmt][1].encode()

    @SETTINGS
    @given(rng=st.randoms(use_true_random=False), n=st.integers(min_value=1, max_value=3))
    def check(rng: random.Random, n: int) -> None:
        out = data
        for _ in range(n):
            out = mutate(out, rng)[0] if out else out
        _outcome(fmt, tmp_path, out)

    check()


# ---- every other reader: feature stores, checkpoints, configs, index folders, relevance tables, MVMR
# pools, corpus folders, subtitles, query files, synthetic folders and the service's /search body

@pytest.fixture(scope="module")
def reader_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from benchmarks.fuzz_targets import fixtures

    return fixtures(tmp_path_factory.mktemp("readers") / "fixtures")


def _target_names() -> list[str]:
    from benchmarks.fuzz_targets import TARGETS

    return list(TARGETS)


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "features-hdf5" else n
                                  for n in _target_names()])  # features-hdf5: 8-10 s
def test_any_mutation_of_every_other_reader_loads_or_is_the_projects_error(name: str, reader_files: Path,
                                                                          tmp_path: Path) -> None:
    import shutil

    from benchmarks.fuzz_targets import TARGETS, apply_mutant

    target = TARGETS[name]
    work = tmp_path / "work"
    shutil.copytree(reader_files, work, symlinks=True)

    @SETTINGS
    @given(rng=st.randoms(use_true_random=False))
    def check(rng: random.Random) -> None:
        apply_mutant(target, reader_files, work, rng)
        try:
            target.action(work)
        except MomentSearchError:
            pass  # the project's own error (any other exception fails the test)

    check()


def test_a_formats_run_replaces_its_rows_in_the_stored_table(tmp_path: Path) -> None:
    from benchmarks.fuzz_loaders import _merged

    path = tmp_path / "fuzz_loaders.json"
    path.write_text(json.dumps({"n_per_format": 10, "seed": 0, "results": [{"format": "a", "s": 1},
                                                                         {"format": "b", "s": 1}]}))
    new = [{"format": "b", "s": 2}, {"format": "c", "s": 2}]
    assert _merged(path, new, 10, 0) == [{"format": "a", "s": 1}, {"format": "b", "s": 2}, {"format": "c", "s": 2}]
    assert _merged(path, new, 11, 0) == new and _merged(path, new, 10, 1) == new  # other settings: a new table
    path.write_text("{")
    assert _merged(path, new, 10, 0) == new
