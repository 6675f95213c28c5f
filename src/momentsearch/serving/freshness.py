"""Whether an index folder still holds what its corpus holds, and whether the folder was rebuilt.

An index records each video's signature (:meth:`~momentsearch.data.corpus_folder.CorpusFolder.video_signature`)
when it is built. A corpus ingested again since (videos added, changed or gone) makes the index *behind* it:
``load``, ``search`` and ``serve`` say how many videos are new, changed and removed, and the command that
updates the index (only those videos are encoded). :func:`index_version` changes whenever ``momentsearch index``
replaces the folder (it is renamed into place as a set), which a running service watches to swap indexes.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from momentsearch.data.corpus_folder import CorpusFolder
from momentsearch.serving.index_info import IndexInfo


class StaleIndexWarning(UserWarning):
    """The index was built from an older state of its corpus."""


@dataclass(frozen=True)
class Staleness:
    index: Path
    corpus: Path
    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)

    def message(self) -> str:
        return (f"the index {self.index} is behind its corpus {self.corpus}: {len(self.new)} new, {len(self.changed)} "
                f"changed and {len(self.removed)} removed video(s) since it was built, so search does not see them; "
                f"update it with `momentsearch index {self.index / 'model.pt'} --corpus {self.corpus} --out {self.index}` "
                "(only those videos are encoded), or keep it current with `momentsearch watch`")

    def to_json(self) -> dict[str, Any]:
        return {"new": len(self.new), "changed": len(self.changed), "removed": len(self.removed)}


def staleness(index_root: Path, info: IndexInfo, corpus: CorpusFolder | None) -> Staleness | None:
    """How the corpus differs from what the index was built from; None when it does not (or is gone)."""
    if corpus is None or info.corpus.fingerprint == corpus.fingerprint:
        return None
    built = info.videos
    now = set(corpus.video_ids)
    new = sorted(now - set(built))
    changed = sorted(v for v in now & set(built) if corpus.video_signature(v) != built[v])
    removed = sorted(set(built) - now)
    if not (new or changed or removed):
        return None
    return Staleness(index_root, corpus.root, new, changed, removed)


def warn_if_stale(stale: Staleness | None) -> None:
    if stale is not None:
        warnings.warn(stale.message(), StaleIndexWarning, stacklevel=3)


def index_version(index_root: str | Path) -> tuple[int, int] | None:
    """(inode, mtime) of the folder's ``index.json`` (a sharded index's ``shards.json``): a rebuilt folder, or a
    shard added, is a new file; None while there is none."""
    for name in ("index.json", "shards.json"):
        try:
            st = os.stat(Path(index_root) / name)
        except OSError:
            continue
        return st.st_ino, st.st_mtime_ns
    return None
