"""source_commit(): the commit an experiment's result records, checked on hand-made git checkouts."""

import importlib.util
import shutil
import subprocess
from pathlib import Path

import momentsearch.version as version


def _load_copy(pkg: Path):
    """version.py copied into ``pkg`` and imported from there, so its ``__file__`` is that copy."""
    pkg.mkdir(parents=True, exist_ok=True)
    shutil.copy(version.__file__, pkg / "version.py")
    spec = importlib.util.spec_from_file_location(f"copy_{abs(hash(pkg))}", pkg / "version.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_outside_git_is_empty(tmp_path):
    assert _load_copy(tmp_path / "pkg").source_commit() == ""


def test_commit_then_dirty_then_ignored(tmp_path):
    repo = tmp_path / "repo"
    pkg = repo / "src" / "pkg"
    mod = _load_copy(pkg)
    (pkg / "other.py").write_text("x = 1\n")
    _git(repo, "init", "-q")
    assert mod.source_commit() == ""  # a checkout, but the file is not tracked yet
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    head = _git(repo, "rev-parse", "HEAD")
    assert len(head) == 40 and mod.source_commit() == head
    (pkg / "new.py").write_text("y = 2\n")  # untracked files do not make it dirty
    (repo / "README").write_text("outside the package\n")
    assert mod.source_commit() == head
    (pkg / "other.py").write_text("x = 2\n")  # a tracked file changed under the package
    assert mod.source_commit() == head + "+dirty"
    # a copy inside an ignored folder of the same checkout (a virtual environment) is not that commit
    (repo / ".gitignore").write_text("venv/\n")
    assert _load_copy(repo / "venv" / "site-packages" / "pkg").source_commit() == ""


def test_this_checkout(tmp_path):
    here = Path(version.__file__).resolve().parent
    tracked = subprocess.run(["git", "-C", str(here), "ls-files", "--error-unmatch", "version.py"],
                             capture_output=True, text=True).returncode == 0
    got = version.source_commit()
    if tracked:  # a clone: the commit it runs from
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True)
        assert got.removesuffix("+dirty") == head.stdout.strip()
    else:  # an installed copy
        assert got == ""
