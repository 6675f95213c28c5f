"""The MVMR paper's span-prediction baselines (Yang et al. App. D): CET, a cross-encoder, and BET, a
bi-encoder, two model families on one network and loss."""

from momentsearch.models.span.config import SpanConfig
from momentsearch.models.span.family import BETFamily, CETFamily
from momentsearch.models.span.network import SpanNet

__all__ = ["BETFamily", "CETFamily", "SpanConfig", "SpanNet"]
