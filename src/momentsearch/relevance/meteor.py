"""METEOR between captions (Wray et al. Sec. 4.4, S_MET), exactly NLTK's, at corpus speed.

NLTK's ``meteor_score`` aligns words by exact match, Porter stem and WordNet synonym, then scores
the F-mean with a fragmentation penalty. Called pair by pair it stems every word and looks up its
WordNet synsets again for every pair (about 1 ms a pair). Here the stemmer and the synset lookup
are memoised per word (the results are identical — tested against the plain call), which makes it
about 12x faster (~0.1 ms a pair on one core). It is still one Python call per pair, so a full
query x query table is O(n^2): minutes for a few thousand captions, hours for Charades-STA train.

Not symmetric: S_MET(y_i, y_j) = M(y_i, y_j) with y_j the reference.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

_WORD = re.compile(r"[a-z]+")


class _Lemma:
    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def name(self) -> str:
        return self._name


class _Synset:
    __slots__ = ("_lemmas",)

    def __init__(self, names: tuple[str, ...]):
        self._lemmas = [_Lemma(n) for n in names]

    def lemmas(self) -> list[_Lemma]:
        return self._lemmas


class _MemoWordNet:
    """The one method NLTK's METEOR calls, ``synsets(word)``, memoised (lemma names only)."""

    def __init__(self, wordnet: Any):
        self._wn = wordnet

    @functools.cache  # noqa: B019  (one instance per process, lives forever)
    def synsets(self, word: str) -> list[_Synset]:
        return [_Synset(tuple(lemma.name() for lemma in s.lemmas())) for s in self._wn.synsets(word)]


@functools.lru_cache(maxsize=1)
def _tools() -> tuple[Any, Any]:
    from nltk.stem.porter import PorterStemmer

    from momentsearch.text.wordnet import wordnet

    class _MemoStemmer(PorterStemmer):
        @functools.cache  # noqa: B019
        def stem(self, word: str, to_lowercase: bool = True) -> str:
            return PorterStemmer.stem(self, word, to_lowercase)

    return _MemoStemmer(), _MemoWordNet(wordnet())


def tokenize(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def meteor(hypothesis: str, reference: str) -> float:
    """METEOR (NLTK; exact, stem and WordNet-synonym matches, fragmentation penalty) of one caption
    against another."""
    return meteor_tokens(tokenize(hypothesis), tokenize(reference))


def meteor_tokens(hypothesis: list[str], reference: list[str]) -> float:
    from nltk.translate.meteor_score import meteor_score

    stemmer, wn = _tools()
    return float(meteor_score([reference], hypothesis, stemmer=stemmer, wordnet=wn))


def meteor_matrix(rows: Sequence[str], cols: Sequence[str], progress: bool = False) -> np.ndarray:
    """(len(rows), len(cols)) METEOR of each row caption against each column caption."""
    from tqdm import tqdm

    rt = [tokenize(t) for t in rows]
    ct = [tokenize(t) for t in cols]
    out = np.zeros((len(rows), len(cols)), np.float32)
    for i in tqdm(range(len(rows)), desc="METEOR", disable=not progress):
        for j, c in enumerate(ct):
            out[i, j] = meteor_tokens(rt[i], c) if rt[i] and c else 0.0
    return out
