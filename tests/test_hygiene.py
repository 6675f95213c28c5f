"""The code's own rules, enforced in make test: imports sorted and no ``print`` in library code (ruff, as
pyproject's ``[tool.ruff]`` says), no private name (``_x``) imported from another module of the package, and every
relative link of the Markdown docs (a file, a heading's anchor) resolving."""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "momentsearch"


def _ruff() -> str:
    found = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    if found is None:
        pytest.fail("ruff is missing: pip install -e '.[test]' (make test installs it)")
    return found


def test_ruff_passes_on_the_library_benchmarks_and_tests() -> None:
    """The library, the benchmark scripts and the tests keep the same import rules (benchmarks and tests may print)."""
    dirs = ["src", "benchmarks", "tests"]
    r = subprocess.run([_ruff(), "check", "--no-cache", *dirs], cwd=ROOT, capture_output=True, text=True, timeout=120)
    command = "ruff check " + " ".join(dirs)
    assert r.returncode == 0, f"{command} (fix with `{command} --fix`):\n{r.stdout}{r.stderr}"


def test_ruff_catches_a_print_and_unsorted_imports(tmp_path: Path) -> None:
    """The rules are on: a library module with a print and unsorted imports fails them (a cli module may print)."""
    pkg = tmp_path / "src" / "momentsearch"
    (pkg / "cli").mkdir(parents=True)
    bad = "import sys\nimport os\n\nprint(os.sep, sys.argv)\n"
    (pkg / "lib.py").write_text(bad)
    (pkg / "cli" / "cmd.py").write_text("import os\n\nprint(os.sep)\n")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    r = subprocess.run([_ruff(), "check", "--no-cache", "--output-format", "concise", "src"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    found = sorted(line.split(": ")[1].split()[0] for line in r.stdout.splitlines() if ": " in line and "lib.py" in line)
    assert r.returncode == 1 and found == ["I001", "T201"], r.stdout
    assert "cmd.py" not in r.stdout


def private_imports(root: Path) -> list[str]:
    """``from momentsearch.x import _name`` anywhere under ``root``, as 'file:line name'."""
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("momentsearch"):
                out += [f"{path.relative_to(root)}:{node.lineno} {a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    return out


def test_no_private_name_is_imported_across_modules(tmp_path: Path) -> None:
    assert private_imports(SRC) == []
    (tmp_path / "m.py").write_text("from momentsearch.data.features import _secret, public\n")
    assert private_imports(tmp_path) == ["m.py:1 _secret"]


def test_progress_lines_go_to_stdout_until_the_application_takes_them(capsys: pytest.CaptureFixture[str]) -> None:
    import logging

    from momentsearch.console import LOGGER, STDOUT, say

    say("building the first stage")
    assert capsys.readouterr().out == "building the first stage\n"
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda r: records.append(r.getMessage())  # type: ignore[method-assign]
    LOGGER.removeHandler(STDOUT)
    LOGGER.addHandler(handler)
    try:
        say("epoch 1")
    finally:
        LOGGER.removeHandler(handler)
        LOGGER.addHandler(STDOUT)
    assert records == ["epoch 1"] and capsys.readouterr().out == ""
    LOGGER.setLevel(logging.WARNING)
    try:
        say("quiet")
    finally:
        LOGGER.setLevel(logging.INFO)
    assert capsys.readouterr().out == ""
    say("epoch 2")
    assert capsys.readouterr().out == "epoch 2\n"


@pytest.mark.slow  # two fresh interpreters import momentsearch: 5.2 s on a slow draw of the EPYC
def test_importing_momentsearch_shortens_openmp_spinning_but_keeps_a_users_setting():
    """``GOMP_SPINCOUNT`` 10,000 unless the user set it (docs/first_stage.md: the scan's threads get their cores)."""
    import os

    code = "import os, momentsearch, torch; print(os.environ['GOMP_SPINCOUNT'])"
    env = {k: v for k, v in os.environ.items() if k != "GOMP_SPINCOUNT"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "10000"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**env, "GOMP_SPINCOUNT": "300000"}, check=True)
    assert out.stdout.strip() == "300000"


def _slug(heading: str) -> str:
    """A Markdown heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def markdown_link_errors(root: Path) -> list[str]:
    """Each relative link of the ``*.md`` files under ``root`` (outside runs/ and hidden folders) whose file, or whose
    ``#anchor`` in a Markdown file, does not exist."""
    files = []
    for d, dirs, names in os.walk(root):  # not into runs/, build/ or a hidden folder (.venv, .git: thousands of files)
        dirs[:] = sorted(x for x in dirs if x not in {"runs", "build", "dist", "node_modules"} and not x.startswith("."))
        files += [Path(d) / f for f in sorted(names) if f.endswith(".md")]
    anchors = {p.resolve(): {_slug(line.lstrip("#")) for line in p.read_text().splitlines() if line.startswith("#")}
               for p in files}
    errors = []
    for p in files:
        for link in re.findall(r"\]\(([^)\s]+)\)", p.read_text()):
            if link.startswith(("http:", "https:", "mailto:")):
                continue
            path, _, frag = link.partition("#")
            target = (p.parent / path).resolve() if path else p.resolve()
            if not target.exists():
                errors.append(f"{p.relative_to(root)}: no file {link}")
            elif frag and target.suffix == ".md" and frag not in anchors.get(target, set()):
                errors.append(f"{p.relative_to(root)}: no heading #{frag} in {path or p.name}")
    return errors


def test_every_relative_link_in_the_docs_resolves(tmp_path: Path) -> None:
    assert markdown_link_errors(ROOT) == []
    (tmp_path / "a.md").write_text("# The first one, at last\n[ok](#the-first-one-at-last) [gone](b.md) [no](#nope)\n")
    assert markdown_link_errors(tmp_path) == ["a.md: no file b.md", "a.md: no heading #nope in a.md"]
