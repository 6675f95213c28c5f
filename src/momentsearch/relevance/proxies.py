"""Semantic relevance proxies between captions (Wray et al. Sec. 4.4; Eq. 8 of the pairs paper).

* ``bow_iou``: intersection over union of the two captions' word sets, stop words removed
  (scikit-learn's English list; words are lower-cased alphabetic tokens, not lemmatised).
* ``pos_iou``: Wray et al.'s PoS-aware IoU, alpha_v IoU(verbs) + alpha_n IoU(nouns), alpha = 0.5
  each, over the lemmas spaCy tags VERB and NOUN (stop words removed);
* ``embedding_cosine``: [cos]_+ of the L2-normalised sentence embeddings — the confidence Psi of
  the potentially-relevant-pairs paper (Eq. 8).

Each has a pairwise form and a vectorised (rows x cols) form over a corpus.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from scipy import sparse

_WORD = re.compile(r"[a-z]+")


def content_words(text: str) -> frozenset[str]:
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(w for w in _WORD.findall(text.lower()) if w not in ENGLISH_STOP_WORDS)


def bow_iou(a: str, b: str) -> float:
    wa, wb = content_words(a), content_words(b)
    union = len(wa | wb)
    return len(wa & wb) / union if union else 0.0


class BowIndex:
    """Binary word-incidence matrix of a caption list (or of given word sets), for blockwise IoU."""

    def __init__(self, texts: Sequence[str] | None = None, word_sets: Sequence[frozenset[str]] | None = None):
        if (texts is None) == (word_sets is None):
            raise ValueError("give either texts or word_sets")
        sets = [content_words(t) for t in texts] if texts is not None else list(word_sets)  # type: ignore[arg-type]
        vocab: dict[str, int] = {}
        rows, cols = [], []
        for i, words in enumerate(sets):
            for w in words:
                rows.append(i)
                cols.append(vocab.setdefault(w, len(vocab)))
        self.matrix = sparse.csr_matrix(
            (np.ones(len(rows), np.float32), (rows, cols)), shape=(len(sets), max(len(vocab), 1)))
        self.sizes = np.asarray(self.matrix.sum(axis=1)).ravel()

    def iou(self, rows: slice | np.ndarray, cols: slice | np.ndarray | None = None) -> np.ndarray:
        """Dense (len(rows), len(cols)) IoU block."""
        a = self.matrix[rows]
        b = self.matrix if cols is None else self.matrix[cols]
        inter = (a @ b.T).toarray()
        sa = self.sizes[rows][:, None]
        sb = (self.sizes if cols is None else self.sizes[cols])[None, :]
        union = sa + sb - inter
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(union > 0, inter / union, 0.0).astype(np.float32)


def embedding_cosine(e_rows: np.ndarray, e_cols: np.ndarray) -> np.ndarray:
    """[cos]_+ between L2-normalised embeddings: (R, d) x (C, d) -> (R, C) in [0, 1]."""
    return np.clip(e_rows @ e_cols.T, 0.0, 1.0).astype(np.float32)


def verb_noun_lemmas(texts: Sequence[str]) -> tuple[list[frozenset[str]], list[frozenset[str]]]:
    """Per text: the lemmas tagged VERB, and those tagged NOUN (stop words removed)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    from momentsearch.text.phrases import spacy_pipeline

    verbs, nouns = [], []
    for doc in spacy_pipeline().pipe([t.strip() for t in texts], batch_size=256):
        lem = [(t.lemma_.lower(), t.pos_) for t in doc if t.is_alpha and t.lemma_.lower() not in ENGLISH_STOP_WORDS]
        verbs.append(frozenset(w for w, p in lem if p == "VERB"))
        nouns.append(frozenset(w for w, p in lem if p == "NOUN"))
    return verbs, nouns


class PosIndex:
    """Part-of-speech-aware IoU: alpha_v IoU(verb sets) + alpha_n IoU(noun sets), over lemmas
    (:meth:`lemmas`, Wray et al.'s PoS proxy) or WordNet synsets (:meth:`synsets`, their Eq. 8)."""

    def __init__(self, verbs: Sequence[frozenset[str]], nouns: Sequence[frozenset[str]],
                 alpha_verb: float = 0.5, alpha_noun: float = 0.5):
        if abs(alpha_verb + alpha_noun - 1.0) > 1e-9:
            raise ValueError("alpha_verb + alpha_noun must be 1")
        self.verbs, self.nouns = BowIndex(word_sets=verbs), BowIndex(word_sets=nouns)
        self.alpha_verb, self.alpha_noun = alpha_verb, alpha_noun

    @classmethod
    def lemmas(cls, texts: Sequence[str]) -> PosIndex:
        return cls(*verb_noun_lemmas(texts))

    @classmethod
    def synsets(cls, texts: Sequence[str], wsd: str = "lesk") -> PosIndex:
        return cls(*verb_noun_synsets(texts, wsd))

    def iou(self, rows: slice | np.ndarray, cols: slice | np.ndarray | None = None) -> np.ndarray:
        return self.alpha_verb * self.verbs.iou(rows, cols) + self.alpha_noun * self.nouns.iou(rows, cols)


def pos_iou(a: str, b: str) -> float:
    return float(PosIndex.lemmas([a, b]).iou(np.array([0]), np.array([1]))[0, 0])


def verb_noun_synsets(texts: Sequence[str], wsd: str = "lesk") -> tuple[list[frozenset[str]], list[frozenset[str]]]:
    """Per text: the WordNet synsets of its verbs, and of its nouns (stop words removed).

    ``wsd="lesk"`` picks each word's sense with the Lesk algorithm in the caption's context (as Wray
    et al. do for MSR-VTT); ``"first"`` takes WordNet's most frequent sense. A word WordNet lacks
    stands for itself."""
    from nltk.wsd import lesk
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    from momentsearch.text.phrases import spacy_pipeline
    from momentsearch.text.wordnet import wordnet

    if wsd not in ("lesk", "first"):
        raise ValueError(f"wsd must be 'lesk' or 'first', got {wsd!r}")
    wn = wordnet()
    verbs, nouns = [], []
    for doc in spacy_pipeline().pipe([t.strip() for t in texts], batch_size=256):
        context = [t.text.lower() for t in doc if t.is_alpha]
        sets: dict[str, set[str]] = {"VERB": set(), "NOUN": set()}
        for tok in doc:
            lemma = tok.lemma_.lower()
            if tok.pos_ not in sets or not tok.is_alpha or lemma in ENGLISH_STOP_WORDS:
                continue
            pos = "v" if tok.pos_ == "VERB" else "n"
            cands = wn.synsets(lemma, pos)
            if not cands:
                sets[tok.pos_].add(f"{lemma}.{pos}")
                continue
            sense = lesk(context, lemma, pos, synsets=cands) if wsd == "lesk" else cands[0]
            sets[tok.pos_].add((sense or cands[0]).name())
        verbs.append(frozenset(sets["VERB"]))
        nouns.append(frozenset(sets["NOUN"]))
    return verbs, nouns


def synset_iou(a: str, b: str, wsd: str = "lesk") -> float:
    return float(PosIndex.synsets([a, b], wsd).iou(np.array([0]), np.array([1]))[0, 0])


from momentsearch.relevance.meteor import meteor, meteor_matrix  # noqa: E402,F401  (re-exported)
