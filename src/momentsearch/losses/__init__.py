"""Losses shared by models: ranking (hinge, with negative sampling) and localization (NLL)."""

from momentsearch.losses.localization import span_to_clip_indices, start_end_nll
from momentsearch.losses.ranking import hinge_ranking_loss, sample_negatives

__all__ = ["hinge_ranking_loss", "sample_negatives", "span_to_clip_indices", "start_end_nll"]
