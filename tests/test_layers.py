"""The house: what a search imports, no import circles, and imports that run one way through the layers.

Read from the source (every ``import`` statement, inside functions too; ``if TYPE_CHECKING:`` blocks
aside), so a lazy import counts like any other."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from served_index import build_served_index

SRC = Path(__file__).resolve().parents[1] / "src" / "momentsearch"

# left to right: a package imports only from packages at its rank or to its left (docs/architecture.md)
LAYERS = [("errors", "config", "fileio", "readers", "plugins", "distributed", "device", "timing", "version", "console",
           "processes"), ("data",), ("text",),
          ("video",), ("relevance",), ("losses",), ("search",), ("models",), ("serving",), ("evaluation",),
          ("training",), ("api", "client"), ("experiments",), ("service",), ("cli", "__main__")]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}
# the exceptions, each named in docs/architecture.md with why: the facade's lazy imports of its own API, and its
# __version__ from the base (the facade ranks below everything, so even that reads as "up")
UP_ALLOWED = {("momentsearch", "momentsearch.serving"), ("momentsearch", "momentsearch.api"),
              ("momentsearch", "momentsearch.client"), ("momentsearch", "momentsearch.version"),
              ("momentsearch", "momentsearch.serving.loader"), ("momentsearch", "momentsearch.api.split_search")}
# a search needs no trainer, no annotation loader and no evaluation metric (a family's module still brings its
# loss, and XML's relevance terms: models/* import losses and relevance)
SERVING_FORBIDDEN = ("momentsearch.training", "momentsearch.data.loaders", "momentsearch.evaluation",
                     "momentsearch.cli")


def _modules() -> dict[str, Path]:
    out = {}
    for p in SRC.rglob("*.py"):
        parts = p.relative_to(SRC.parent).with_suffix("").parts
        out[".".join(x for x in parts if x != "__init__")] = p
    return out


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for n in node.body:
                lines.update(range(n.lineno, (n.end_lineno or n.lineno) + 1))
    return lines


def import_graph() -> dict[str, set[str]]:
    """module -> the momentsearch modules it imports (an imported name that is a module counts as that module)."""
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for m, p in mods.items():
        tree = ast.parse(p.read_text(encoding="utf-8"))
        skip = _type_checking_lines(tree)
        out: set[str] = set()
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("momentsearch"):
                for a in node.names:
                    sub = f"{node.module}.{a.name}"
                    out.add(sub if sub in mods else node.module)
            elif isinstance(node, ast.Import):
                out |= {a.name for a in node.names if a.name.startswith("momentsearch")}
        graph[m] = {t for t in out if t in mods and t != m}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_no_import_circles() -> None:
    graph = import_graph()
    graph["momentsearch"] = set()  # the facade's lazy imports of its API (module __getattr__), the one exception
    assert _cycles(graph) == []
    # the checker finds a circle when there is one
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_imports_run_one_way_through_the_layers() -> None:
    graph = import_graph()
    assert set(RANK) >= {_package(m) for m in graph} - {""}, "a package with no layer: add it to LAYERS and the docs"
    up = sorted((m, t) for m, ts in graph.items() for t in ts
                if (m, t) not in UP_ALLOWED and RANK.get(_package(m), -1) < RANK.get(_package(t), -1))
    assert up == []


@pytest.mark.slow
def test_a_search_and_the_service_import_no_trainer_loader_or_metric(tmp_path: Path) -> None:
    """In a fresh process: load(INDEX_DIR), search, and the service's app answering /search."""
    index = build_served_index(tmp_path)
    code = (
        "import json, sys, momentsearch\n"
        f"s = momentsearch.load({str(index)!r}, device='cpu')\n"
        "hits = s.search('a white square', k=3)\n"
        "from fastapi.testclient import TestClient\n"
        "from momentsearch.service.app import create_app\n"
        "with TestClient(create_app(s)) as c:\n"
        "    r = c.post('/search', json={'query': 'a white square', 'k': 3})\n"
        "print(json.dumps({'hits': len(hits), 'status': r.status_code,\n"
        "                  'modules': sorted(m for m in sys.modules if m.startswith('momentsearch'))}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["hits"] == 3 and got["status"] == 200
    assert [m for m in got["modules"] if m.startswith(SERVING_FORBIDDEN)] == []
    assert "momentsearch.serving.searcher" in got["modules"] and "momentsearch.search.engine" in got["modules"]


@pytest.mark.slow  # 6.6-7.5 s under make test
def test_under_make_test_a_missing_extra_fails_instead_of_skipping(tmp_path: Path) -> None:
    """MOMENTSEARCH_REQUIRE_EXTRAS=1 (set by `make test`): a module that importorskips a missing package is a
    collection error naming it; without the flag it is skipped."""
    import os
    import shutil

    shutil.copy(Path(__file__).parent / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_needs_it.py").write_text("import pytest\nnot_here = pytest.importorskip('not_an_installed_pkg')\n"
                                               "def test_it():\n    assert True\n")
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)]
    strict = subprocess.run(run, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                            env={**os.environ, "MOMENTSEARCH_REQUIRE_EXTRAS": "1"})
    assert strict.returncode != 0 and "not_an_installed_pkg is missing, and make test requires every extra" in strict.stdout
    lenient = subprocess.run(run, capture_output=True, text=True, timeout=120, cwd=tmp_path,
                             env={k: v for k, v in os.environ.items() if k != "MOMENTSEARCH_REQUIRE_EXTRAS"})
    assert lenient.returncode in (0, 5) and "1 skipped" in lenient.stdout  # 5: no test ran, the module was skipped


def test_the_serving_core_opens_no_dataset() -> None:
    """A checkpoint's split reaches search as an index folder (api.split_search); serving/ never opens a dataset
    (its checkpoint reader names the run's dataset config, a typed record, and nothing else of data.dataset)."""
    import ast

    names = []
    for path in sorted((SRC / "serving").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "momentsearch.data.dataset":
                names += [f"{path.name}: {a.name}" for a in node.names]
    assert names == ["checkpoint.py: DatasetConfig"]
