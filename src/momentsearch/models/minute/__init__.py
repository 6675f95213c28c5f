"""MINUTE (Hou et al., "Multi-video Moment Ranking with Multimodal Clue"): a two-stage model family."""

from momentsearch.models.minute.config import MINUTEConfig
from momentsearch.models.minute.family import MINUTEFamily
from momentsearch.models.minute.network import MINUTE

__all__ = ["MINUTE", "MINUTEConfig", "MINUTEFamily"]
