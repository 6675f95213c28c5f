"""Sample synthetic videos: timed events, captions, subtitles and clip features.

A video has one scene and one subject (man, woman, child), and a sequence of possibly
overlapping events, each an (action, object[, adjective]) from the inventory. Clip features are

    x_t = style * s_v + scene * P_scene + subject * P_subject
          + sum_events cover_e(t) * (P_action + P_object + adjective * P_adjective)
          + sum_distractors cover_d(t) * distractor * P_concept + noise * N(0, I / dim)

where ``cover(t)`` is the fraction of clip t that the event covers and the prototypes P are unit
vectors, correlated within a concept group by ``confusability``. Everything is drawn from
``numpy.random.default_rng([seed, stream, index])``, so video i is the same whatever the corpus
size, order or chunking.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from momentsearch.data.synthetic.concepts import (
    ADVERBS,
    GENERIC_SUBJECT,
    SUBTITLE_FILLERS,
    SUBTITLE_MENTIONS,
    TEMPLATES,
    Concept,
    Inventory,
)
from momentsearch.data.synthetic.config import SyntheticConfig

_WORLD, _VIDEO = 0, 1  # rng streams


@dataclass
class Event:
    event_id: str
    start: float
    end: float
    action: str
    object: str
    adjective: str | None
    captioned: bool = True
    mentioned: bool = False  # a subtitle line names the object during the event

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.event_id, "start": self.start, "end": self.end, "action": self.action,
            "object": self.object, "adjective": self.adjective, "captioned": self.captioned,
            "mentioned": self.mentioned,
        }


@dataclass
class Caption:
    text: str
    event_id: str
    concepts: dict[str, str | None]  # action, object, adjective, subject, scene (None = not said)


@dataclass
class SyntheticVideo:
    video_id: str
    index: int
    duration: float
    scene: str
    subject: str
    events: list[Event] = field(default_factory=list)
    distractors: list[tuple[float, float, str, int]] = field(default_factory=list)  # start, end, kind, index
    subtitles: list[tuple[float, float, str, int, int]] = field(default_factory=list)  # st, ed, text, obj, filler
    captions: list[Caption] = field(default_factory=list)


class World:
    """Concept prototypes shared by all videos of one benchmark."""

    def __init__(self, cfg: SyntheticConfig, inventory: Inventory):
        self.cfg = cfg
        self.inv = inventory
        rng = np.random.default_rng([cfg.seed, _WORLD, 0])
        d = cfg.feature_dim
        self.actions = self._protos(rng, [a.group for a in inventory.actions], d)
        self.objects = self._protos(rng, [o.group for o in inventory.objects], d)
        self.scenes = self._protos(rng, [s.group for s in inventory.scenes], d)
        self.subjects = self._protos(rng, [s.group for s in inventory.subjects], d)
        self.adjectives = self._protos(rng, [a.group for a in inventory.adjectives], d)
        ds = cfg.subtitle_dim
        self.sub_objects = self._protos(rng, [o.group for o in inventory.objects], ds)
        self.sub_fillers = self._protos(rng, [f"f{i}" for i in range(len(SUBTITLE_FILLERS))], ds)
        self.scene_index = {s.id: i for i, s in enumerate(inventory.scenes)}
        self.subject_index = {s.id: i for i, s in enumerate(inventory.subjects)}
        self.adjective_index = {a.id: i for i, a in enumerate(inventory.adjectives)}

    def _protos(self, rng: np.random.Generator, groups: list[str], dim: int) -> np.ndarray:
        rho = self.cfg.confusability
        names = sorted(set(groups))
        g = _unit(rng.standard_normal((len(names), dim)))
        own = _unit(rng.standard_normal((len(groups), dim)))
        gi = np.array([names.index(x) for x in groups])
        return _unit(math.sqrt(rho) * g[gi] + math.sqrt(1.0 - rho) * own).astype(np.float32)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def _lognormal(rng: np.random.Generator, median: float, sigma: float, lo: float, hi: float) -> float:
    return float(np.clip(median * math.exp(sigma * rng.standard_normal()), lo, hi))


def _pick(rng: np.random.Generator, seq: Any) -> Any:
    return seq[int(rng.integers(len(seq)))]


def sample_video(cfg: SyntheticConfig, world: World, index: int) -> SyntheticVideo:
    inv = world.inv
    rng = np.random.default_rng([cfg.seed, _VIDEO, index])
    lo, hi = cfg.video_duration
    dur = round(_lognormal(rng, cfg.video_duration_median, 0.5, lo, hi), 2)
    video = SyntheticVideo(f"syn_{index:06d}", index, dur, _pick(rng, inv.scenes).id, _pick(rng, inv.subjects).id)
    _place_events(cfg, world, rng, video)
    _place_distractors(cfg, world, rng, video)
    if cfg.subtitles:
        _place_subtitles(cfg, world, rng, video)
    for ev in video.events:
        if ev.captioned:
            n = int(rng.integers(cfg.captions_per_event[0], cfg.captions_per_event[1] + 1))
            video.captions.extend(caption_event(cfg, inv, rng, video, ev) for _ in range(n))
    return video


def _place_events(cfg: SyntheticConfig, world: World, rng: np.random.Generator, video: SyntheticVideo) -> None:
    inv = world.inv
    dur = video.duration
    elo, ehi = cfg.event_duration
    cursor = float(rng.uniform(0.0, min(5.0, 0.1 * dur)))
    while True:
        d = _lognormal(rng, cfg.event_duration_median, 0.6, elo, min(ehi, dur))
        prev = video.events[-1] if video.events else None
        if prev is not None and rng.random() < cfg.overlap_prob:
            start = prev.start + float(rng.uniform(0.2, 0.8)) * (prev.end - prev.start)
        else:
            start = cursor + (float(rng.exponential(cfg.event_gap_mean)) if prev is not None else 0.0)
        if start + d > dur:
            if prev is not None:
                break
            d = max(elo, min(d, 0.8 * dur))
            start = float(rng.uniform(0.0, dur - d))
        action = _pick(rng, inv.actions)
        obj = inv.objects[_pick(rng, inv.compatible[action.id])]
        adj = _pick(rng, inv.adjectives).id if obj.takes_adjective and rng.random() < cfg.adjective_prob else None
        st, ed = round(start, 2), round(min(start + d, dur), 2)
        video.events.append(
            Event(f"{video.video_id}/e{len(video.events)}", st, ed, action.id, obj.id, adj,
                  captioned=bool(rng.random() >= cfg.uncaptioned_event_prob))
        )
        cursor = max(cursor, start + d)
    if not any(e.captioned for e in video.events):
        video.events[0].captioned = True  # every video has at least one query


def _place_distractors(cfg: SyntheticConfig, world: World, rng: np.random.Generator, video: SyntheticVideo) -> None:
    n = int(rng.poisson(cfg.distractors_per_minute * video.duration / 60.0))
    for _ in range(n):
        length = float(rng.uniform(1.0, 4.0))
        st = float(rng.uniform(0.0, max(0.0, video.duration - length)))
        kind = "action" if rng.random() < 0.5 else "object"
        idx = int(rng.integers(len(world.actions) if kind == "action" else len(world.objects)))
        video.distractors.append((round(st, 2), round(min(st + length, video.duration), 2), kind, idx))


def _place_subtitles(cfg: SyntheticConfig, world: World, rng: np.random.Generator, video: SyntheticVideo) -> None:
    inv = world.inv
    for ev in video.events:
        if rng.random() < cfg.mention_prob:
            oi = inv.object_index[ev.object]
            st = ev.start + float(rng.uniform(0.0, 0.7)) * (ev.end - ev.start)
            ed = min(st + float(rng.uniform(1.5, 3.0)), video.duration)
            text = _pick(rng, SUBTITLE_MENTIONS).format(object=_pick(rng, inv.objects[oi].forms))
            video.subtitles.append((round(st, 2), round(ed, 2), text, oi, -1))
            ev.mentioned = True
    for _ in range(int(rng.poisson(cfg.fillers_per_minute * video.duration / 60.0))):
        st = float(rng.uniform(0.0, max(0.0, video.duration - 1.0)))
        fi = int(rng.integers(len(SUBTITLE_FILLERS)))
        ed = min(st + float(rng.uniform(1.0, 2.5)), video.duration)
        video.subtitles.append((round(st, 2), round(ed, 2), SUBTITLE_FILLERS[fi], -1, fi))
    video.subtitles.sort(key=lambda s: (s[0], s[1]))


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def caption_event(
    cfg: SyntheticConfig, inv: Inventory, rng: np.random.Generator, video: SyntheticVideo, ev: Event
) -> Caption:
    """One templated caption of an event, with the concepts it states."""
    template = _pick(rng, TEMPLATES)
    obj: Concept = inv.objects[inv.object_index[ev.object]]
    action = inv.actions[inv.action_index[ev.action]]
    generic = rng.random() < cfg.generic_subject_prob
    subject = GENERIC_SUBJECT if generic else inv.subjects[[s.id for s in inv.subjects].index(video.subject)]
    noun = _pick(rng, obj.forms)
    adjective = None
    if ev.adjective is not None and rng.random() < 0.7:
        adjective = ev.adjective
        adj_concept = next(a for a in inv.adjectives if a.id == ev.adjective)
        noun = f"{_pick(rng, adj_concept.forms)} {noun}"
    det = _pick(rng, ("the", "some") if obj.mass else ("the", "a"))
    np_ = f"{_article(noun) if det == 'a' else det} {noun}"
    scene_concept = inv.scenes[[s.id for s in inv.scenes].index(video.scene)]
    scene_form = _pick(rng, scene_concept.forms)
    scene_phrase = f"{'on' if video.scene == 'stairs' else 'in'} the {scene_form}"
    says_scene = "{scene" in template
    text = template.format(
        subject=_pick(rng, subject.forms), verb=_pick(rng, action.forms), np=np_,
        scene=scene_phrase, scene_cap=scene_phrase[:1].upper() + scene_phrase[1:], adverb=_pick(rng, ADVERBS),
    )
    concepts = {
        "action": ev.action, "object": ev.object, "adjective": adjective,
        "subject": subject.id, "scene": video.scene if says_scene else None,
    }
    return Caption(text, ev.event_id, concepts)


def clip_coverage(starts: np.ndarray, ends: np.ndarray, n_clips: int, clip: float, duration: float) -> np.ndarray:
    """(n_clips, n_spans): the fraction of each clip that each span covers."""
    c0 = np.arange(n_clips) * clip
    c1 = np.minimum(c0 + clip, duration)
    inter = np.clip(np.minimum(c1[:, None], ends[None]) - np.maximum(c0[:, None], starts[None]), 0.0, None)
    return inter / np.maximum(c1 - c0, 1e-6)[:, None]


def video_features(cfg: SyntheticConfig, world: World, video: SyntheticVideo) -> tuple[np.ndarray, np.ndarray | None]:
    """(visual (n_clips, feature_dim), subtitle (n_clips, subtitle_dim) or None), float32."""
    inv = world.inv
    rng = np.random.default_rng([cfg.seed, _VIDEO + 1, video.index])
    n = max(1, math.ceil(video.duration / cfg.clip_length - 1e-9))
    d = cfg.feature_dim
    style = _unit(rng.standard_normal(d))
    base = (
        cfg.style_strength * style
        + cfg.scene_strength * world.scenes[world.scene_index[video.scene]]
        + cfg.subject_strength * world.subjects[world.subject_index[video.subject]]
    )
    x = np.repeat(base[None, :], n, axis=0)
    if video.events:
        ev_vec = np.stack([
            world.actions[inv.action_index[e.action]] + world.objects[inv.object_index[e.object]]
            + (cfg.adjective_strength * world.adjectives[world.adjective_index[e.adjective]] if e.adjective else 0.0)
            for e in video.events
        ])
        cov = clip_coverage(np.array([e.start for e in video.events]), np.array([e.end for e in video.events]),
                        n, cfg.clip_length, video.duration)
        x += cov @ ev_vec
    if video.distractors:
        dv = np.stack([(world.actions if k == "action" else world.objects)[i] for _, _, k, i in video.distractors])
        cov = clip_coverage(np.array([s for s, *_ in video.distractors]), np.array([e for _, e, *_ in video.distractors]),
                        n, cfg.clip_length, video.duration)
        x += cfg.distractor_strength * (cov @ dv)
    x += cfg.noise * rng.standard_normal((n, d)) / math.sqrt(d)
    if not cfg.subtitles:
        return x.astype(np.float32), None
    ds = cfg.subtitle_dim
    sub = cfg.noise * 0.5 * rng.standard_normal((n, ds)) / math.sqrt(ds)
    if video.subtitles:
        sv = np.stack([world.sub_objects[o] if o >= 0 else world.sub_fillers[f] for *_, o, f in video.subtitles])
        cov = clip_coverage(np.array([s[0] for s in video.subtitles]), np.array([s[1] for s in video.subtitles]),
                        n, cfg.clip_length, video.duration)
        sub += cov @ sv
    return x.astype(np.float32), sub.astype(np.float32)
