"""A real-caption benchmark (issue 43): Charades-STA's captions, spans, videos and durations, with clip features
drawn from each video's real action timeline (``momentsearch generate --preset charades``).

**What is real**: every query's text and span (``charades_sta_{train,test}.txt``), the videos, their durations
and their action intervals over 157 classes (the ``length`` and ``actions`` columns of ``Charades_v1_*.csv``).
Charades-STA's test split is the test split; its train videos are split into train and val by ``splits``.

**What is not**: the clip features. A video's clip t is

    x_t = style * s_v + sum_actions cover_a(t) * action_strength * P_class(a) + noise * N(0, I / dim)

with the generator's ingredients (:mod:`momentsearch.data.synthetic.generator`): ``s_v`` a per-video unit style
vector, ``P_c`` a unit prototype per action class (classes independent), ``cover_a(t)`` the fraction of clip t
inside the interval. With ``class_structure: verb_object`` (issue 75; the ``charades_vo`` preset) ``P_c`` is built
from the class's verb and object read from its captions (:mod:`~momentsearch.data.synthetic.charades_parts`), each
action instance adds its own unit vector times ``instance_noise``, and ``s_v`` is partly its scene's and person's. So the features come from the same labels as the relevance truth, and a model can only
learn what the action timeline holds; the text side is real.

**The oracle** is the action-class table (:mod:`momentsearch.relevance.action_classes`): a query's class is that of
the interval of its video that best overlaps its span (tIoU >= 0.5), and a moment of class c's interval anywhere
grades 1.0 for it. Each video's intervals are kept in its meta (``actions``), each query's class in its meta.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
from scipy import sparse
from tqdm import tqdm

from momentsearch.data.corpus import Corpus, Moment, Video
from momentsearch.data.relevance import MomentRelevance
from momentsearch.data.synthetic.config import SyntheticConfig
from momentsearch.errors import DatasetError
from momentsearch.fileio import write_json

SOURCE = "charades-sta"


def data_dir(cfg: SyntheticConfig) -> Path:
    """The Charades-STA folder: the config's ``data_dir``, else ``$MOMENTSEARCH_SHARED_DATA/charades_sta``, else
    ``../shared/data/charades_sta`` from the current folder."""
    if cfg.data_dir:
        return Path(cfg.data_dir)
    shared = os.environ.get("MOMENTSEARCH_SHARED_DATA")
    return Path(shared) / "charades_sta" if shared else Path("..") / "shared" / "data" / "charades_sta"


def _sources(folder: Path) -> tuple[Corpus, Corpus, Any]:
    from momentsearch.data.loaders.charades_actions import load_charades_actions
    from momentsearch.data.loaders.charades_sta import load_charades_sta

    need = [folder / f for f in ("charades_sta_train.txt", "charades_sta_test.txt", "Charades_v1_train.csv",
                                  "Charades_v1_test.csv")]
    missing = [str(p) for p in need if not p.is_file()]
    if missing:
        raise DatasetError(f"the charades preset reads Charades-STA and the Charades CSVs; missing {missing}: set "
                           "data_dir in the preset, or MOMENTSEARCH_SHARED_DATA to the folder holding charades_sta/")
    return (load_charades_sta(need[0], need[2], "train"), load_charades_sta(need[1], need[3], "test"),
            load_charades_actions(need[2], need[3]))


def charades_corpus(cfg: SyntheticConfig) -> tuple[Corpus, dict[str, list[tuple[str, float, float]]]]:
    """The benchmark's corpus (real captions, spans, durations; splits; a seeded sample of ``n_videos`` videos
    when it is smaller than Charades-STA's) and each video's action intervals."""
    from momentsearch.data.loaders.charades_actions import query_classes

    train, test, table = _sources(data_dir(cfg))
    rng = np.random.default_rng([cfg.seed, 0, 43])
    train_ids, test_ids = sorted(train.videos), sorted(test.videos)
    chosen = set(train_ids + test_ids)
    if cfg.n_videos < len(chosen):
        everything = np.array(train_ids + test_ids)
        chosen = set(everything[rng.permutation(len(everything))[: cfg.n_videos]].tolist())
    fractions = {k: v for k, v in cfg.splits.items() if k != "test"}
    total = sum(fractions.values()) or 1.0
    order = [v for v in train_ids if v in chosen]
    order = [order[i] for i in rng.permutation(len(order))]
    split_of: dict[str, str] = {v: "test" for v in test_ids if v in chosen}
    start = 0
    for k, (name, frac) in enumerate(fractions.items()):
        end = len(order) if k == len(fractions) - 1 else start + int(round(frac / total * len(order)))
        for v in order[start:end]:
            split_of[v] = name
        start = end
    videos, moments = [], []
    actions: dict[str, list[tuple[str, float, float]]] = {}
    for part in (train, test):
        classes = query_classes(part, table)
        for v in sorted(part.videos):
            if v not in split_of:
                continue
            src = part.videos[v]
            actions[v] = [(a.cls, round(a.start, 2), round(min(a.end, src.duration), 2))
                          for a in table.actions.get(v, []) if min(a.end, src.duration) > a.start]
            videos.append(Video(v, src.duration, split_of[v], cfg.clip_length, (),
                                {"actions": [list(a) for a in actions[v]], "source": SOURCE}))
        for m in part.moments:
            if m.video_id in split_of:
                moments.append(Moment(str(len(moments)), m.text, m.video_id, m.spans, split_of[m.video_id], "v",
                                      {"class": classes[m.query_id], "charades_sta_line": m.query_id}))
    return Corpus.from_parts(videos, moments, name=f"charades-{cfg.name}"), actions


def class_prototypes(cfg: SyntheticConfig, classes: list[str]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng([cfg.seed, 0, 157])
    p = rng.standard_normal((len(classes), cfg.feature_dim))
    p /= np.linalg.norm(p, axis=1, keepdims=True)
    return dict(zip(classes, p, strict=True))


def clip_features(cfg: SyntheticConfig, index: int, duration: float, acts: list[tuple[str, float, float]],
                  protos: dict[str, np.ndarray], people: np.ndarray | None = None) -> np.ndarray:
    """(n_clips, feature_dim) float32 for one video (the module's formula), drawn from ``[seed, 1, index]``;
    ``people``: the unit style of the video's scene and person (``people_strength`` of its style; issue 75)."""
    from momentsearch.data.synthetic.generator import clip_coverage

    rng = np.random.default_rng([cfg.seed, 1, index])
    n = max(1, int(np.ceil(duration / cfg.clip_length - 1e-9)))
    d = cfg.feature_dim
    style = rng.standard_normal(d)
    style /= np.linalg.norm(style)
    if people is not None and cfg.people_strength > 0:
        style = cfg.people_strength * people + (1 - cfg.people_strength) * style
        style /= np.linalg.norm(style)
    x = np.tile(cfg.style_strength * style, (n, 1))
    if acts:
        cover = clip_coverage(np.array([a[1] for a in acts]), np.array([a[2] for a in acts]), n, cfg.clip_length, duration)
        pictures = np.stack([protos[a[0]] for a in acts])
        if cfg.instance_noise > 0:  # each instance its own: a moment is more than its class
            own = rng.standard_normal(pictures.shape)
            pictures = pictures + cfg.instance_noise * own / np.linalg.norm(own, axis=1, keepdims=True)
            pictures /= np.linalg.norm(pictures, axis=1, keepdims=True)
        x += cfg.action_strength * cover @ pictures
    x += cfg.noise * rng.standard_normal((n, d)) / np.sqrt(d)
    return x.astype(np.float32)


def people_styles(cfg: SyntheticConfig, videos: list[str]) -> dict[str, np.ndarray]:
    """Video -> the unit style of its scene and person (the CSVs' columns), each a random unit vector per scene
    and per person, mixed 0.6 / 0.4; drawn from ``[seed, 0, 76]``."""
    from momentsearch.data.synthetic.charades_parts import video_people

    who = video_people(data_dir(cfg))
    scenes = sorted({who.get(v, ("", ""))[0] for v in videos})
    persons = sorted({who.get(v, ("", ""))[1] for v in videos})
    rng = np.random.default_rng([cfg.seed, 0, 76])
    s = {k: x / np.linalg.norm(x) for k, x in zip(scenes, rng.standard_normal((len(scenes), cfg.feature_dim)), strict=True)}
    p = {k: x / np.linalg.norm(x) for k, x in zip(persons, rng.standard_normal((len(persons), cfg.feature_dim)), strict=True)}
    out = {}
    for v in videos:
        sc, pe = who.get(v, ("", ""))
        x = 0.6 * s[sc] + 0.4 * p[pe]
        out[v] = x / np.linalg.norm(x)
    return out


def generate_charades_into(cfg: SyntheticConfig, out: Path, progress: bool) -> Corpus:
    """The corpus and its visual features (``features/visual.h5``) into ``out``; the caller writes the rest."""
    from momentsearch.data.feature_writers import HDF5FeatureWriter

    corpus, actions = charades_corpus(cfg)
    classes = sorted({a[0] for acts in actions.values() for a in acts})
    if cfg.class_structure == "verb_object":
        from momentsearch.data.synthetic.charades_parts import class_parts, structured_prototypes

        parts = class_parts(all_class_captions(cfg))
        parts = {c: parts.get(c, (c, None)) for c in classes}  # (a class no caption names: its own verb, no object)
        protos = structured_prototypes(cfg.seed, cfg.feature_dim, parts)
        write_json(out / "class_parts.json", {c: list(p) for c, p in sorted(parts.items())}, indent=1)
    else:
        protos = class_prototypes(cfg, classes)
    people = people_styles(cfg, list(corpus.videos)) if cfg.people_strength > 0 else {}
    with HDF5FeatureWriter(out / "features" / "visual.h5", cfg.feature_dim, attrs={"clip_length": cfg.clip_length}) as w:
        for i, v in enumerate(tqdm(list(corpus.videos.values()), desc=f"generating {cfg.name}", unit="video",
                                   disable=not progress)):
            w.add(v.video_id, clip_features(cfg, i, v.duration, actions[v.video_id], protos, people.get(v.video_id)))
    return corpus


def all_class_captions(cfg: SyntheticConfig) -> dict[str, list[str]]:
    """Class -> the captions of every Charades-STA moment of that class, train and test (the class's verb and
    object are read from all of them, whatever videos the benchmark samples)."""
    from momentsearch.data.loaders.charades_actions import query_classes

    train, test, table = _sources(data_dir(cfg))
    out: dict[str, list[str]] = {}
    for part in (train, test):
        classes = query_classes(part, table)
        for m in part.moments:
            if classes[m.query_id]:
                out.setdefault(classes[m.query_id], []).append(m.text)  # type: ignore[index]
    return out


class ActionClassOracle:
    """The charades preset's oracle: relevance from Charades' action classes (the module docstring)."""

    def __init__(self, corpus: Corpus):
        from momentsearch.data.loaders.charades_actions import Action, ActionTable

        self.corpus = corpus
        self.table = ActionTable({v.video_id: [Action(c, float(s), float(e)) for c, s, e in v.meta.get("actions", [])]
                                  for v in corpus.videos.values()})
        self.classes = {m.query_id: m.meta.get("class") for m in corpus.moments}
        self.query_ids = [m.query_id for m in corpus.moments]

    def moment_relevance(self, min_relevance: float = 0.5, query_ids: Any = None) -> MomentRelevance:
        """Every interval of each query's class, at grade 1.0 (>= any ``min_relevance`` in (0, 1])."""
        if not 0 < min_relevance <= 1:
            raise ValueError("min_relevance must lie in (0, 1]")
        vids = list(self.corpus.videos)
        vindex = {v: i for i, v in enumerate(vids)}
        by_class: dict[str, list[tuple[int, float, float, float]]] = {}
        for v, acts in self.table.actions.items():
            for a in acts:
                by_class.setdefault(a.cls, []).append((vindex[v], a.start, a.end, 1.0))
        qids = self.query_ids if query_ids is None else list(query_ids)
        return MomentRelevance.from_rows(qids, vids, [by_class.get(self.classes[q] or "", []) for q in qids])

    def query_relevance(self, corpus: Corpus, min_relevance: float = 0.5) -> sparse.csr_matrix:
        """(Q, Q) over ``corpus.moments``: (i, j) = the grade of query j's annotated moment for query i's class
        (its best tIoU with an interval of that class in j's video), kept where >= ``min_relevance``."""
        from momentsearch.data.loaders.charades_actions import grade

        ms = corpus.moments
        by_class: dict[str, list[int]] = {}
        for i, m in enumerate(ms):
            if self.classes.get(m.query_id):
                by_class.setdefault(self.classes[m.query_id], []).append(i)  # type: ignore[index]
        rows, cols, vals = [], [], []
        for cls, members in by_class.items():
            g = np.array([grade(self.table, cls, m.video_id or "", *m.span) for m in ms], np.float32)
            keep = np.flatnonzero(g >= min_relevance)
            for i in members:
                rows += [i] * len(keep)
                cols += keep.tolist()
                vals += g[keep].tolist()
        return sparse.csr_matrix((np.asarray(vals, np.float32), (rows, cols)), shape=(len(ms), len(ms)))
