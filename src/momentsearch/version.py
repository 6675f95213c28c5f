"""The package's version (pyproject.toml's), on the ground floor: checkpoint headers record it. An
experiment's result also records ``source_commit()``: the git commit of the source it ran from."""

from __future__ import annotations

import subprocess
from pathlib import Path

__version__ = "0.2.0"


def source_commit() -> str:
    """The git commit of the checkout this package's source is tracked in, with ``+dirty`` when a tracked
    file under the package differs from it; ``""`` where the source is not tracked by git (an installed
    wheel, a copy inside an ignored virtual environment) or git is missing."""
    here = Path(__file__).resolve().parent

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", str(here), *args], capture_output=True, text=True, timeout=30)

    try:
        if git("ls-files", "--error-unmatch", Path(__file__).name).returncode != 0:
            return ""
        head = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", ".")
    except (OSError, subprocess.SubprocessError):
        return ""
    if head.returncode != 0 or dirty.returncode != 0:
        return ""
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
