"""WordNet 3.0 from Debian's ``wordnet-base`` (``/usr/share/wordnet``), read with NLTK.

The Debian package lacks the ``lexnames`` file NLTK's reader wants, so the package's files are
copied once into a folder of the user's cache (NLTK refuses links that lead out of its root) and
the standard 45-line ``lexnames`` is written beside them. Nothing is downloaded.
"""

from __future__ import annotations

import os
import shutil
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any

from momentsearch.errors import MomentSearchError
from momentsearch.fileio import atomic_open, atomic_path

DEBIAN_WORDNET = Path("/usr/share/wordnet")

_LEXNAMES = [
    "adj.all 3", "adj.pert 3", "adv.all 4", "noun.Tops 1", "noun.act 1", "noun.animal 1", "noun.artifact 1",
    "noun.attribute 1", "noun.body 1", "noun.cognition 1", "noun.communication 1", "noun.event 1",
    "noun.feeling 1", "noun.food 1", "noun.group 1", "noun.location 1", "noun.motive 1", "noun.object 1",
    "noun.person 1", "noun.phenomenon 1", "noun.plant 1", "noun.possession 1", "noun.process 1",
    "noun.quantity 1", "noun.relation 1", "noun.shape 1", "noun.state 1", "noun.substance 1", "noun.time 1",
    "verb.body 2", "verb.change 2", "verb.cognition 2", "verb.communication 2", "verb.competition 2",
    "verb.consumption 2", "verb.contact 2", "verb.creation 2", "verb.emotion 2", "verb.motion 2",
    "verb.perception 2", "verb.possession 2", "verb.social 2", "verb.stative 2", "verb.weather 2", "adj.ppl 3",
]


def lexnames_text() -> str:
    """The standard lexnames file: 45 lines 'NN<TAB>name<TAB>syntactic category'."""
    return "".join(f"{i:02d}\t{name.split()[0]}\t{name.split()[1]}\n" for i, name in enumerate(_LEXNAMES))


def wordnet_folder(source: Path = DEBIAN_WORDNET, cache: Path | None = None) -> Path:
    if not (source / "data.noun").is_file():
        raise MomentSearchError(
            f"WordNet 3.0 not found in {source}: install Debian's package (apt-get install wordnet-base)")
    folder = cache or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "momentsearch" / "wordnet-3.0"
    folder.mkdir(parents=True, exist_ok=True)
    for f in source.iterdir():
        target = folder / f.name
        if f.is_file() and not (target.is_file() and target.stat().st_size == f.stat().st_size):
            with atomic_path(target) as tmp:
                shutil.copyfile(f, tmp)
    if not (folder / "lexnames").is_file():
        with atomic_open(folder / "lexnames") as fh:
            fh.write(lexnames_text())
    return folder


@lru_cache(maxsize=1)
def wordnet() -> Any:
    import nltk
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class DebianWordNet(WordNetCorpusReader):  # type: ignore[misc]
        def map_wn(self, version: str = "wordnet") -> None:
            # NLTK maps other WordNet versions onto its own 3.0 corpus for the multilingual data;
            # these files are WordNet 3.0 itself, and that corpus is not installed: no mapping.
            return None

    folder = wordnet_folder()
    if str(folder) not in nltk.data.path:  # NLTK reads corpora only under its data paths
        nltk.data.path.append(str(folder))
    with warnings.catch_warnings():  # "multilingual functions are not available": true, and not needed
        warnings.simplefilter("ignore", UserWarning)
        reader = DebianWordNet(str(folder), None)
    if reader.get_version() != "3.0":
        raise MomentSearchError(f"{folder}: expected WordNet 3.0, found {reader.get_version()!r}")
    return reader
