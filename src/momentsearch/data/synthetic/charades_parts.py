"""The verb and object of each Charades action class, read from the real captions of its moments (issue 75 part 5),
and the class pictures built from them (``class_structure: verb_object``).

Charades' 157 classes are verb-object pairs ("opening a door", "closing a door", "holding a book"), but the
files here hold only their ids (``c000``...). Each class's captions (the Charades-STA sentences whose span best
overlaps an interval of that class, ``query_classes``) say it, in a regular form: "a person is opening the
door", "person closes a door". :func:`class_parts` takes, per caption, the first word after the subject and
auxiliaries as the verb and the head of the noun phrase that follows ("a pile of clothes" -> clothes) as the
object, each reduced to the shortest form attested in the captions ("opening" -> open, "clothes" -> cloth), and
per class the most frequent of each. A class whose most frequent object is said in under a fifth of its captions,
or is the verb itself ("person starts laughing"), has no object. Pronouns are no objects.

:func:`structured_prototypes` then gives class c the picture

    P_c = unit(VERB * V[verb(c)] + OBJECT * O[object(c)] + OWN * C_c)

with V, O and C independent random unit vectors: classes sharing an object (open / close / hold the door) look
alike, as real features of the same object would, classes sharing a verb less so, classes sharing neither about
orthogonal. The generator adds, per action instance, a unit vector of its own times ``instance_noise`` (so a
moment is more than its class) and, per video, a style of its scene and person (the CSVs' ``scene`` and
``subject``).
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

VERB, OBJECT, OWN = 0.55, 0.7, 0.45  # the weights of a class picture's parts (norms before the unit scaling)
SUBJECT = set("a an the another person persons people man woman boy girl guy he she they someone somebody is are was "
              "were then and starts start started starting begins begin began beginning to also first again "
              "finally just continues continue their his her its this that one goes go quickly slowly still there "
              "who while up".split())
DETERMINERS = set("a an the some their his her its this that another two several".split())
PREPOSITIONS = set("on in into onto off out of from at to with by for under over through around about near next "
                   "behind up down away".split())
NOT_OBJECTS = set("it them something themselves himself herself itself one someone everything anything "
                  "area room".split())
STOP = PREPOSITIONS | DETERMINERS | {"and", "while", "then", "as"}


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


def _lemma(w: str, attested: Mapping[str, int]) -> str:
    """The shortest form of ``w`` with an English suffix taken off that the captions also use (else ``w``)."""
    cands = []
    for suf, adds in (("ing", ("", "e")), ("ies", ("y",)), ("es", ("", "e")), ("s", ("",)), ("ed", ("", "e"))):
        if w.endswith(suf) and len(w) > len(suf) + 2:
            stem = w[: -len(suf)]
            cands += [stem + a for a in adds]
            if len(stem) > 2 and stem[-1] == stem[-2]:
                cands.append(stem[:-1])  # putting -> put
    seen = [c for c in cands if attested.get(c, 0) > 0]
    return min(seen, key=len) if seen else w


def _verb_and_object(toks: list[str]) -> tuple[int, int | None]:
    """Indices of a caption's verb and of its object's head (None: nothing follows the verb)."""
    i = 0
    while i < len(toks) and toks[i] in SUBJECT:
        i += 1
    j = i + 1
    while j < len(toks) and (toks[j] in STOP or toks[j] in SUBJECT):
        j += 1
    if j >= len(toks):
        return i, None
    k = j
    while k + 1 < len(toks) and toks[k + 1] not in STOP:
        k += 1
    if k + 2 < len(toks) and toks[k + 1] == "of":  # a pile of clothes, a glass of water
        k += 2
        while k + 1 < len(toks) and toks[k + 1] not in STOP:
            k += 1
    return i, k


def class_parts(captions: Mapping[str, Iterable[str]]) -> dict[str, tuple[str, str | None]]:
    """Class -> (its verb, its object or None), from the captions of its moments (the module docstring)."""
    texts = {c: [_tokens(t) for t in ts] for c, ts in captions.items()}
    attested = Counter(w for ts in texts.values() for toks in ts for w in toks)
    out: dict[str, tuple[str, str | None]] = {}
    for c, ts in sorted(texts.items()):
        verbs, objects = Counter(), Counter()
        for toks in ts:
            i, k = _verb_and_object(toks)
            if i >= len(toks):
                continue
            verb = _lemma(toks[i], attested)
            verbs[verb] += 1
            if k is not None:
                obj = _lemma(toks[k], attested)
                if obj != verb and obj not in NOT_OBJECTS and obj not in SUBJECT:
                    objects[obj] += 1
        verb = verbs.most_common(1)[0][0] if verbs else c
        obj, n = objects.most_common(1)[0] if objects else (None, 0)
        out[c] = (verb, obj if obj is not None and obj != verb and n >= 0.2 * max(len(ts), 1) else None)
    return out


def _unit_rows(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.standard_normal((n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def structured_prototypes(seed: int, dim: int, parts: Mapping[str, tuple[str, str | None]]) -> dict[str, np.ndarray]:
    """Class -> its unit picture from its verb, object and own parts (the module docstring), drawn from
    ``[seed, 0, 75]``: the same parts give the same vectors in every run."""
    rng = np.random.default_rng([seed, 0, 75])
    verbs = sorted({v for v, _ in parts.values()})
    objects = sorted({o for _, o in parts.values() if o is not None})
    vv = dict(zip(verbs, _unit_rows(rng, len(verbs), dim), strict=True))
    oo = dict(zip(objects, _unit_rows(rng, len(objects), dim), strict=True))
    own = dict(zip(sorted(parts), _unit_rows(rng, len(parts), dim), strict=True))
    out = {}
    for c, (v, o) in parts.items():
        x = VERB * vv[v] + OWN * own[c] + (OBJECT * oo[o] if o is not None else 0.0)
        out[c] = x / np.linalg.norm(x)
    return out


def video_people(folder: Path) -> dict[str, tuple[str, str]]:
    """Video id -> (its scene, its person) from ``Charades_v1_{train,test}.csv`` (empty where a file lacks them)."""
    out: dict[str, tuple[str, str]] = {}
    for name in ("Charades_v1_train.csv", "Charades_v1_test.csv"):
        p = folder / name
        if not p.is_file():
            continue
        with p.open(encoding="utf-8", newline="") as fh:
            for row in csv.DictReader(fh):
                if row.get("id"):
                    out[row["id"]] = ((row.get("scene") or "").strip(), (row.get("subject") or "").strip())
    return out


__all__ = ["class_parts", "structured_prototypes", "video_people"]
