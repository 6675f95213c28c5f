"""The synthetic benchmark's settings and its presets (``configs/synthetic/<preset>.yaml``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from momentsearch.config import CONFIG_DIR, load_yaml_config
from momentsearch.errors import ConfigError

PRESETS = ("tiny", "small", "converge", "default", "large", "charades", "charades_vo")


@dataclass(frozen=True)
class OracleWeights:
    """How the oracle grades a (query, event) pair; see :mod:`momentsearch.data.synthetic.oracle`."""

    action: float = 0.5  # weight of the action match
    object: float = 0.5  # weight of the object match
    related_action: float = 0.3  # similarity of two actions of one group (open ~ close)
    related_object: float = 0.5  # similarity of two objects of one group (cup ~ mug)
    scene_mismatch: float = 0.8  # factor when the query names another scene
    subject_mismatch: float = 0.8  # factor when the query names another subject (man vs woman)
    adjective_mismatch: float = 0.9  # factor when the query names another attribute (red vs blue)

    def __post_init__(self) -> None:
        if abs(self.action + self.object - 1.0) > 1e-9:
            raise ValueError("oracle weights action + object must sum to 1 (an exact match scores 1.0)")
        for name in ("related_action", "related_object", "scene_mismatch", "subject_mismatch", "adjective_mismatch"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"oracle weight {name} must lie in [0, 1]")


@dataclass(frozen=True)
class SyntheticConfig:
    name: str = "default"
    seed: int = 0
    n_videos: int = 2000
    splits: dict[str, float] = field(default_factory=lambda: {"train": 0.7, "val": 0.15, "test": 0.15})
    # timing (seconds)
    clip_length: float = 2.0
    video_duration: tuple[float, float] = (20.0, 150.0)
    video_duration_median: float = 60.0
    event_duration: tuple[float, float] = (2.0, 40.0)
    event_duration_median: float = 8.0
    event_gap_mean: float = 4.0  # mean pause between consecutive events
    overlap_prob: float = 0.2  # chance an event starts inside the previous one
    # annotation
    captions_per_event: tuple[int, int] = (1, 3)
    uncaptioned_event_prob: float = 0.1  # events that happen but nobody described (still in the oracle)
    generic_subject_prob: float = 0.4  # captions saying "a person" instead of "a man"
    adjective_prob: float = 0.4  # events whose object has an attribute (red cup)
    # features and difficulty
    feature_dim: int = 128
    noise: float = 0.6  # norm of the per-clip Gaussian noise (prototypes have norm 1)
    style_strength: float = 0.5  # per-video style vector
    scene_strength: float = 0.3
    subject_strength: float = 0.2
    adjective_strength: float = 0.4
    confusability: float = 0.3  # cosine between prototypes of one concept group
    distractors_per_minute: float = 2.0  # short single-concept flashes that are not events
    distractor_strength: float = 0.6
    # subtitles
    subtitles: bool = True
    subtitle_dim: int = 64
    mention_prob: float = 0.4  # events whose object a subtitle line names
    fillers_per_minute: float = 4.0
    oracle: OracleWeights = field(default_factory=OracleWeights)
    # a real-caption benchmark (issue 43): "charades-sta" keeps Charades-STA's captions, spans, videos and
    # durations and draws clip features from the real action timelines (data/synthetic/charades.py)
    source: str = ""
    data_dir: str = ""  # its charades_sta folder ("": $MOMENTSEARCH_SHARED_DATA/charades_sta, ../shared/data/...)
    action_strength: float = 1.0  # the weight of an action class's prototype in the clips it covers
    # issue 75: "independent" (one random unit picture per class) or "verb_object" (built from the class's verb and
    # object read from its captions, data/synthetic/charades_parts.py); instance_noise: per action instance, a unit
    # vector of its own times this is added to its class's picture; people_strength: a video's style is then of its
    # scene and person (the CSVs' columns) at this share
    class_structure: str = "independent"
    instance_noise: float = 0.0
    people_strength: float = 0.0

    def __post_init__(self) -> None:
        if self.source not in ("", "charades-sta"):
            raise ValueError(f"source must be '' (synthetic) or 'charades-sta', got {self.source!r}")
        if self.class_structure not in ("independent", "verb_object"):
            raise ValueError(f"class_structure must be independent or verb_object, got {self.class_structure!r}")
        if not (0 <= self.instance_noise < 10 and 0 <= self.people_strength <= 1):
            raise ValueError("instance_noise must be in [0, 10) and people_strength in [0, 1]")
        if self.n_videos < 1:
            raise ValueError("n_videos must be >= 1")
        if abs(sum(self.splits.values()) - 1.0) > 1e-6 or any(v < 0 for v in self.splits.values()):
            raise ValueError(f"split fractions must be >= 0 and sum to 1, got {self.splits}")
        lo, hi = self.video_duration
        if not 0 < lo <= self.video_duration_median <= hi:
            raise ValueError("need 0 < video_duration min <= median <= max")
        elo, ehi = self.event_duration
        if not 0 < elo <= self.event_duration_median <= ehi:
            raise ValueError("need 0 < event_duration min <= median <= max")
        if elo > lo:
            raise ValueError("the shortest event must fit in the shortest video")
        if not 1 <= self.captions_per_event[0] <= self.captions_per_event[1]:
            raise ValueError("captions_per_event must be (min >= 1, max >= min)")
        for name in ("overlap_prob", "uncaptioned_event_prob", "generic_subject_prob", "adjective_prob",
                     "confusability", "mention_prob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1]")
        if self.feature_dim < 8 or self.clip_length <= 0:
            raise ValueError("feature_dim must be >= 8 and clip_length > 0")


def load_preset(name_or_path: str | Path) -> SyntheticConfig:
    """A preset name (tiny, default, large) or a path to a YAML file."""
    p = Path(name_or_path)
    if str(name_or_path) in PRESETS:
        p = CONFIG_DIR / "synthetic" / f"{name_or_path}.yaml"
    elif not p.suffix:
        raise ConfigError(f"unknown preset {name_or_path!r}; presets are {list(PRESETS)}, or pass a YAML path")
    return load_yaml_config(SyntheticConfig, p)
